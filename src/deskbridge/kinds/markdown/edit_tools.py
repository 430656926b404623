"""Handlers of the `md_*` tools that change a document or its file: each turns its arguments into edits (or a
file operation) and hands them to the service, where the rules live (editing.py, documents.py).

Bound to the service and described in tools.py (names, titles, argument models).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from deskbridge.core.audit import set_audit_target
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalText
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown import export as export_mod
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.edits import Range, check_expected_text, replace_text_edits, resolve_range
from deskbridge.kinds.markdown.sections import patch_section_edit

if TYPE_CHECKING:
    from deskbridge.kinds.markdown.service import MarkdownService
    from deskbridge.kinds.markdown.tools import (
        CopyRichHtmlArgs,
        DocArgs,
        ExportArgs,
        InsertArgs,
        OpenArgs,
        PatchSectionArgs,
        ReplaceDocumentArgs,
        ReplaceSelectionArgs,
        ReplaceTextArgs,
        ResolveExternalArgs,
        SaveAsArgs,
        TextEditArgs,
    )


# -- edits ------------------------------------------------------------------------------------------------
#
# Each edit tool is a planner (arguments → the edits, on the text of one version) and one shared handler.
# Approval is decided centrally (`App.invoke`, from `ToolSpec.operation="edit"`): the tool's
# `approval_summary` (`edit_approval`) plans the edit, prepares it against the current text and shows the
# person the diff of exactly that change — or asks nothing when it changes nothing — and leaves the plan on
# the arguments for the handler, which rebases it over whatever the person typed while deciding.


@dataclass
class Planned:
    """An edit tool's edits, computed on the text at collab version `base_version` of document `doc_id`."""

    doc_id: str
    edits: list[Edit]
    base_version: int
    summary: str
    extra: dict[str, Any] = field(default_factory=dict)
    """Fields the tool adds to its result (replacedOccurrences, section)."""
    prepared: bool = False
    """True when `edit_approval` prepared it (rebased, refined, no-op removed) and the person was asked."""


Planner = Callable[["MarkdownService", Any], Planned]


def plan_replace_document(service: MarkdownService, args: ReplaceDocumentArgs) -> Planned:
    doc = service.require_current(args.doc_id, args.expected_revision)
    text, version = doc.collab.snapshot()
    return Planned(
        doc.doc_id,
        service.whole_text_edits(text, args.markdown),
        version,
        args.reason or "replace the whole document",
    )


def plan_text_edit(service: MarkdownService, args: TextEditArgs) -> Planned:
    doc = service.get(args.doc_id)
    base = doc.version_of(args.expected_revision)
    if base == doc.version:
        rng = resolve_range(
            doc.collab.offsets,
            start_offset=args.start_offset,
            length=args.length,
            end_offset=args.end_offset,
            start_line=args.start_line,
            start_column=args.start_column,
            end_line=args.end_line,
            end_column=args.end_column,
        )
        check_expected_text(doc.text, rng, args.expected_text)
    else:
        # offsets are in the text of the expected revision: map them to now (refused if that text changed)
        if args.start_offset is None:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                "line/column positions are only accepted against the current revision; read again",
                data={"revision": doc.revision},
            )
        start = args.start_offset
        end = args.end_offset if args.end_offset is not None else start + (args.length or 0)
        rng = service.range_now(doc, base, start, end, args.expected_text)
        base = doc.version
    return Planned(doc.doc_id, [Edit(rng.start, rng.end, args.replacement)], base, args.reason or "edit text")


def plan_insert_text(service: MarkdownService, args: InsertArgs) -> Planned:
    doc = service.get(args.doc_id)
    at, base = service.insertion_point(
        doc, args.expected_revision, offset=args.offset, line=args.line, column=args.column
    )
    return Planned(doc.doc_id, [Edit(at, at, args.text)], base, args.reason or "insert text")


def plan_replace_selection(service: MarkdownService, args: ReplaceSelectionArgs) -> Planned:
    doc = service.require_current(args.doc_id, args.expected_revision)
    sel = doc.current_selection()
    if sel is None:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            "the editor has not reported a selection for this document",
            hint="Ask the person to select the text in the editor, then call md_get_selection.",
        )
    check_expected_text(doc.text, Range(*sel), args.expected_text)
    return Planned(
        doc.doc_id, [Edit(sel[0], sel[1], args.text)], doc.version, args.reason or "replace the selection"
    )


def plan_replace_text(service: MarkdownService, args: ReplaceTextArgs) -> Planned:
    doc = service.require_current(args.doc_id, args.expected_revision)
    text, version = doc.collab.snapshot()
    edits = replace_text_edits(text, args.old_text, args.new_text, args.expected_occurrences)
    return Planned(
        doc.doc_id,
        edits,
        version,
        args.reason or f"replace {len(edits)} occurrence(s)",
        {"replacedOccurrences": len(edits)},
    )


def plan_patch_section(service: MarkdownService, args: PatchSectionArgs) -> Planned:
    doc = service.require_current(args.doc_id, args.expected_revision)
    text, version = doc.collab.snapshot()
    section, edit = patch_section_edit(text, args.heading_path, args.operation, args.content)
    return Planned(
        doc.doc_id,
        [edit],
        version,
        args.reason or f"{args.operation} section '{' > '.join(section.heading.path)}'",
        {"section": section.heading.to_dict()},
    )


@dataclass(frozen=True)
class EditTool:
    """What tools.py passes for an edit tool: its planner; the handler and central approval come from it."""

    planner: Planner


def edit_approval(service: MarkdownService, planner: Planner) -> Callable[[Any], ApprovalText | None]:
    """The tool's `approval_summary`: plan and prepare the edit, then the question with its diff (None: a
    no-op, nothing to ask). The prepared plan rides on the arguments to the handler (`args._plan`)."""

    def summary(args: Any) -> ApprovalText | None:
        # the call's one audit record names the document even when the person declines (no handler runs)
        set_audit_target(service.target_of(getattr(args, "doc_id", None)))
        planned = planner(service, args)
        doc = service.get(planned.doc_id)
        edits, version = service.prepare_edits(doc, planned.edits, planned.base_version, ai=True)
        planned.edits, planned.base_version, planned.prepared = edits, version, True
        args._plan = planned
        if not edits:
            return None
        return service.edit_approval(doc, edits, planned.summary)

    return summary


def edit_handler(
    planner: Planner, tool: str
) -> Callable[[MarkdownService, CallContext, Any], Awaitable[dict[str, Any]]]:
    """The handler of an edit tool: its plan (from the approval, else made now) applied as one update."""

    async def handler(service: MarkdownService, ctx: CallContext, args: Any) -> dict[str, Any]:
        planned: Planned | None = args._plan
        if planned is None:  # no approval was asked (a person's call, or the rules said no)
            planned = planner(service, args)
        result = await service.apply_edits(
            planned.doc_id,
            planned.edits,
            ctx=ctx,
            tool=tool,
            base_version=planned.base_version,
            summary=planned.summary,
            ask=False,
        )
        result.update(planned.extra)
        return result

    return handler


# -- files and exports -------------------------------------------------------------------------------------


async def open_document(service: MarkdownService, ctx: CallContext, args: OpenArgs) -> dict[str, Any]:
    return await service.open(args.path, encoding=args.encoding_name, ctx=ctx, tool="md_open_document")


async def save(service: MarkdownService, ctx: CallContext, args: DocArgs) -> dict[str, Any]:
    return await service.save(args.doc_id, ctx=ctx, tool="md_save_current_document")


async def resolve_external_change(
    service: MarkdownService, ctx: CallContext, args: ResolveExternalArgs
) -> dict[str, Any]:
    return await service.resolve_external(args.doc_id, args.action, ctx=ctx)


async def save_as(service: MarkdownService, ctx: CallContext, args: SaveAsArgs) -> dict[str, Any]:
    return await service.save_as(
        args.doc_id, args.path, overwrite=args.overwrite, ctx=ctx, tool="md_save_current_document_as"
    )


async def export_document(service: MarkdownService, ctx: CallContext, args: ExportArgs) -> dict[str, Any]:
    return await export_mod.export_to_workspace(
        service, args.doc_id, args.format, args.file_name, ctx=ctx, tool="md_ui_export_current_document"
    )


async def copy_rich_html(
    service: MarkdownService, ctx: CallContext, args: CopyRichHtmlArgs
) -> dict[str, Any]:
    return await export_mod.copy_rich_html(
        service, args.doc_id, args.target, ctx=ctx, tool="md_ui_copy_rendered_html"
    )


# -- approval questions of the file and export tools (asked centrally by App.invoke, `ToolSpec.operation`) ----


def open_approval(service: MarkdownService) -> Callable[[OpenArgs], ApprovalText | None]:
    """md_open_document ("open_outside"): nothing to ask inside the scope; outside it, the question."""

    def summary(args: OpenArgs) -> ApprovalText | None:
        question = service.open_outside_question(args.path)
        return None if question is None else ApprovalText(question, target=args.path)

    return summary


def save_as_approval(service: MarkdownService) -> Callable[[SaveAsArgs], ApprovalText | None]:
    """md_save_current_document_as ("overwrite"): the diff from the file to be overwritten, else nothing."""
    return lambda args: service.overwrite_question(args.doc_id, args.path, args.overwrite)


def export_approval(service: MarkdownService) -> Callable[[ExportArgs], ApprovalText]:
    """md_ui_export_current_document ("export")."""
    return lambda args: export_mod.export_question(service, args.doc_id, args.format, args.file_name)


def copy_approval(service: MarkdownService) -> Callable[[CopyRichHtmlArgs], ApprovalText]:
    """md_ui_copy_rendered_html ("copy_rich_html")."""
    return lambda args: export_mod.copy_question(service, args.doc_id, args.target)
