"""Handlers of the `md_*` tools that change a document or its file: each turns its arguments into edits (or a
file operation) and hands them to the service, where the rules live (editing.py, documents.py).

Bound to the service and described in tools.py (names, titles, argument models).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from deskbridge.core.errors import BridgeError, ErrorCode
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


async def replace_document(
    service: MarkdownService, ctx: CallContext, args: ReplaceDocumentArgs
) -> dict[str, Any]:
    doc = service.require_current(args.doc_id, args.expected_revision)
    return await service.apply_edits(
        args.doc_id,
        service.whole_text_edits(doc.text, args.markdown),
        ctx=ctx,
        tool="md_replace_current_document",
        base_version=doc.version,
        summary=args.reason or "replace the whole document",
    )


async def apply_text_edit(service: MarkdownService, ctx: CallContext, args: TextEditArgs) -> dict[str, Any]:
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
    return await service.apply_edits(
        args.doc_id,
        [Edit(rng.start, rng.end, args.replacement)],
        ctx=ctx,
        tool="md_apply_text_edit",
        base_version=base,
        summary=args.reason or "edit text",
    )


async def insert_text(service: MarkdownService, ctx: CallContext, args: InsertArgs) -> dict[str, Any]:
    doc = service.get(args.doc_id)
    at, base = service.insertion_point(
        doc, args.expected_revision, offset=args.offset, line=args.line, column=args.column
    )
    return await service.apply_edits(
        args.doc_id,
        [Edit(at, at, args.text)],
        ctx=ctx,
        tool="md_insert_text",
        base_version=base,
        summary=args.reason or "insert text",
    )


async def replace_selection(
    service: MarkdownService, ctx: CallContext, args: ReplaceSelectionArgs
) -> dict[str, Any]:
    doc = service.require_current(args.doc_id, args.expected_revision)
    sel = doc.current_selection()
    if sel is None:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            "the editor has not reported a selection for this document",
            hint="Ask the person to select the text in the editor, then call md_get_selection.",
        )
    check_expected_text(doc.text, Range(*sel), args.expected_text)
    return await service.apply_edits(
        args.doc_id,
        [Edit(sel[0], sel[1], args.text)],
        ctx=ctx,
        tool="md_replace_selection",
        base_version=doc.version,
        summary=args.reason or "replace the selection",
    )


async def replace_text(service: MarkdownService, ctx: CallContext, args: ReplaceTextArgs) -> dict[str, Any]:
    doc = service.require_current(args.doc_id, args.expected_revision)
    text, version = doc.collab.snapshot()
    edits = replace_text_edits(text, args.old_text, args.new_text, args.expected_occurrences)
    result = await service.apply_edits(
        args.doc_id,
        edits,
        ctx=ctx,
        tool="md_replace_text",
        base_version=version,
        summary=args.reason or f"replace {len(edits)} occurrence(s)",
    )
    result["replacedOccurrences"] = len(edits)
    return result


async def patch_section(service: MarkdownService, ctx: CallContext, args: PatchSectionArgs) -> dict[str, Any]:
    doc = service.require_current(args.doc_id, args.expected_revision)
    text, version = doc.collab.snapshot()
    section, edit = patch_section_edit(text, args.heading_path, args.operation, args.content)
    result = await service.apply_edits(
        args.doc_id,
        [edit],
        ctx=ctx,
        tool="md_patch_section",
        base_version=version,
        summary=args.reason or f"{args.operation} section '{' > '.join(section.heading.path)}'",
    )
    result["section"] = section.heading.to_dict()
    return result


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
