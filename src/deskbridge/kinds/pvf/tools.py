"""The `pvf_*` tools (names and parameters as in the pvfine MCP design's tool table), thin over `PvfService`.

Lifecycle tools (open, close, save, save-as) return a `taskId` at once and wait up to `waitSeconds`
(default 2) for the result, forwarding the task's progress as MCP progress notifications; a task still
running is followed with `pvf_task_status`. Every tool that changes something takes `requestId`: the App
de-duplicates it for every tool (same caller + id + arguments → the first result; other arguments →
`REQUEST_CONFLICT`).
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import Field

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import LIST_PAGE_DEFAULT, LIST_PAGE_MAX, PLAN_PAGE_MAX_ITEMS
from deskbridge.core.plans import PlanKind
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.pvf.annotation_tools import annotation_tools
from deskbridge.kinds.pvf.service import READ_PAGE_MAX_CHARS, SEARCH_PAGE_MAX_BYTES, PvfService

RequestId = Field(
    None, description="Client-chosen id; a retry with the same id and arguments returns the first result."
)
WaitSeconds = Field(
    2.0, ge=0, le=60, description="How long to wait for the task before returning its taskId."
)
DirtyPolicyField = Field(
    "reject",
    description="Unsaved changes of the current archive: reject (UNSAVED_CHANGES), save first, or discard them.",
)


class Ident(ToolArgs):
    workspaceId: str = Field(description="From pvf_workspace_info / pvf_archive_open.")


class InfoArgs(NoArgs):
    pass


class ListDirArgs(Ident):
    path: str = Field("", description="Archive folder, '/'-separated; '' is the root.")
    cursor: str | None = None
    limit: int = Field(LIST_PAGE_DEFAULT, ge=1, le=LIST_PAGE_MAX)


class ReadArgs(Ident):
    path: str = Field(description="Archive path, e.g. equipment/weapon/sword.equ (case-insensitive).")
    startLine: int = Field(1, ge=1)
    endLine: int | None = Field(None, ge=1)
    expectedRevision: int | None = None
    maxChars: int = Field(READ_PAGE_MAX_CHARS, ge=1, le=READ_PAGE_MAX_CHARS)


class SearchArgs(Ident):
    query: str = Field(min_length=1, max_length=1000)
    mode: Literal["path", "content"] = Field(
        "path", description="path: substring of the path; content: of the text."
    )
    scope: str = Field("", description="Only under this archive folder.")
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=LIST_PAGE_MAX)
    maxBytes: int = Field(SEARCH_PAGE_MAX_BYTES, ge=1024, le=SEARCH_PAGE_MAX_BYTES)


class KeyOptions(ToolArgs):
    encoding: str | None = Field(
        None, description="Classic pack encoding: tw, cn, kr, jp, utf8 (default: detect)."
    )
    keyFile: str | None = Field(None, description="Paged nkpi: absolute path of a key file (JSON).")
    skDat: str | None = Field(None, description="Paged nkpi: absolute path of the client's sk.dat.")
    rsaModulus: str | None = Field(None, description="Paged nkpi: RSA modulus (hex) that opens sk.dat.")
    rsaPrivateExponent: str | None = Field(None, description="Paged nkpi: RSA private exponent (hex).")
    metadataKey: str | None = Field(None, description="Paged nkpi: 32-byte metadata key (64 hex digits).")


class OpenArgs(KeyOptions):
    path: str = Field(description="Absolute path of the .pvf archive on this machine.")
    expectedWorkspaceEpoch: int | None = Field(None, description="workspaceEpoch from pvf_workspace_info.")
    workspaceId: str | None = Field(None, description="The open archive's id, when one is open.")
    expectedRevision: int | None = None
    dirtyPolicy: Literal["reject", "save", "discard"] = DirtyPolicyField
    requestId: str | None = RequestId
    waitSeconds: float = WaitSeconds


class CloseArgs(Ident):
    expectedRevision: int | None = None
    dirtyPolicy: Literal["reject", "save", "discard"] = DirtyPolicyField
    requestId: str | None = RequestId
    waitSeconds: float = WaitSeconds


class SaveArgs(Ident):
    expectedRevision: int | None = None
    requestId: str | None = RequestId
    waitSeconds: float = WaitSeconds


class SaveAsArgs(SaveArgs):
    path: str = Field(description="Absolute path of the copy; its folder must exist.")
    overwrite: bool = Field(False, description="Replace an existing file (needs targetIdentity).")
    targetIdentity: dict[str, Any] | None = Field(
        None, description="data.identity of the TARGET_EXISTS answer, checked again right before replacing."
    )


class TaskArgs(ToolArgs):
    taskId: str
    logCursor: str | None = None


class Edit(ToolArgs):
    path: str = Field(description="Archive path of the file to write, create or delete.")
    text: str | None = Field(None, description="New editable text (script dialect or plain text).")
    base64: str | None = Field(None, description="New raw payload bytes, base64.")
    delete: bool = Field(False, description="Delete the file.")


class EditPrepareArgs(Ident):
    expectedRevision: int = Field(description="The revision you read the files at.")
    edits: list[Edit] = Field(min_length=1, max_length=100)
    requestId: str | None = RequestId


class PlanPreviewArgs(ToolArgs):
    planId: str
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=PLAN_PAGE_MAX_ITEMS)


class PlanApplyArgs(ToolArgs):
    planId: str
    expectedRevision: int | None = None
    changeKeys: list[str] = Field(min_length=1, description="The changeKeys to apply (see the preview).")
    acknowledgedWarningIds: list[str] = Field(default_factory=list)
    requestId: str | None = RequestId


class PlanDiscardArgs(ToolArgs):
    planId: str


class ResolveArgs(Ident):
    link: str | None = Field(None, description="A string link like <3::name_1>: its text.")
    text: str | None = Field(None, description="Text to look up: the string links whose text contains it.")
    listPath: str | None = Field(None, description="A .lst registry, with id (→ path) or path (→ ids).")
    id: int | None = None
    path: str | None = None
    limit: int = Field(20, ge=1, le=200)


class RegistriesArgs(Ident):
    cursor: str | None = None
    limit: int = Field(100, ge=1, le=LIST_PAGE_MAX)


class ImportPrepareArgs(Ident):
    expectedRevision: int
    sourcePaths: list[str] = Field(
        min_length=1, max_length=1000, description="Absolute local files or folders."
    )
    targetDir: str = Field("", description="Archive folder to import into; '' is the root.")
    waitSeconds: float = WaitSeconds
    mode: Literal["text", "raw"] = Field(
        "text",
        description="text: UTF-8 files compiled like the editor (scripts in the dialect, text in the archive's "
        "encoding); raw: the bytes as they are.",
    )
    requestId: str | None = RequestId


class ImportPreviewArgs(ToolArgs):
    importPlanId: str
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=PLAN_PAGE_MAX_ITEMS)


class ImportApplyArgs(ToolArgs):
    importPlanId: str
    expectedRevision: int | None = None
    selectedKeys: list[str] = Field(min_length=1)
    overwriteKeys: list[str] = Field(
        default_factory=list, description="Each selected key that overwrites a file."
    )
    acknowledgedWarningIds: list[str] = Field(default_factory=list)
    requestId: str | None = RequestId


class ImportDiscardArgs(ToolArgs):
    importPlanId: str


class ExportPrepareArgs(Ident):
    expectedRevision: int
    source: Literal["selection", "memory", "working", "commit"] = "selection"
    scopes: list[str] = Field(
        default_factory=list, description="selection: archive files or folders ('' = all)."
    )
    mode: Literal["direct", "mod"] = "direct"
    format: str | None = Field(None, description="mode mod: 110USextend or 115CN-mod (pvf_export_formats).")
    name: str | None = None
    version: str | None = Field(None, description="Default 1.0.")
    modId: str | None = Field(None, description="115CN-mod: stable unique MOD id, reused for updates.")
    includeDependencies: bool = Field(
        False, description="Add the string-table entries the exported scripts use (110USextend merge/)."
    )
    commitId: str | None = Field(None, description="source commit: the history commit (pvf_history).")
    requestId: str | None = RequestId


class ExportPreviewArgs(ToolArgs):
    exportPlanId: str
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=PLAN_PAGE_MAX_ITEMS)


class ExportExecuteArgs(ToolArgs):
    exportPlanId: str
    outputParent: str = Field(description="Absolute existing folder to publish into.")
    outputName: str | None = Field(None, description="direct: the new folder's name (required).")
    selectedEntryKeys: list[str] = Field(default_factory=list, description="Default: every entry.")
    waitSeconds: float = WaitSeconds
    acknowledgedWarningIds: list[str] = Field(default_factory=list)
    requestId: str | None = RequestId


class ExportDiscardArgs(ToolArgs):
    exportPlanId: str


class RecoveryPrepareArgs(Ident):
    expectedRevision: int
    requestId: str | None = RequestId


class RecoveryDiscardArgs(Ident):
    pass


class HistoryArgs(Ident):
    cursor: str | None = None
    limit: int = Field(50, ge=1, le=LIST_PAGE_MAX)


def _absolute(raw: str | None, what: str) -> Path | None:
    if raw is None:
        return None
    p = Path(raw)
    if not p.is_absolute():
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{what} must be an absolute path, got {raw!r}")
    return p


def open_options(args: KeyOptions) -> dict[str, Any]:
    """The `open_archive` options from the tool arguments, exactly as the CLI builds them."""
    from deskbridge.kinds.pvf.cli import key_material

    keys = key_material(
        _absolute(args.keyFile, "keyFile"),
        _absolute(args.skDat, "skDat"),
        args.rsaModulus,
        args.rsaPrivateExponent,
        args.metadataKey,
    )
    return {"encoding": args.encoding, "keys": keys}


def pvf_tools(svc: PvfService) -> list[ToolSpec]:
    eng = svc.engine

    def info(call: CallContext, args: InfoArgs) -> dict[str, Any]:
        return svc.info()

    def list_dir(call: CallContext, args: ListDirArgs) -> dict[str, Any]:
        return svc.list_dir(args.workspaceId, args.path, args.cursor, args.limit)

    def read_file(call: CallContext, args: ReadArgs) -> dict[str, Any]:
        return svc.read_file(
            args.workspaceId,
            args.path,
            start_line=args.startLine,
            end_line=args.endLine,
            expected_revision=args.expectedRevision,
            max_chars=args.maxChars,
        )

    def search(call: CallContext, args: SearchArgs) -> dict[str, Any]:
        return svc.search(
            args.workspaceId,
            query=args.query,
            mode=args.mode,
            scope=args.scope,
            cursor=args.cursor,
            limit=args.limit,
            max_bytes=args.maxBytes,
        )

    async def archive_open(call: CallContext, args: OpenArgs) -> dict[str, Any]:
        path = _absolute(args.path, "path")
        assert path is not None
        options = open_options(args)
        svc.precheck(
            "open",
            epoch=args.expectedWorkspaceEpoch,
            workspace_id=args.workspaceId,
            revision=args.expectedRevision,
        )

        async def body(progress: Any) -> dict[str, Any]:
            return await svc.open_archive(
                path,
                caller=call.caller,
                options=options,
                epoch=args.expectedWorkspaceEpoch,
                workspace_id=args.workspaceId,
                revision=args.expectedRevision,
                dirty_policy=args.dirtyPolicy,
                progress=progress,
            )

        return await svc.run_task(call, "pvf_archive_open", body, args.waitSeconds)

    async def archive_close(call: CallContext, args: CloseArgs) -> dict[str, Any]:
        svc.precheck("close", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision)

        async def body(progress: Any) -> dict[str, Any]:
            return await svc.close_archive(
                caller=call.caller,
                workspace_id=args.workspaceId,
                revision=args.expectedRevision,
                dirty_policy=args.dirtyPolicy,
                progress=progress,
            )

        return await svc.run_task(call, "pvf_archive_close", body, args.waitSeconds)

    async def archive_save(call: CallContext, args: SaveArgs) -> dict[str, Any]:
        svc.precheck("save", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision)

        async def body(progress: Any) -> dict[str, Any]:
            return await svc.save(
                caller=call.caller,
                workspace_id=args.workspaceId,
                revision=args.expectedRevision,
                progress=progress,
            )

        return await svc.run_task(call, "pvf_archive_save", body, args.waitSeconds)

    async def archive_save_as(call: CallContext, args: SaveAsArgs) -> dict[str, Any]:
        _absolute(args.path, "path")
        svc.precheck("save_as", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision)

        async def body(progress: Any) -> dict[str, Any]:
            return await svc.save_as(
                caller=call.caller,
                workspace_id=args.workspaceId,
                revision=args.expectedRevision,
                path=args.path,
                overwrite=args.overwrite,
                identity=args.targetIdentity,
                progress=progress,
            )

        return await svc.run_task(call, "pvf_archive_save_as", body, args.waitSeconds)

    def task_status(call: CallContext, args: TaskArgs) -> dict[str, Any]:
        return svc.task_status(args.taskId, args.logCursor)

    def edit_prepare(call: CallContext, args: EditPrepareArgs) -> dict[str, Any]:
        return svc.edit_prepare(
            call.caller, args.workspaceId, args.expectedRevision, [e.model_dump() for e in args.edits]
        )

    def edit_preview(call: CallContext, args: PlanPreviewArgs) -> dict[str, Any]:
        out = eng.preview_plan(args.planId, args.cursor, args.limit, kind=PlanKind.EDIT)
        out["plan"] = eng.get_plan(args.planId, PlanKind.EDIT)
        return out

    def edit_apply(call: CallContext, args: PlanApplyArgs) -> dict[str, Any]:
        return eng.apply_plan(
            args.planId,
            caller=call.caller,
            change_keys=args.changeKeys,
            expected_revision=args.expectedRevision,
            acknowledged_warning_ids=args.acknowledgedWarningIds,
            kind=PlanKind.EDIT,
        )

    def edit_discard(call: CallContext, args: PlanDiscardArgs) -> dict[str, Any]:
        return eng.discard_plan(args.planId, caller=call.caller, kind=PlanKind.EDIT)

    def resolve(call: CallContext, args: ResolveArgs) -> dict[str, Any]:
        if not (args.link or args.text or args.listPath):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "pass link, text, or listPath with id or path")
        return svc.resolve(args.workspaceId, args.model_dump())

    def registries(call: CallContext, args: RegistriesArgs) -> dict[str, Any]:
        return svc.list_registries(args.workspaceId, args.cursor, args.limit)

    async def import_prepare(call: CallContext, args: ImportPrepareArgs) -> dict[str, Any]:
        svc._ws(args.workspaceId, args.expectedRevision)  # identity errors at once, not from the task

        def fn(handle: Any, task: Any) -> dict[str, Any]:
            plan = svc.import_prepare(
                call.caller,
                args.workspaceId,
                args.expectedRevision,
                args.sourcePaths,
                args.targetDir,
                args.mode,
                task=task,
                progress=lambda d, t: handle.progress(d, None, "reading sources"),
            )
            return {"importPlanId": plan["planId"], **plan}

        return await svc.run_write_task(call, "pvf_import_prepare", fn, args.waitSeconds)

    def import_preview(call: CallContext, args: ImportPreviewArgs) -> dict[str, Any]:
        out = eng.preview_plan(args.importPlanId, args.cursor, args.limit, kind=PlanKind.IMPORT)
        out["plan"] = eng.get_plan(args.importPlanId, PlanKind.IMPORT)
        return out

    def import_apply(call: CallContext, args: ImportApplyArgs) -> dict[str, Any]:
        return svc.import_apply(
            call.caller, args.importPlanId, args.expectedRevision, args.selectedKeys, args.overwriteKeys
        )

    def import_discard(call: CallContext, args: ImportDiscardArgs) -> dict[str, Any]:
        out = eng.discard_plan(args.importPlanId, caller=call.caller, kind=PlanKind.IMPORT)
        svc._drop_spills()
        return out

    def export_formats(call: CallContext, args: NoArgs) -> dict[str, Any]:
        from deskbridge.kinds.pvf.transfer import EXPORT_FORMATS

        return {"formats": EXPORT_FORMATS}

    async def export_prepare(call: CallContext, args: ExportPrepareArgs) -> dict[str, Any]:
        # An export reads committed content only, so an editor's unsynced draft would be silently left out:
        # ask the editors first, like a save (seed: "存在归档文本或 GUI 草稿时返回 UI_DRAFT_PENDING").
        ws = svc._ws(args.workspaceId, args.expectedRevision)
        op_id = "op-" + secrets.token_hex(6)
        outcome = "failed"
        try:
            await eng.drafts.check(op_id, ws, "export")
            outcome = "ok"
        finally:
            eng.drafts.release(op_id, outcome)
        plan = await anyio.to_thread.run_sync(
            lambda: svc.export_prepare(
                call.caller, args.workspaceId, args.expectedRevision, args.model_dump()
            )
        )
        return {"exportPlanId": plan["planId"], **plan}

    def export_preview(call: CallContext, args: ExportPreviewArgs) -> dict[str, Any]:
        out = eng.preview_plan(args.exportPlanId, args.cursor, args.limit, kind=PlanKind.EXPORT)
        for item in out["items"]:
            item["entryKey"] = item["changeKey"]
        out["plan"] = eng.get_plan(args.exportPlanId, PlanKind.EXPORT)
        return out

    async def export_execute(call: CallContext, args: ExportExecuteArgs) -> dict[str, Any]:
        eng.get_plan(args.exportPlanId, PlanKind.EXPORT)  # an unknown plan is refused at once

        def fn(handle: Any, task: Any) -> dict[str, Any]:
            return svc.export_execute(
                call.caller,
                args.exportPlanId,
                args.outputParent,
                args.outputName,
                args.selectedEntryKeys,
                args.acknowledgedWarningIds,
                task=task,
                progress=lambda d, t: handle.progress(d, t, "writing the package"),
            )

        return await svc.run_write_task(call, "pvf_export_execute", fn, args.waitSeconds)

    def export_discard(call: CallContext, args: ExportDiscardArgs) -> dict[str, Any]:
        return eng.discard_plan(args.exportPlanId, caller=call.caller, kind=PlanKind.EXPORT)

    def history(call: CallContext, args: HistoryArgs) -> dict[str, Any]:
        return svc.history(args.workspaceId, args.cursor, args.limit)

    def recovery_prepare(call: CallContext, args: RecoveryPrepareArgs) -> dict[str, Any]:
        return svc.recovery_prepare(call.caller, args.workspaceId, args.expectedRevision)

    def recovery_discard(call: CallContext, args: RecoveryDiscardArgs) -> dict[str, Any]:
        return svc.recovery_discard(args.workspaceId)

    transfer_tools = [
        ToolSpec(
            "pvf_recovery_prepare",
            "Recover unsaved changes",
            "When pvf_workspace_info shows `recovery` (unsaved changes autosaved by an earlier session on this very "
            "archive), build an edit plan from them: preview with pvf_edit_preview, apply with pvf_edit_apply.",
            RecoveryPrepareArgs,
            recovery_prepare,
        ),
        ToolSpec(
            "pvf_recovery_discard",
            "Forget recovered changes",
            "Delete the recovery file offered for the open archive.",
            RecoveryDiscardArgs,
            recovery_discard,
            destructive=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_import_prepare",
            "Prepare an import",
            "Freeze local files/folders (absolute paths) and map them into the archive: a file by its name, a "
            "folder keeps its name and layout. Refuses symlinks, special files, two sources for one target; at "
            "most 10,000 files, 8 MiB each, 64 MiB in all. mode text compiles UTF-8 text, raw keeps bytes.",
            ImportPrepareArgs,
            import_prepare,
        ),
        ToolSpec(
            "pvf_import_preview",
            "Preview an import",
            "One page: source, target, type, size, add or overwrite, diff.",
            ImportPreviewArgs,
            import_preview,
            read_only=True,
        ),
        ToolSpec(
            "pvf_import_apply",
            "Apply an import",
            "Commit the selectedKeys to the workspace (not to disk); every overwrite must also be in "
            "overwriteKeys. All or nothing.",
            ImportApplyArgs,
            import_apply,
        ),
        ToolSpec(
            "pvf_import_discard",
            "Discard an import",
            "Drop the frozen import.",
            ImportDiscardArgs,
            import_discard,
        ),
        ToolSpec(
            "pvf_export_formats",
            "Export formats",
            "The export formats: direct, 110USextend, 115CN-mod, with what each can write.",
            NoArgs,
            export_formats,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_export_prepare",
            "Prepare an export",
            "Snapshot what to export: source selection (scopes), memory (unsaved changes), working (since the first "
            "history commit) or commit (commitId); mode direct or mod (format, name, version, modId for 115CN-mod). "
            "Drafts in the editor are not included.",
            ExportPrepareArgs,
            export_prepare,
        ),
        ToolSpec(
            "pvf_export_preview",
            "Preview an export",
            "One page of the output tree: entryKey, size, dependency hints, skipped items and warnings.",
            ExportPreviewArgs,
            export_preview,
            read_only=True,
        ),
        ToolSpec(
            "pvf_export_execute",
            "Run an export",
            "Publish the selected entries into a new folder (or zip) under outputParent, never over an existing "
            "one (TARGET_EXISTS); warnings must be acknowledged; STALE_EXPORT when the workspace moved on.",
            ExportExecuteArgs,
            export_execute,
        ),
        ToolSpec(
            "pvf_export_discard",
            "Discard an export",
            "Drop the export snapshot.",
            ExportDiscardArgs,
            export_discard,
        ),
        ToolSpec(
            "pvf_history",
            "Version history",
            "The archive's saved commits (paths, action, time, source UI/MCP/CLI), newest last, paginated.",
            HistoryArgs,
            history,
            read_only=True,
        ),
    ]

    lifecycle_note = (
        " Returns a taskId at once and waits up to waitSeconds for the result (progress is reported); follow a "
        "running task with pvf_task_status."
    )
    return [
        *transfer_tools,
        ToolSpec(
            "pvf_workspace_info",
            "Workspace info",
            "Whether an archive is open, workspaceEpoch, workspaceId, source path, format, revision, unsaved state "
            "(sourceDirty), editor drafts, running tasks, pending plans, content index status, capabilities version. "
            "Call first.",
            InfoArgs,
            info,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_list_dir",
            "List an archive folder",
            "One page of a folder of the open archive: sub-folders then files, with changed markers and revision.",
            ListDirArgs,
            list_dir,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_read_file",
            "Read an archive file",
            "A file's editable text (scripts decompiled to the dialect, string links kept as <id::key>) by line "
            "range, with totalLines, truncated and revision; binary files give size, sha256 and a hex preview.",
            ReadArgs,
            read_file,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_search",
            "Search the archive",
            "Case-insensitive substring search: mode 'path' over paths, 'content' over file text (persistent "
            "index; NOT_READY names the index task to poll). Paginated by cursor: a page may hold fewer hits than limit "
            "(even none) while nextCursor is set, so follow it until null; a cursor from another revision is refused "
            "(search again).",
            SearchArgs,
            search,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_archive_open",
            "Open an archive",
            "Open (or switch to) a .pvf archive by absolute path; into the empty workspace pass expectedWorkspaceEpoch,"
            " over an open archive its workspaceId and expectedRevision with a dirtyPolicy. Paged nkpi archives take"
            " keyFile or skDat + rsaModulus + rsaPrivateExponent + metadataKey (KEY_REQUIRED otherwise)."
            + lifecycle_note,
            OpenArgs,
            archive_open,
            destructive=True,
        ),
        ToolSpec(
            "pvf_archive_close",
            "Close the archive",
            "Close the open archive (dirtyPolicy decides about unsaved changes); the workspaceEpoch advances."
            + lifecycle_note,
            CloseArgs,
            archive_close,
            destructive=True,
        ),
        ToolSpec(
            "pvf_archive_save",
            "Save the archive",
            "Write the committed changes to the source file (atomic, verified before replacing, .bak on the first "
            "save of a session); SOURCE_CHANGED when another program changed the file. The result says "
            "diskCommitted and lists maintenance warnings separately." + lifecycle_note,
            SaveArgs,
            archive_save,
            destructive=True,
        ),
        ToolSpec(
            "pvf_archive_save_as",
            "Save a copy",
            "Write the current content to another file; sourcePath, unsaved state and workspaceId stay (a copy "
            "only). Never overwrites unless overwrite with the targetIdentity from TARGET_EXISTS."
            + lifecycle_note,
            SaveAsArgs,
            archive_save_as,
        ),
        ToolSpec(
            "pvf_task_status",
            "Task status",
            "State, progress, result or error and a page of the log of a task (open, close, save, save-as, index).",
            TaskArgs,
            task_status,
            read_only=True,
        ),
        ToolSpec(
            "pvf_edit_prepare",
            "Prepare an edit",
            "Build a plan that writes, creates or deletes archive files (text in the script dialect, or base64 "
            "bytes). New strings come back as a separate stringtable.bin change the script requires. Nothing is "
            "written: preview, then apply.",
            EditPrepareArgs,
            edit_prepare,
        ),
        ToolSpec(
            "pvf_edit_preview",
            "Preview an edit plan",
            "One page of a plan's changes: changeKey, diff (or binary summary), requires, warnings.",
            PlanPreviewArgs,
            edit_preview,
            read_only=True,
        ),
        ToolSpec(
            "pvf_edit_apply",
            "Apply an edit plan",
            "Commit the selected changeKeys to the workspace (not to disk: save afterwards); all or nothing, the "
            "revision advances by one. STALE_PLAN when the workspace moved on.",
            PlanApplyArgs,
            edit_apply,
        ),
        ToolSpec(
            "pvf_edit_discard",
            "Discard an edit plan",
            "Drop a pending edit plan.",
            PlanDiscardArgs,
            edit_discard,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_resolve",
            "Resolve links and ids",
            "String link <id::key> → text; text → the links whose text contains it (item name lookup); a .lst "
            "registry id → archive path, or path → ids.",
            ResolveArgs,
            resolve,
            read_only=True,
        ),
        ToolSpec(
            "pvf_list_registries",
            "List registries",
            "The archive's .lst registries with their entry counts and base folders, paginated.",
            RegistriesArgs,
            registries,
            read_only=True,
        ),
        *annotation_tools(svc),
    ]
