"""The `md_*` document tools an MCP client uses on the open Markdown documents (seed §7, §16.2, issue #3).

Thin by design: each handler validates its arguments (pydantic models below), calls the service, and shapes
the result. Offsets are Unicode code points of the current text (docs/markdown.md "Offsets"); every edit
carries `expectedRevision`, offset edits carry `expectedText`. The Vex names (`vex_get_current_document`,
`vex.get_current_document`) are accepted as aliases. `App.invoke` audits every call once (core audit).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

import anyio
from pydantic import Field

from deskbridge.core import limits, paging
from deskbridge.core.audit import set_audit_target
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paging import bad_cursor, decode_cursor, encode_cursor
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.markdown import export as export_mod
from deskbridge.kinds.markdown.approvals import AUDIT_KEEP, operation_audit
from deskbridge.kinds.markdown.collab import Edit, map_range
from deskbridge.kinds.markdown.edits import Range, check_expected_text, replace_text_edits, resolve_range
from deskbridge.kinds.markdown.search import Query, search_files
from deskbridge.kinds.markdown.sections import find_section, patch_section_edit, read_lines
from deskbridge.kinds.markdown.service import MarkdownService

READ_MAX_BYTES: Final = 256 * 1024
"""Bytes of document text one read returns at most (well under the response cap); the rest is paginated."""

READ_DEFAULT_BYTES: Final = 30_000
"""Bytes of a page when the caller does not say: ≤ 10 k tokens for English or CJK text (issue 10)."""

HTML_MAX_BYTES: Final = 384 * 1024
"""Bytes of rendered HTML one call returns at most."""

HTML_DEFAULT_BYTES: Final = 30_000
"""Bytes of a rendered-HTML page when the caller does not say (whole top-level blocks; `nextCursor`)."""

REPLACE_MAX_CHARS: Final = limits.REQUEST_BODY_MAX_BYTES
"""Characters a whole-document replacement may have: the transport's request limit (core.limits), so the schema
never promises a call the server cannot take."""

_DOC_ID = Field(
    None,
    alias="docId",
    description="Document id (md_list_open_documents); default: the current one.",
)
_REVISION = Field(
    alias="expectedRevision",
    description="`revision` from your last read; STALE_WORKSPACE if the text changed since.",
)
_REASON = Field("", max_length=500, description="One line for the person approving the change.")


# --- argument models -------------------------------------------------------------------------------------


class DocArgs(ToolArgs):
    doc_id: str | None = _DOC_ID


class ReadDocumentArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    start_line: int = Field(1, alias="startLine", ge=1, description="First line to return (1-based).")
    start_column: int = Field(
        1,
        alias="startColumn",
        ge=1,
        description="Column of startLine to start at (1-based, code points); pass nextStartColumn when a page gave one.",
    )
    end_line: int | None = Field(
        None,
        alias="endLine",
        ge=1,
        description="Last line to return (inclusive); default: to the end, within maxBytes.",
    )
    max_bytes: int = Field(
        READ_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=READ_MAX_BYTES,
        description="Cap on returned text (UTF-8 bytes); the answer says `truncated` and `nextStartLine` (and `nextStartColumn` inside a very long line).",
    )


class OutlineArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    cursor: str | None = Field(None, description="nextCursor from the previous page of headings.")
    limit: int = Field(1000, ge=1, le=2000, description="Headings per page.")
    max_level: int = Field(6, alias="maxLevel", ge=1, le=6, description="Only headings up to this level.")


class ReadSectionArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    heading_path: str = Field(
        alias="headingPath",
        min_length=1,
        max_length=2000,
        description="Heading titles from outside in, separated by '>', e.g. 'Intro > Setup'. Outer levels may be left out when the rest is unique.",
    )
    max_bytes: int = Field(
        READ_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=READ_MAX_BYTES,
        description="Cap on returned text (UTF-8 bytes); go on with md_get_current_document from nextStartLine.",
    )


class HtmlArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    cursor: str | None = Field(None, description="nextCursor from the previous page of HTML.")
    max_bytes: int = Field(
        HTML_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=HTML_MAX_BYTES,
        description="Cap on one page (UTF-8 bytes); pages end between top-level blocks.",
    )


class AuditArgs(ToolArgs):
    limit: int = Field(AUDIT_KEEP, ge=1, le=AUDIT_KEEP, description="How many records (newest first).")


class ListArgs(ToolArgs):
    cursor: str | None = Field(None, description="nextCursor from the previous page of files.")
    limit: int = Field(100, ge=1, le=1000, description="Files per page.")


class SearchArgs(ToolArgs):
    query: str = Field(
        min_length=1, max_length=500, description="Text to find (or a regular expression with regex true)."
    )
    regex: bool = Field(False, description="Treat query as a Python regular expression.")
    case_sensitive: bool = Field(False, alias="caseSensitive", description="Match case exactly.")
    whole_word: bool = Field(False, alias="wholeWord", description="Match whole words only.")
    cursor: str | None = Field(None, description="nextCursor from the previous page.")
    limit: int = Field(50, ge=1, le=500, description="Matches per page.")


class ReplaceDocumentArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    markdown: str = Field(max_length=REPLACE_MAX_CHARS, description="The complete new Markdown text.")
    expected_revision: str = _REVISION
    reason: str = _REASON


class TextEditArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    start_offset: int | None = Field(
        None, alias="startOffset", ge=0, description="Start, in Unicode code points of the current text."
    )
    length: int | None = Field(None, ge=0, description="Code points to replace from startOffset (default 0).")
    end_offset: int | None = Field(
        None, alias="endOffset", ge=0, description="Alternative to length: end offset (exclusive)."
    )
    start_line: int | None = Field(
        None, alias="startLine", ge=1, description="Alternative to offsets: 1-based line."
    )
    start_column: int | None = Field(
        None, alias="startColumn", ge=1, description="1-based column in code points (default 1)."
    )
    end_line: int | None = Field(None, alias="endLine", ge=1, description="With startLine: 1-based end line.")
    end_column: int | None = Field(
        None, alias="endColumn", ge=1, description="With endLine: end column in code points (exclusive)."
    )
    replacement: str = Field(max_length=REPLACE_MAX_CHARS, description="The new text for the range.")
    expected_text: str = Field(
        alias="expectedText",
        max_length=REPLACE_MAX_CHARS,
        description='The exact text now in the range ("" for a pure insertion); a mismatch is refused with the current text around it.',
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class InsertArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    text: str = Field(max_length=REPLACE_MAX_CHARS, description="Text to insert.")
    offset: int | None = Field(
        None,
        ge=0,
        description="Where, in code points; default: the person's cursor (start of their selection).",
    )
    line: int | None = Field(None, ge=1, description="Alternative to offset: 1-based line.")
    column: int | None = Field(
        None, ge=1, description="With line: 1-based column in code points (default 1)."
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class ReplaceSelectionArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    text: str = Field(max_length=REPLACE_MAX_CHARS, description="Replacement for the selected text.")
    expected_text: str | None = Field(
        None,
        alias="expectedText",
        description="The selected text you expect (from md_get_selection); refused if different.",
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class ReplaceTextArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    old_text: str = Field(
        alias="oldText",
        min_length=1,
        max_length=REPLACE_MAX_CHARS,
        description="Exact text to find (whitespace included).",
    )
    new_text: str = Field(alias="newText", max_length=REPLACE_MAX_CHARS, description="Replacement.")
    expected_occurrences: int = Field(
        1,
        alias="expectedOccurrences",
        ge=1,
        le=10_000,
        description="How many times oldText occurs; all are replaced, and a different count is refused.",
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class PatchSectionArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    heading_path: str = Field(
        alias="headingPath",
        min_length=1,
        max_length=2000,
        description="E.g. 'Intro > Setup' (see md_get_document_outline).",
    )
    operation: Literal["replace", "append", "prepend"] = Field(
        description="replace the section's body (under the heading, subsections included), append at its end, or prepend right under the heading."
    )
    content: str = Field(max_length=REPLACE_MAX_CHARS, description="Markdown to put there.")
    expected_revision: str = _REVISION
    reason: str = _REASON


class OpenArgs(ToolArgs):
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="Path of a .md/.markdown/.mdown/.txt file, relative to the workspace folder or absolute.",
    )
    encoding_name: str | None = Field(
        None, alias="encodingName", description="Text encoding (default utf-8)."
    )


class SaveAsArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="New file path inside the workspace (.md/.markdown/.mdown/.txt).",
    )
    overwrite: bool = Field(False, description="Replace an existing file (asks the person, shows the diff).")


class ExportArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    format: Literal["HTML", "PDF", "PNG", "Word"] = Field(description="Export format.")
    file_name: str | None = Field(
        None,
        alias="fileName",
        max_length=255,
        description="File name in the document's folder; default: the document's name with the format's extension (a free name is chosen, nothing is overwritten).",
    )


class CopyRichHtmlArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    target: Literal["wechat", "zhihu", "juejin"] = Field(description="Platform the rich HTML is styled for.")


# --- helpers ---------------------------------------------------------------------------------------------


def _aliases(short: str) -> tuple[str, ...]:
    return (f"vex_{short}", f"vex.{short}")


_BLOCK_START: Final = re.compile(r'<[a-zA-Z][a-zA-Z0-9]*\s[^>]*?\bdata-source-line="')


def html_page(html: str, version: int, cursor: str | None, max_bytes: int) -> dict[str, Any]:
    """One page of rendered HTML that ends between top-level blocks (the renderer marks each with
    `data-source-line`); a block bigger than a page is sent whole up to HTML_MAX_BYTES. The cursor names the
    version it belongs to: a page of another version is refused with how to start again."""
    start = 0
    if cursor:
        state = decode_cursor(cursor, tool="md_get_rendered_html", ints=("v", "o"))
        if state["v"] != version:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                "the document changed since that page; its HTML is different now",
                hint="Call md_get_rendered_html without a cursor to start from the top.",
            )
        if state["o"] > len(html):
            raise bad_cursor("md_get_rendered_html", "points past the end of the document's HTML")
        start = state["o"]
    end = start
    size = 0
    for m in _BLOCK_START.finditer(html, start + 1):
        piece = len(html[end : m.start()].encode("utf-8"))
        if size + piece > max_bytes and end > start:
            break
        end, size = m.start(), size + piece
        if size >= max_bytes:
            break
    else:
        rest = len(html[end:].encode("utf-8"))
        if size + rest <= max_bytes or end == start:
            end = len(html)
    if end == start:
        end = len(html)
    piece = html[start:end]
    raw = piece.encode("utf-8")
    cut = len(raw) > HTML_MAX_BYTES
    if cut:  # one block larger than the hard cap: the only case a page ends inside markup
        piece = raw[:HTML_MAX_BYTES].decode("utf-8", "ignore")
        end = start + len(piece)
    more = end < len(html)
    return {
        "html": piece,
        "truncated": more,
        "nextCursor": encode_cursor({"v": version, "o": end}) if more else None,
        "cutInsideBlock": cut,
    }


def _require_current(service: MarkdownService, doc_id: str | None, revision: str) -> None:
    doc = service.get(doc_id)
    if doc.version_of(revision) != doc.version:
        raise BridgeError(
            ErrorCode.STALE_WORKSPACE,
            f"the document changed since revision {revision} (now {doc.revision}); read it again",
            data={"revision": doc.revision},
        )


# --- tools ----------------------------------------------------------------------------------------------


def markdown_tools(service: MarkdownService) -> list[ToolSpec]:
    """The document tools of the markdown kind (the md-ui engineer's `markdown_ui_tools` adds `md_ui_*`)."""

    def targeted(
        fn: Callable[[CallContext, Any], Awaitable[dict[str, Any]]],
        target_of: Callable[[Any], str | None] | None = None,
    ) -> Callable[[CallContext, Any], Awaitable[dict[str, Any]]]:
        """The handler, naming the document it acted on for the call's one audit record (App.invoke)."""

        async def handler(ctx: CallContext, args: Any) -> dict[str, Any]:
            try:
                return await fn(ctx, args)
            finally:
                set_audit_target(
                    target_of(args) if target_of else service.target_of(getattr(args, "doc_id", None))
                )

        return handler

    # -- reads ------------------------------------------------------------------------------------------

    async def get_current_document(ctx: CallContext, args: ReadDocumentArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        text, version, offsets = doc.collab.snapshot_with_offsets()
        page = read_lines(
            text,
            args.start_line,
            args.end_line,
            max_bytes=args.max_bytes,
            offsets=offsets,
            start_column=args.start_column,
        )
        return {
            "docId": doc.doc_id,
            "filePath": str(doc.path) if doc.path else None,
            "fileName": doc.name,
            "markdown": page["text"],
            "isDirty": doc.dirty,
            "encoding": doc.encoding,
            "revision": f"{version}-{doc.epoch}",
            "startLine": page["startLine"],
            "endLine": page["endLine"],
            "totalLines": page["totalLines"],
            "startOffset": page["startOffset"],
            "truncated": page["truncated"],
            **{k: page[k] for k in ("startColumn", "nextStartLine", "nextStartColumn") if k in page},
        }

    async def get_outline(ctx: CallContext, args: OutlineArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        heads, version = service.outline(doc.doc_id)
        wanted = [h for h in heads if h.level <= args.max_level]
        # bound to the level filter: the same offset in another filter's list is another heading
        items, next_cursor, _start = paging.page(
            wanted, args.cursor, args.limit, tool="md_get_document_outline", bound={"l": args.max_level}
        )
        return {
            "docId": doc.doc_id,
            "revision": f"{version}-{doc.epoch}",
            "items": [h.to_dict() for h in items],
            "total": len(wanted),
            "truncated": next_cursor is not None,
            "nextCursor": next_cursor,
        }

    async def read_section(ctx: CallContext, args: ReadSectionArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        heads, outline_version = service.outline(doc.doc_id)
        text, version, offsets = doc.collab.snapshot_with_offsets()
        # if an update landed between the two reads, find_section outlines this text itself
        section = find_section(text, args.heading_path, heads if outline_version == version else None)
        page = read_lines(
            text, section.heading.line, section.heading.end_line, max_bytes=args.max_bytes, offsets=offsets
        )
        return {
            "docId": doc.doc_id,
            "revision": f"{version}-{doc.epoch}",
            "heading": section.heading.to_dict(),
            "markdown": page["text"],
            "startLine": page["startLine"],
            "endLine": page["endLine"],
            "startOffset": page["startOffset"],
            "truncated": page["truncated"],
            **{k: page[k] for k in ("startColumn", "nextStartLine", "nextStartColumn") if k in page},
        }

    async def get_selection(ctx: CallContext, args: DocArgs) -> dict[str, Any]:
        return service.selection(args.doc_id)

    async def list_open_documents(ctx: CallContext, args: ListArgs) -> dict[str, Any]:
        files = service.workspace.iter_documents()
        page, next_cursor, _start = paging.page(files, args.cursor, args.limit, tool="md_list_open_documents")
        return {
            "documents": service.list_open(),
            "currentDocId": service.current_id,
            "files": [
                {"path": service.workspace.relative(p), "open": service.find_open(p) is not None}
                for p in page
            ],
            "nextCursor": next_cursor,
            "scope": service.workspace.scope.value,
        }

    async def get_rendered_html(ctx: CallContext, args: HtmlArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        html, version = await anyio.to_thread.run_sync(service.preview_html, doc.doc_id)
        return {
            "docId": doc.doc_id,
            "revision": f"{version}-{doc.epoch}",
            **html_page(html, version, args.cursor, args.max_bytes),
        }

    async def get_app_status(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        return service.status()

    async def get_operation_audit(ctx: CallContext, args: AuditArgs) -> dict[str, Any]:
        return {"records": operation_audit(service.audit, args.limit)}

    async def search(ctx: CallContext, args: SearchArgs) -> dict[str, Any]:
        query = Query(args.query, args.regex, args.case_sensitive, args.whole_word)
        query.compile()  # a bad pattern is refused before any work
        files = await anyio.to_thread.run_sync(service.workspace.iter_documents)
        # open documents are searched in their live text, taken here on the loop (the worker thread must not
        # touch the service)
        live_docs = {doc.path: (doc.doc_id, doc.text) for doc in list(service.docs.values()) if doc.path}
        cancel = threading.Event()
        try:
            # off the event loop: a slow pattern never holds other requests (search.py runs it time-bounded)
            result = await anyio.to_thread.run_sync(
                lambda: search_files(
                    files,
                    query,
                    live_text=live_docs.get,
                    relative=service.workspace.relative,
                    cursor=args.cursor,
                    limit=args.limit,
                    cancel=cancel,
                ),
                abandon_on_cancel=True,
            )
        finally:
            cancel.set()  # the caller went away (or we are done): a thread still matching stops
        result["scope"] = service.workspace.scope.value
        return result

    # -- edits ------------------------------------------------------------------------------------------

    async def replace_document(ctx: CallContext, args: ReplaceDocumentArgs) -> dict[str, Any]:
        _require_current(service, args.doc_id, args.expected_revision)
        doc = service.get(args.doc_id)
        text = args.markdown.replace("\r\n", "\n").replace("\r", "\n")
        old = doc.text
        # one edit covering only the part that differs keeps the person's cursor and undo history useful
        prefix = 0
        limit = min(len(old), len(text))
        while prefix < limit and old[prefix] == text[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old[len(old) - 1 - suffix] == text[len(text) - 1 - suffix]:
            suffix += 1
        edits = [] if old == text else [Edit(prefix, len(old) - suffix, text[prefix : len(text) - suffix])]
        return await service.apply_edits(
            args.doc_id,
            edits,
            ctx=ctx,
            tool="md_replace_current_document",
            base_version=doc.version,
            summary=args.reason or "replace the whole document",
        )

    async def apply_text_edit(ctx: CallContext, args: TextEditArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        base = doc.version_of(args.expected_revision)
        if base != doc.version:
            # offsets are in the text of the expected revision: map them to now (refused if that text changed)
            return await _edit_old_revision(ctx, args, base)
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
        return await service.apply_edits(
            args.doc_id,
            [Edit(rng.start, rng.end, args.replacement)],
            ctx=ctx,
            tool="md_apply_text_edit",
            base_version=base,
            summary=args.reason or "edit text",
        )

    async def _edit_old_revision(ctx: CallContext, args: TextEditArgs, base: int) -> dict[str, Any]:
        if args.start_offset is None:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                "line/column positions are only accepted against the current revision; read again",
                data={"revision": service.get(args.doc_id).revision},
            )
        start = args.start_offset
        end = args.end_offset if args.end_offset is not None else start + (args.length or 0)
        if end - start != len(args.expected_text):
            raise BridgeError(
                ErrorCode.EXPECTED_TEXT_MISMATCH,
                f"the range has {end - start} code points but expectedText has {len(args.expected_text)}",
            )
        # service.apply_edits maps the range through later updates and refuses it if any touched it; the
        # text inside an untouched range is the text it had at `base`, which must be expectedText.
        doc = service.get(args.doc_id)
        mapped: tuple[int, int] | None = (start, end)
        for edits in doc.collab.edits_since(base):
            mapped = map_range(mapped[0], mapped[1], edits)
            if mapped is None:
                raise service._stale(
                    doc,
                    min(start, len(doc.text)),
                    min(end, len(doc.text)),
                    "the text at this range changed since your revision",
                )
        check_expected_text(doc.text, Range(*mapped), args.expected_text)
        return await service.apply_edits(
            args.doc_id,
            [Edit(mapped[0], mapped[1], args.replacement)],
            ctx=ctx,
            tool="md_apply_text_edit",
            base_version=doc.version,
            summary=args.reason or "edit text",
        )

    async def insert_text(ctx: CallContext, args: InsertArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        base = doc.version_of(args.expected_revision)
        if args.offset is not None:
            at = args.offset
            length_then = len(doc.text) - sum(
                len(e.insert) - (e.end - e.start) for edits in doc.collab.edits_since(base) for e in edits
            )
            if at > length_then:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"offset {at} is past the end of the document at that revision ({length_then})",
                )
        elif args.line is not None:
            _require_current(service, args.doc_id, args.expected_revision)
            at = doc.collab.offsets.line_col_to_cp(args.line, args.column or 1)
        else:
            sel = doc.current_selection()
            if sel is None:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    "no offset given and the editor has not reported a cursor; pass offset or line",
                )
            at, base = sel[0], doc.version
        return await service.apply_edits(
            args.doc_id,
            [Edit(at, at, args.text)],
            ctx=ctx,
            tool="md_insert_text",
            base_version=base,
            summary=args.reason or "insert text",
        )

    async def replace_selection(ctx: CallContext, args: ReplaceSelectionArgs) -> dict[str, Any]:
        _require_current(service, args.doc_id, args.expected_revision)
        doc = service.get(args.doc_id)
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

    async def replace_text(ctx: CallContext, args: ReplaceTextArgs) -> dict[str, Any]:
        _require_current(service, args.doc_id, args.expected_revision)
        doc = service.get(args.doc_id)
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

    async def patch_section(ctx: CallContext, args: PatchSectionArgs) -> dict[str, Any]:
        _require_current(service, args.doc_id, args.expected_revision)
        doc = service.get(args.doc_id)
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

    # -- files ------------------------------------------------------------------------------------------

    async def open_document(ctx: CallContext, args: OpenArgs) -> dict[str, Any]:
        return await service.open(args.path, encoding=args.encoding_name, ctx=ctx, tool="md_open_document")

    async def save(ctx: CallContext, args: DocArgs) -> dict[str, Any]:
        return await service.save(args.doc_id, ctx=ctx, tool="md_save_current_document")

    async def save_as(ctx: CallContext, args: SaveAsArgs) -> dict[str, Any]:
        return await service.save_as(
            args.doc_id, args.path, overwrite=args.overwrite, ctx=ctx, tool="md_save_current_document_as"
        )

    # -- export -----------------------------------------------------------------------------------------

    async def export_document(ctx: CallContext, args: ExportArgs) -> dict[str, Any]:
        return await export_mod.export_to_workspace(
            service, args.doc_id, args.format, args.file_name, ctx=ctx, tool="md_ui_export_current_document"
        )

    async def copy_rich_html(ctx: CallContext, args: CopyRichHtmlArgs) -> dict[str, Any]:
        return await export_mod.copy_rich_html(
            service, args.doc_id, args.target, ctx=ctx, tool="md_ui_copy_rendered_html"
        )

    def spec(
        name: str,
        title: str,
        description: str,
        args: type[ToolArgs],
        fn: Any,
        *,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
        vex: str | None = None,
        target_of: Callable[[Any], str | None] | None = None,
    ) -> ToolSpec:
        return ToolSpec(
            name,
            title,
            description,
            args,
            targeted(fn, target_of),
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent or read_only,
            aliases=_aliases(vex) if vex else (),
        )

    specs = [
        spec(
            "md_get_current_document",
            "Read the current document",
            "The Markdown text (paginated by lines, capped in bytes) with docId, revision, dirty flag and "
            "encoding. Pass the revision back as expectedRevision when you edit.",
            ReadDocumentArgs,
            get_current_document,
            read_only=True,
            vex="get_current_document",
        ),
        spec(
            "md_get_document_outline",
            "Outline of a document",
            "Headings with level, title, line, endLine and the heading path to use with md_read_section and "
            "md_patch_section; paginated (nextCursor), maxLevel filters.",
            OutlineArgs,
            get_outline,
            read_only=True,
            vex="get_document_outline",
        ),
        spec(
            "md_read_section",
            "Read one section",
            "The text of the section under a heading path (heading line to the next heading of the same or "
            "higher level), with its line range.",
            ReadSectionArgs,
            read_section,
            read_only=True,
        ),
        spec(
            "md_get_selection",
            "The person's selection",
            "The text the person has selected in the editor, its code-point offset and length.",
            DocArgs,
            get_selection,
            read_only=True,
            vex="get_selection",
        ),
        spec(
            "md_list_open_documents",
            "List documents",
            "Open documents (docId, path, dirty, revision) and a page of the Markdown files in scope.",
            ListArgs,
            list_open_documents,
            read_only=True,
            vex="list_open_documents",
        ),
        spec(
            "md_get_rendered_html",
            "Rendered HTML",
            "The document rendered to HTML by the same renderer as the preview (math as KaTeX-ready markup).",
            HtmlArgs,
            get_rendered_html,
            read_only=True,
            vex="get_rendered_html",
        ),
        spec(
            "md_get_app_status",
            "Editor status",
            "Version, workspace, scope, current file and whether it is dirty, theme and typography.",
            NoArgs,
            get_app_status,
            read_only=True,
            vex="get_app_status",
        ),
        spec(
            "md_get_operation_audit",
            "Recent MCP operations",
            "The last 100 markdown tool calls: time, client, tool, target, approval, outcome (never content).",
            AuditArgs,
            get_operation_audit,
            read_only=True,
            vex="get_operation_audit",
        ),
        spec(
            "md_search",
            "Search the documents in scope",
            "Find text (or a regex) across the Markdown files in the access scope, open documents in their "
            "unsaved state; paginated with nextCursor.",
            SearchArgs,
            search,
            read_only=True,
            target_of=lambda a: None,  # a search query is content: never in the audit
        ),
        spec(
            "md_replace_current_document",
            "Replace the whole document",
            "Replace the entire text (asks the person, with a diff). Prefer md_replace_text or md_patch_section "
            "for local changes.",
            ReplaceDocumentArgs,
            replace_document,
            destructive=True,
            vex="replace_current_document",
        ),
        spec(
            "md_apply_text_edit",
            "Edit a range",
            "Replace the text in a range given by code-point offsets (startOffset + length/endOffset) or "
            "line/column; expectedText must equal the current text there.",
            TextEditArgs,
            apply_text_edit,
            destructive=True,
            vex="apply_text_edit",
        ),
        spec(
            "md_insert_text",
            "Insert text",
            "Insert at a code-point offset, a line/column, or the person's cursor.",
            InsertArgs,
            insert_text,
            vex="insert_text",
        ),
        spec(
            "md_replace_selection",
            "Replace the selection",
            "Replace the text the person has selected (optionally checking it is expectedText).",
            ReplaceSelectionArgs,
            replace_selection,
            destructive=True,
            vex="replace_selection",
        ),
        spec(
            "md_replace_text",
            "Replace exact text",
            "Replace every occurrence of oldText (exact, whitespace included) with newText when it occurs "
            "exactly expectedOccurrences times; otherwise says how often it occurs or where the nearest "
            "near-miss is.",
            ReplaceTextArgs,
            replace_text,
            destructive=True,
        ),
        spec(
            "md_patch_section",
            "Patch a section",
            "Replace, append to, or prepend to the section under a heading path such as 'Intro > Setup'.",
            PatchSectionArgs,
            patch_section,
            destructive=True,
        ),
        spec(
            "md_open_document",
            "Open a document",
            "Open a .md/.markdown/.mdown/.txt file in the access scope (outside it: asks the person).",
            OpenArgs,
            open_document,
            vex="open_document",
            target_of=lambda a: a.path,
        ),
        spec(
            "md_save_current_document",
            "Save",
            "Save the document to its file (no approval needed). Refused with SOURCE_CHANGED if another "
            "program changed the file.",
            DocArgs,
            save,
            destructive=True,  # it replaces the file on disk with the buffer
            idempotent=True,
            vex="save_current_document",
        ),
        spec(
            "md_save_current_document_as",
            "Save as",
            "Save to a new path in scope; an existing file needs overwrite true and the person's approval.",
            SaveAsArgs,
            save_as,
            destructive=True,  # with overwrite true it replaces an existing file
            vex="save_current_document_as",
            target_of=lambda a: a.path,
        ),
        spec(
            "md_ui_export_current_document",
            "Export",
            "Export as HTML (self-contained), PDF, PNG or Word into the document's folder under a free name "
            "(asks the person; never overwrites).",
            ExportArgs,
            export_document,
            vex="ui_export_current_document",
        ),
        spec(
            "md_ui_copy_rendered_html",
            "Copy rich HTML for a platform",
            "Style the rendered document for WeChat, Zhihu or Juejin (inline styles) and put it on the "
            "person's clipboard through the editor (asks the person first).",
            CopyRichHtmlArgs,
            copy_rich_html,
            vex="ui_copy_rendered_html",
        ),
    ]
    return specs


__all__ = ["markdown_tools"]
