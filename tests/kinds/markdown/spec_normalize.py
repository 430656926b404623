"""HTML normalization for comparing spec examples, in the spirit of the CommonMark spec's own test runner.

The spec's runner compares HTML after normalizing cosmetic differences (attribute order, whitespace around
block tags, `<br>` vs `<br />`, entity spelling). This is our own small implementation of that idea on the
standard library's HTMLParser; `<pre>` content is kept byte for byte.
"""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser

_BLOCK = frozenset(
    [
        "article",
        "aside",
        "blockquote",
        "body",
        "dd",
        "details",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "html",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "title",
        "tr",
        "ul",
    ]
)


class _Normalizer(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.out: list[str] = []
        self.in_pre = 0
        self.last_tag = ""
        self.last_kind = ""

    def handle_starttag(self, tag, attrs):
        if tag == "pre":
            self.in_pre += 1
        self._tag(tag, attrs, "start")

    def handle_startendtag(self, tag, attrs):
        self._tag(tag, attrs, "start")

    def _tag(self, tag, attrs, kind):
        if tag in _BLOCK:
            self._strip_trailing_space()
        parts = [tag]
        for k, v in sorted(attrs):
            parts.append(k if v is None else f'{k}="{html.escape(html.unescape(v), quote=True)}"')
        self.out.append("<" + " ".join(parts) + ">")
        self.last_tag, self.last_kind = tag, kind

    def handle_endtag(self, tag):
        if tag == "pre":
            self.in_pre = max(0, self.in_pre - 1)
        if tag in _BLOCK:
            self._strip_trailing_space()
        self.out.append(f"</{tag}>")
        self.last_tag, self.last_kind = tag, "end"

    def _strip_trailing_space(self):
        if self.out and not self.in_pre and not self.out[-1].startswith("<"):
            self.out[-1] = self.out[-1].rstrip()

    def handle_data(self, data):
        if self.in_pre:
            self.out.append(html.escape(data, quote=False))
            return
        text = re.sub(r"\s+", " ", data)
        after_block = self.last_tag in _BLOCK or self.last_tag == "br"
        if after_block:
            text = text.lstrip()
        if text:
            self.out.append(html.escape(text, quote=False))
        self.last_kind = "data"

    def handle_entityref(self, name):
        self.handle_data(html.unescape(f"&{name};"))

    def handle_charref(self, name):
        self.handle_data(html.unescape(f"&#{name};"))

    def handle_comment(self, data):
        self.out.append(f"<!--{data}-->")

    def handle_decl(self, decl):
        self.out.append(f"<!{decl}>")

    def handle_pi(self, data):
        self.out.append(f"<?{data}>")

    def unknown_decl(self, data):
        self.out.append(f"<![{data}]>")


def normalize_html(source: str) -> str:
    """A canonical form of `source` for equality checks."""
    parser = _Normalizer()
    parser.feed(source)
    parser.close()
    return "".join(parser.out).strip()
