"""Derived views of a markdown document, cached per version: the preview HTML and the heading outline (one
reason to change: how a document is shown). The web UI's preview and `md_get_rendered_html` / the outline
tools share one renderer and one cache per document; `html_page` cuts the HTML into pages between blocks.
Part of `MarkdownService` (service.py).
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING, Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paging import bad_cursor, decode_cursor, encode_cursor
from deskbridge.kinds.markdown.document import MarkdownDocument
from deskbridge.kinds.markdown.outline import Heading, outline
from deskbridge.kinds.markdown.render import PREVIEW, PreviewRenderer, render_html

HTML_MAX_BYTES: Final = 384 * 1024
"""Bytes of rendered HTML one call returns at most."""


PREVIEW_FULL_MAX_CHARS: Final = 200_000
"""Characters up to which the preview renders the whole document; larger ones are previewed in windows."""

PREVIEW_WINDOW_LINES: Final = 1_200
"""Lines in a preview window when the browser does not say."""

PREVIEW_WINDOW_MAX_LINES: Final = 5_000
"""Lines in one preview window at most."""

BLOCK_SEARCH_MAX_LINES: Final = 400
"""How far a window edge moves to reach a blank line (so a paragraph, list or table is not cut)."""


def _is_fence(line: str) -> bool:
    stripped = line.lstrip(" ")
    return len(line) - len(stripped) <= 3 and stripped.startswith(("```", "~~~"))


def block_window(lines: list[str], start: int, end: int) -> tuple[int, int]:
    """Widen the 1-based line window [start, end] to whole blocks: edges on blank lines, fences kept whole.

    Approximate on purpose (a fence is any line starting with ``` or ~~~): it only decides where a preview
    window is cut, never what the document means.
    """
    fences_before = sum(1 for line in lines[: start - 1] if _is_fence(line))
    if fences_before % 2:  # the window starts inside a code fence: begin at its opening line
        while start > 1 and not _is_fence(lines[start - 1]):
            start -= 1
    else:
        floor = max(1, start - BLOCK_SEARCH_MAX_LINES)
        while start > floor and lines[start - 2].strip():
            start -= 1
    ceiling = min(len(lines), end + BLOCK_SEARCH_MAX_LINES)
    inside = sum(1 for line in lines[start - 1 : end] if _is_fence(line)) % 2 == 1
    while end < ceiling and (inside or lines[end - 1].strip()):
        end += 1
        if _is_fence(lines[end - 1]):
            inside = not inside
    return start, end


class Views:
    """Preview HTML and outline; the service's state is set up by `MarkdownService.__init__`."""

    _render_lock: threading.Lock
    _renderers: dict[str, PreviewRenderer]
    _preview_cache: dict[str, tuple[int, str]]
    _outline_cache: dict[str, tuple[int, list[Heading]]]

    if TYPE_CHECKING:  # provided by the other parts of MarkdownService

        def get(self, doc_id: str | None = None) -> MarkdownDocument: ...

    def preview_html(self, doc_id: str | None = None) -> tuple[str, int]:
        """The preview HTML of the current text and the version it shows (only changed sections re-render).

        The web UI's preview route and `md_get_rendered_html` both use this, so there is one renderer and
        one cache per document."""
        doc = self.get(doc_id)
        with self._render_lock:  # the web UI renders from worker threads; one render at a time per service
            text, version, offsets = doc.collab.snapshot_with_offsets()
            cached = self._preview_cache.get(doc.doc_id)
            if cached is not None and cached[0] == version:
                return cached[1], version
            renderer = self._renderers.setdefault(doc.doc_id, PreviewRenderer())
            html = renderer.render(text, offsets.newline_positions)
            self._preview_cache[doc.doc_id] = (version, html)
            return html, version

    def outline(self, doc_id: str | None = None) -> tuple[list[Heading], int]:
        """The heading outline of the current text and its version (cached until the next update)."""
        doc = self.get(doc_id)
        text, version = doc.collab.snapshot()
        cached = self._outline_cache.get(doc.doc_id)
        if cached is not None and cached[0] == version:
            return cached[1], version
        heads = outline(text)
        self._outline_cache[doc.doc_id] = (version, heads)
        return heads, version

    def preview(self, doc_id: str, first: int | None = None, last: int | None = None) -> dict[str, Any]:
        """What the editor's preview shows: the whole document (cached, incremental) when it is small and no
        window is asked for, else a window of whole blocks around lines [first, last] (rendering all of a
        120,000-line document takes seconds and would hold the interpreter on every keystroke)."""
        doc = self.get(doc_id)
        text, version = doc.collab.snapshot()
        if first is None and len(text) <= PREVIEW_FULL_MAX_CHARS:
            html, version = self.preview_html(doc.doc_id)
            return {"html": html, "version": version}
        lines = text.split("\n")
        start = first or 1
        end = last if last is not None else start + PREVIEW_WINDOW_LINES
        end = min(end, start + PREVIEW_WINDOW_MAX_LINES, len(lines))
        start, end = block_window(lines, min(start, len(lines)), end)
        html = render_html("\n".join(lines[start - 1 : end]), PREVIEW)
        return {"html": html, "version": version, "window": {"from": start, "to": end, "total": len(lines)}}


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
