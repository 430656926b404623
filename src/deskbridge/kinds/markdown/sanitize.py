"""The one HTML sanitiser of the markdown kind: an allow-list (nh3, the Rust `ammonia` crate) that every HTML the
kind hands out passes through — the preview, `md_get_rendered_html`, every export and the rich-HTML copies.

A document is hostile input (issue 8 "Documents are hostile"): an AI, a downloaded file or a pasted snippet can
put any HTML into a `.md` file. What survives:

* tags a rendered Markdown document uses (paragraphs, headings, lists, tables, code, quotes, images, links,
  footnotes, task boxes, `details`, …) — never `script`, `style`, `iframe`, `object`, `embed`, `form`,
  `input` other than a task box, `svg`, `math` written by hand, `meta`, `link`, `base`;
* attributes from a fixed list (no `on…` handler, no `srcset`, no `formaction`); `style` keeps only
  typographic properties — `position`, `z-index`, `transform`, `inset`, `top`/`left`/…, `background-image`
  and anything with `url(` are dropped, so a document cannot draw an overlay or fetch through CSS;
* URLs (`href`, `src`, `cite`) that are `http:`, `https:`, `mailto:`, in-page `#…` or relative paths; never
  `javascript:`, `vbscript:`, `file:`, `data:` (except `data:image/…` on an image), UNC (`\\\\host\\share`) or
  protocol-relative `//host` links, nor any URL with a backslash or a control character; an image may not
  point at `/…` (this server's own routes).
* the preview holds remote images back (`hold_remote_images`): they load only when the person asks.

`safe_url` is the same rule for callers that hold a URL outside HTML (the Word export's link targets).
"""

from __future__ import annotations

import re
from typing import Final

import nh3

TAGS: Final = frozenset(
    {
        "a", "abbr", "b", "bdi", "bdo", "blockquote", "br", "caption", "center", "cite", "code", "col",
        "colgroup", "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1",
        "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "input", "ins", "kbd", "li", "mark", "ol", "p",
        "pre", "q", "rp", "rt", "ruby", "s", "samp", "section", "small", "span", "strike", "strong", "sub",
        "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "time", "tr", "tt", "u", "ul",
        "var", "wbr",
    }
)  # fmt: skip
"""Tags kept (their content is kept when a tag is not listed, except for `CLEAN_CONTENT`)."""

CLEAN_CONTENT: Final = frozenset(
    {"script", "style", "iframe", "object", "embed", "noscript", "template", "svg", "math", "textarea",
     "select", "title", "xmp", "noembed", "noframes", "frameset", "frame", "applet", "canvas", "audio",
     "video", "form", "button", "option", "head"}
)  # fmt: skip
"""Tags removed together with everything inside them."""

_GENERIC: Final = {"class", "id", "title", "lang", "dir", "style", "align"}
ATTRIBUTES: Final[dict[str, set[str]]] = {
    "*": _GENERIC,
    "a": {"href", "name"},
    "img": {"src", "alt", "width", "height"},
    "ol": {"start", "type", "reversed"},
    "li": {"value"},
    "td": {"colspan", "rowspan"},
    "th": {"colspan", "rowspan", "scope"},
    "col": {"span"},
    "colgroup": {"span"},
    "details": {"open"},
    "blockquote": {"cite"},
    "q": {"cite"},
    "del": {"cite", "datetime"},
    "ins": {"cite", "datetime"},
    "time": {"datetime"},
    "input": {"checked", "disabled"},
}
_VALUES: Final = {"input": {"type": {"checkbox"}}}

STYLE_PROPERTIES: Final = frozenset(
    {
        "color", "background-color", "font-weight", "font-style", "font-size", "font-family",
        "font-variant", "text-align", "text-decoration", "text-decoration-line", "text-decoration-color",
        "text-decoration-style", "text-indent", "text-transform", "vertical-align", "white-space",
        "word-break", "line-height", "letter-spacing", "word-spacing", "list-style-type", "width",
        "max-width", "min-width", "height", "max-height", "min-height", "border", "border-top",
        "border-right", "border-bottom", "border-left", "border-color", "border-style", "border-width",
        "border-radius", "border-collapse", "border-spacing", "padding", "padding-top", "padding-right",
        "padding-bottom", "padding-left", "margin", "margin-top", "margin-right", "margin-bottom",
        "margin-left", "overflow", "overflow-x", "overflow-y", "opacity", "direction",
    }
)  # fmt: skip
"""CSS properties a `style` attribute keeps: typography and box sizes, never positioning or images."""

_SCHEME: Final = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_CONTROL: Final = re.compile(r"[\x00-\x20\x7f]")
_DATA_IMAGE: Final = re.compile(
    r"^data:image/(?:png|gif|jpe?g|webp|avif|bmp);base64,[A-Za-z0-9+/=\s]*$", re.I
)
URL_SCHEMES: Final = frozenset({"http", "https", "mailto"})
_URL_ATTRS: Final = frozenset({"href", "src", "cite"})


def safe_url(value: str, *, image: bool = False) -> str | None:
    """`value` when it is a URL the kind lets through (see the module doc), else None."""
    url = value.strip()
    if not url:
        return None
    if "\\" in url or (_CONTROL.search(url.strip()) and not (image and url.startswith("data:"))):
        return None
    if url.startswith("//") or (image and url.startswith("/")):
        return None  # another host; or (an image) one of this server's own routes, which a GET must not reach
    match = _SCHEME.match(url)
    if match is None:
        return url  # relative path, `#anchor`, `?query`, `/path`
    scheme = match.group(1).lower()
    if scheme in URL_SCHEMES:
        return url
    if image and scheme == "data" and _DATA_IMAGE.match(url):
        return url
    return None


def _attribute_filter(tag: str, attr: str, value: str) -> str | None:
    if attr in _URL_ATTRS:
        return safe_url(value, image=tag == "img" and attr == "src")
    if attr == "style" and re.search(r"url\s*\(|expression\s*\(|@import|\\", value, re.I):
        return None
    return value


_CLEANER: Final = nh3.Cleaner(
    tags=set(TAGS),
    clean_content_tags=set(CLEAN_CONTENT),
    attributes={k: set(v) for k, v in ATTRIBUTES.items()},
    tag_attribute_values={k: {a: set(vals) for a, vals in v.items()} for k, v in _VALUES.items()},
    attribute_filter=_attribute_filter,
    generic_attribute_prefixes={"data-"},
    url_schemes=set(URL_SCHEMES | {"data"}),
    filter_style_properties=set(STYLE_PROPERTIES),
    link_rel="noopener noreferrer",
    strip_comments=True,
)


_NOT_A_TASK_BOX: Final = re.compile(r'<input(?![^>]*\btype="checkbox")[^>]*>')


def sanitize_html(html: str) -> str:
    """`html` with everything outside the allow-list removed (see the module doc)."""
    out = _CLEANER.clean(html)
    return _NOT_A_TASK_BOX.sub("", out) if "<input" in out else out


_REMOTE_IMG: Final = re.compile(r'(<img\b[^>]*?\s)src="(https?:[^"]*)"', re.I)


def hold_remote_images(html: str) -> str:
    """Remote images of the preview wait to be asked for: `src` becomes `data-remote-src`, so looking at a
    document sends nothing to its author (tracking pixels). The editor shows a click-to-load placeholder, or
    loads them when the person allows remote images."""
    return _REMOTE_IMG.sub(r'\1data-remote-src="\2"', html) if "<img" in html else html


__all__ = ["ATTRIBUTES", "STYLE_PROPERTIES", "TAGS", "hold_remote_images", "safe_url", "sanitize_html"]
