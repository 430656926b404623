"""The `pvf_*` tools (names and parameters as in the pvfine MCP design's tool table), thin over `PvfService`.

Lifecycle tools (open, close, save, save-as) return a `taskId` at once and wait up to `waitSeconds`
(default 2) for the result, forwarding the task's progress as MCP progress notifications; a task still
running is followed with `pvf_task_status`. Every tool that changes something takes `requestId`: the App
de-duplicates it for every tool (same caller + id + arguments → the first result; other arguments →
`REQUEST_CONFLICT`).
"""

from __future__ import annotations

import asyncio
import functools
import secrets
from pathlib import Path
from typing import Any, Literal

import anyio
from pydantic import Field

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import LIST_PAGE_DEFAULT, LIST_PAGE_MAX
from deskbridge.core.plans import PlanKind
from deskbridge.core.tools import CallContext, NoArgs, ToolSpec
from deskbridge.kinds.pvf.annotation_tools import annotation_tools
from deskbridge.kinds.pvf.args import (
    PvfArgs,
    acknowledged,
    cursor,
    limit,
    plan_id,
    rehinted,
    request_id,
    revision,
    wait_seconds,
    workspace_id,
)
from deskbridge.kinds.pvf.plan_tools import plan_tools
from deskbridge.kinds.pvf.service import READ_PAGE_MAX_CHARS, SEARCH_PAGE_MAX_BYTES, PvfService


class Ident(PvfArgs):
    workspaceId: str = workspace_id()


class InfoArgs(NoArgs):
    pass


class ListDirArgs(Ident):
    path: str = Field("", description="Archive folder, '/'-separated; '' is the root.")
    cursor: str | None = cursor()
    limit: int = limit(LIST_PAGE_DEFAULT, LIST_PAGE_MAX)


class ReadArgs(Ident):
    path: str = Field(description="Archive path, e.g. equipment/weapon/sword.equ.")
    startLine: int = Field(1, ge=1, description="First line, 1-based.")
    endLine: int | None = Field(None, ge=1, description="Last line; omit for as much as fits.")
    expectedRevision: int | None = revision()
    maxChars: int = Field(
        READ_PAGE_MAX_CHARS, ge=1, le=READ_PAGE_MAX_CHARS, description="Page cap in characters."
    )


class SearchArgs(Ident):
    query: str = Field(min_length=1, max_length=1000, description="Case-insensitive substring.")
    mode: Literal["path", "content"] = Field("path", description="Match paths or file text.")
    scope: str = Field("", description="Only under this archive folder.")
    cursor: str | None = cursor()
    limit: int = limit(50, LIST_PAGE_MAX)
    maxBytes: int = Field(
        SEARCH_PAGE_MAX_BYTES, ge=1024, le=SEARCH_PAGE_MAX_BYTES, description="Page size cap in bytes."
    )


class KeyOptions(PvfArgs):
    encoding: str | None = Field(
        None, description="Classic: tw, cn, kr, jp, gb18030 or utf8; omit to detect."
    )
    keyFile: str | None = Field(None, description="nkpi: key file (JSON), absolute.")
    skDat: str | None = Field(None, description="nkpi: the client's sk.dat, absolute.")
    rsaModulus: str | None = Field(None, description="With skDat: RSA modulus, hex.")
    rsaPrivateExponent: str | None = Field(None, description="With skDat: RSA private exponent, hex.")
    metadataKey: str | None = Field(None, description="With skDat: metadata key, hex.")


Dirty = Literal["reject", "save", "discard"]
DirtyPolicy = Field("reject", description="What to do with unsaved changes.")


class OpenArgs(KeyOptions):
    path: str = Field(description="Absolute path of the .pvf file.")
    expectedWorkspaceEpoch: int | None = Field(
        None, description="From pvf_workspace_info, when nothing is open."
    )
    workspaceId: str | None = Field(None, description="The open archive, when switching.")
    expectedRevision: int | None = revision()
    dirtyPolicy: Dirty = DirtyPolicy
    requestId: str | None = request_id()
    waitSeconds: float = wait_seconds()


class CloseArgs(Ident):
    expectedRevision: int | None = revision()
    dirtyPolicy: Dirty = DirtyPolicy
    requestId: str | None = request_id()
    waitSeconds: float = wait_seconds()


class SaveArgs(Ident):
    expectedRevision: int | None = revision()
    requestId: str | None = request_id()
    waitSeconds: float = wait_seconds()


class SaveAsArgs(SaveArgs):
    path: str = Field(description="Absolute path of the copy.")
    overwrite: bool = Field(False, description="Replace an existing file (needs targetIdentity).")
    targetIdentity: dict[str, Any] | None = Field(None, description="data.identity from TARGET_EXISTS.")


class TaskArgs(PvfArgs):
    taskId: str = Field(description="From the call that started it.")
    logCursor: str | None = Field(None, description="nextCursor to continue.")


class Edit(PvfArgs):
    path: str = Field(description="Archive path.")
    text: str | None = Field(None, description="New text (script dialect or plain).")
    base64: str | None = Field(None, description="New raw bytes, base64.")
    delete: bool = Field(False, description="Delete the file.")


class EditPrepareArgs(Ident):
    expectedRevision: int = revision(required=True)
    edits: list[Edit] = Field(min_length=1, max_length=100, description="One per file.")
    requestId: str | None = request_id()


class ResolveArgs(Ident):
    link: str | None = Field(None, description="A link like <3::name_1> → its text.")
    text: str | None = Field(None, description="Text → the links that contain it.")
    listPath: str | None = Field(None, description="A .lst registry, with id or path.")
    id: int | None = Field(None, description="listPath: an entry id.")
    path: str | None = Field(None, description="listPath: an archive path.")
    limit: int = limit(20, 200)


class RegistriesArgs(Ident):
    cursor: str | None = cursor()
    limit: int = limit(100, LIST_PAGE_MAX)


class ImportPrepareArgs(Ident):
    expectedRevision: int = revision(required=True)
    sourcePaths: list[str] = Field(
        min_length=1, max_length=1000, description="Absolute local files or folders."
    )
    targetDir: str = Field("", description="Archive folder; '' is the root.")
    waitSeconds: float = wait_seconds()
    mode: Literal["text", "raw"] = Field("text", description="text: compile UTF-8; raw: bytes as is.")
    requestId: str | None = request_id()


class ExportPrepareArgs(Ident):
    expectedRevision: int = revision(required=True)
    source: Literal["selection", "memory", "working", "commit"] = Field(
        "selection",
        description="What to export (docs/pvf-workspace.md).",
    )
    scopes: list[str] = Field(default_factory=list, description="selection: files or folders ('' = all).")
    mode: Literal["direct", "mod"] = Field("direct", description="direct: plain files; mod: a package.")
    format: str | None = Field(None, description="mode mod: 110USextend or 115CN-mod.")
    name: str | None = Field(None, description="mode mod: package name.")
    version: str | None = Field(None, description="mode mod: version, else 1.0.")
    modId: str | None = Field(None, description="115CN-mod: stable MOD id.")
    includeDependencies: bool = Field(False, description="Add the strings the scripts use.")
    commitId: str | None = Field(None, description="source commit: from pvf_history.")
    requestId: str | None = request_id()


class ExportExecuteArgs(PvfArgs):
    exportPlanId: str = plan_id("pvf_export_prepare")
    outputParent: str = Field(description="Existing absolute folder.")
    outputName: str | None = Field(None, description="direct: new folder name (required).")
    selectedEntryKeys: list[str] = Field(default_factory=list, description="Omit for all.")
    waitSeconds: float = wait_seconds()
    acknowledgedWarningIds: list[str] = acknowledged()
    requestId: str | None = request_id()


class RecoveryPrepareArgs(Ident):
    expectedRevision: int = revision(required=True)
    requestId: str | None = request_id()


class RecoveryDiscardArgs(Ident):
    pass


class HistoryArgs(Ident):
    cursor: str | None = cursor()
    limit: int = limit(50, LIST_PAGE_MAX)


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

    # The prechecks take the engine lock: off the event loop, or a long holder (a script run's compile held it
    # 106 s on nkpi-1m) froze every client and the UI until it let go, where a refusal (TASK_BUSY) was due.
    async def archive_open(call: CallContext, args: OpenArgs) -> dict[str, Any]:
        path = _absolute(args.path, "path")
        assert path is not None
        from deskbridge.kinds.pvf.transfer import refuse_secret

        # An open reads the file's first bytes and names them in its error: never a credential or our own secrets.
        refuse_secret(path, svc.protected_dirs, "opened")
        options = open_options(args)
        await asyncio.to_thread(
            svc.precheck,
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
        await asyncio.to_thread(
            svc.precheck, "close", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision
        )

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
        await asyncio.to_thread(
            svc.precheck, "save", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision
        )

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
        await asyncio.to_thread(
            svc.precheck, "save_as", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision
        )

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

    def history(call: CallContext, args: HistoryArgs) -> dict[str, Any]:
        return svc.history(args.workspaceId, args.cursor, args.limit)

    def recovery_prepare(call: CallContext, args: RecoveryPrepareArgs) -> dict[str, Any]:
        return svc.recovery_prepare(call.caller, args.workspaceId, args.expectedRevision)

    def recovery_discard(call: CallContext, args: RecoveryDiscardArgs) -> dict[str, Any]:
        return svc.recovery_discard(args.workspaceId)

    export_plan = functools.partial(rehinted, plan="pvf_export_prepare")

    def unsaved() -> str:
        ws = eng.workspace
        if ws is None:
            return "no archive is open"
        return f"{len(ws.overlay)} changed file(s)" if ws.dirty else "no unsaved changes"

    def save_summary(args: SaveArgs) -> str:
        # a wrong workspace or revision is refused before anyone is asked to approve it
        svc.precheck("save", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision)
        return f"write {unsaved()} to the archive {svc.info().get('sourcePath')}"

    def save_as_summary(args: SaveAsArgs) -> str | None:
        """Asked when the copy replaces an existing file (`overwrite`: any file the caller names, not only an
        archive — an agent replaced a text file with archive bytes unasked); a copy to a new path asks nothing."""
        _absolute(args.path, "path")
        svc.precheck("save_as", epoch=None, workspace_id=args.workspaceId, revision=args.expectedRevision)
        if not args.overwrite:
            return None
        return f"replace the existing file {args.path} with a copy of the archive ({unsaved()})"

    def discard_summary(args: OpenArgs | CloseArgs) -> str | None:
        """An open or close with dirtyPolicy 'discard' over unsaved changes drops them for good (the recovery file
        goes too): the person may have made them, so it is asked like an edit. Anything else asks nothing."""
        ws = eng.workspace
        if args.dirtyPolicy != "discard" or ws is None or not ws.dirty:
            return None
        keys = ws.dirty_keys()
        shown = ", ".join(keys[:5]) + (f" and {len(keys) - 5} more" if len(keys) > 5 else "")
        then = f"open {args.path}" if isinstance(args, OpenArgs) else "close the archive"
        return f"throw away the unsaved changes to {len(keys)} file(s) ({shown}), then {then}"

    def recovery_discard_summary(args: RecoveryDiscardArgs) -> str | None:
        """Deleting the recovery file loses what a crash left unsaved, maybe the person's work: asked like a
        discard. With no recovery file on offer the call changes nothing and asks nothing."""
        from deskbridge.kinds.pvf import recovery

        offered = recovery.summary(svc.recovery)
        if offered is None:
            return None
        return f"delete the recovered unsaved changes to {offered['files']} file(s) left by a crash, for good"

    def export_summary(args: ExportExecuteArgs) -> str:
        plan = eng.get_plan(
            args.exportPlanId, PlanKind.EXPORT
        )  # an unknown plan fails before anyone is asked
        count = len(args.selectedEntryKeys) or plan["changeCount"]
        return f"export {count} file(s) into {args.outputParent}"

    transfer_tools = [
        ToolSpec(
            "pvf_recovery_prepare",
            "Recover unsaved changes",
            "Build an edit plan from the `recovery` pvf_workspace_info offers.",
            RecoveryPrepareArgs,
            recovery_prepare,
        ),
        ToolSpec(
            "pvf_recovery_discard",
            "Forget recovered changes",
            "Delete the offered recovery file.",
            RecoveryDiscardArgs,
            recovery_discard,
            destructive=True,
            idempotent=True,
            operation="discard",
            approval_summary=recovery_discard_summary,
        ),
        ToolSpec(
            "pvf_import_prepare",
            "Prepare an import",
            "Plan an import of local files or folders into the archive.",
            ImportPrepareArgs,
            import_prepare,
        ),
        ToolSpec(
            "pvf_export_formats",
            "Export formats",
            "The export formats and what each can write.",
            NoArgs,
            export_formats,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_export_prepare",
            "Prepare an export",
            "Snapshot committed content into an export plan.",
            ExportPrepareArgs,
            export_prepare,
        ),
        ToolSpec(
            "pvf_export_execute",
            "Run an export",
            "Publish the entries into a new folder or zip; never overwrites.",
            ExportExecuteArgs,
            export_plan(export_execute),
            operation="export",
            approval_summary=export_summary,
        ),
        ToolSpec(
            "pvf_history",
            "Version history",
            "The archive's saved commits.",
            HistoryArgs,
            history,
            read_only=True,
        ),
    ]

    task_note = " Returns a taskId (pvf_task_status)."
    return [
        *transfer_tools,
        ToolSpec(
            "pvf_workspace_info",
            "Workspace info",
            "Call first: the open archive, its revision and unsaved state, tasks, plans, index.",
            InfoArgs,
            info,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_list_dir",
            "List an archive folder",
            "One page of a folder's entries.",
            ListDirArgs,
            list_dir,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_read_file",
            "Read an archive file",
            "A file's text by lines (scripts decompiled); binary: size, sha256, hex.",
            ReadArgs,
            read_file,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_search",
            "Search the archive",
            "Substring search over paths or text; follow nextCursor until null (pages may be empty).",
            SearchArgs,
            search,
            read_only=True,
            idempotent=True,
        ),
        ToolSpec(
            "pvf_archive_open",
            "Open an archive",
            "Open or switch to a .pvf archive (nkpi: keyFile or skDat)." + task_note,
            OpenArgs,
            archive_open,
            destructive=True,
            operation="discard",
            approval_summary=discard_summary,
        ),
        ToolSpec(
            "pvf_archive_close",
            "Close the archive",
            "Close the open archive." + task_note,
            CloseArgs,
            archive_close,
            destructive=True,
            operation="discard",
            approval_summary=discard_summary,
        ),
        ToolSpec(
            "pvf_archive_save",
            "Save the archive",
            "Write the changes to the source file." + task_note,
            SaveArgs,
            archive_save,
            destructive=True,
            operation="save",
            approval_summary=save_summary,
        ),
        ToolSpec(
            "pvf_archive_save_as",
            "Save a copy",
            "Write a copy to another file." + task_note,
            SaveAsArgs,
            archive_save_as,
            operation="overwrite",
            approval_summary=save_as_summary,
        ),
        ToolSpec(
            "pvf_task_status",
            "Task status",
            "A task's state, result or error, and log.",
            TaskArgs,
            rehinted(task_status, task=True),
            read_only=True,
        ),
        ToolSpec(
            "pvf_edit_prepare",
            "Prepare an edit",
            "Plan writes, creates or deletes of files; then pvf_plan_preview and pvf_plan_apply.",
            EditPrepareArgs,
            edit_prepare,
        ),
        ToolSpec(
            "pvf_resolve",
            "Resolve links and ids",
            "Link → text, text → links, .lst id ↔ path.",
            ResolveArgs,
            resolve,
            read_only=True,
        ),
        ToolSpec(
            "pvf_list_registries",
            "List registries",
            "The .lst registries.",
            RegistriesArgs,
            registries,
            read_only=True,
        ),
        *plan_tools(svc),
        *annotation_tools(svc),
    ]
