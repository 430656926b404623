"""Derived views of a markdown document, cached per version: the preview HTML and the heading outline (one
reason to change: how a document is shown). The web UI's preview and `md_get_rendered_html` / the outline
tools share one renderer and one cache per document. Part of `MarkdownService` (service.py).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from deskbridge.kinds.markdown.document import MarkdownDocument
from deskbridge.kinds.markdown.outline import Heading, outline
from deskbridge.kinds.markdown.render import PreviewRenderer


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
