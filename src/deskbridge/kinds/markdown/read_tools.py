"""Handlers of the read-only `md_*` tools: the text by pages, the outline, a section, the selection, the
files, rendered HTML, status, the audit and search. Each reads the service and shapes the result.

Bound to the service and described in tools.py (names, titles, argument models).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import anyio

from deskbridge.core import paging
from deskbridge.core.tools import CallContext, NoArgs
from deskbridge.kinds.markdown.approvals import operation_audit
from deskbridge.kinds.markdown.search import Query, search_files
from deskbridge.kinds.markdown.sections import find_section, read_lines
from deskbridge.kinds.markdown.views import html_page

if TYPE_CHECKING:
    from deskbridge.kinds.markdown.service import MarkdownService
    from deskbridge.kinds.markdown.tools import (
        AuditArgs,
        DocArgs,
        HtmlArgs,
        ListArgs,
        OutlineArgs,
        ReadDocumentArgs,
        ReadSectionArgs,
        SearchArgs,
    )


async def get_current_document(
    service: MarkdownService, ctx: CallContext, args: ReadDocumentArgs
) -> dict[str, Any]:
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
        "revision": doc.revision_at(version),
        "startLine": page["startLine"],
        "endLine": page["endLine"],
        "totalLines": page["totalLines"],
        "startOffset": page["startOffset"],
        "truncated": page["truncated"],
        **{k: page[k] for k in ("startColumn", "nextStartLine", "nextStartColumn") if k in page},
    }


async def get_outline(service: MarkdownService, ctx: CallContext, args: OutlineArgs) -> dict[str, Any]:
    doc = service.get(args.doc_id)
    heads, version = service.outline(doc.doc_id)
    wanted = [h for h in heads if h.level <= args.max_level]
    # bound to the level filter: the same offset in another filter's list is another heading
    items, next_cursor, _start = paging.page(
        wanted, args.cursor, args.limit, tool="md_get_document_outline", bound={"l": args.max_level}
    )
    return {
        "docId": doc.doc_id,
        "revision": doc.revision_at(version),
        "items": [h.to_dict() for h in items],
        "total": len(wanted),
        "truncated": next_cursor is not None,
        "nextCursor": next_cursor,
    }


async def read_section(service: MarkdownService, ctx: CallContext, args: ReadSectionArgs) -> dict[str, Any]:
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
        "revision": doc.revision_at(version),
        "heading": section.heading.to_dict(),
        "markdown": page["text"],
        "startLine": page["startLine"],
        "endLine": page["endLine"],
        "startOffset": page["startOffset"],
        "truncated": page["truncated"],
        **{k: page[k] for k in ("startColumn", "nextStartLine", "nextStartColumn") if k in page},
    }


async def get_selection(service: MarkdownService, ctx: CallContext, args: DocArgs) -> dict[str, Any]:
    return service.selection(args.doc_id)


async def list_open_documents(service: MarkdownService, ctx: CallContext, args: ListArgs) -> dict[str, Any]:
    files = service.workspace.iter_documents()
    page, next_cursor, _start = paging.page(files, args.cursor, args.limit, tool="md_list_open_documents")
    return {
        "documents": service.list_open(),
        "currentDocId": service.current_id,
        "files": [
            {"path": service.workspace.relative(p), "open": service.find_open(p) is not None} for p in page
        ],
        "nextCursor": next_cursor,
        "scope": service.workspace.scope.value,
    }


async def get_rendered_html(service: MarkdownService, ctx: CallContext, args: HtmlArgs) -> dict[str, Any]:
    doc = service.get(args.doc_id)
    html, version = await anyio.to_thread.run_sync(service.preview_html, doc.doc_id)
    return {
        "docId": doc.doc_id,
        "revision": doc.revision_at(version),
        **html_page(html, version, args.cursor, args.max_bytes),
    }


async def get_app_status(service: MarkdownService, ctx: CallContext, args: NoArgs) -> dict[str, Any]:
    return service.status()


async def get_operation_audit(service: MarkdownService, ctx: CallContext, args: AuditArgs) -> dict[str, Any]:
    return {"records": operation_audit(service.audit, args.limit)}


async def search(service: MarkdownService, ctx: CallContext, args: SearchArgs) -> dict[str, Any]:
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
