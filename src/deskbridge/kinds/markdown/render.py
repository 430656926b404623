"""The one Markdown renderer: the preview the browser shows, `md_get_rendered_html`, and every export use it.

CommonMark 0.31.2 core (markdown-it-py) + GFM (tables, task lists, strikethrough, extended autolinks, tag
filter; `gfm_rules.py` closes the spec gaps) + footnotes + front matter (kept, shown as a table) + math.
Math is emitted KaTeX-ready and typeset in the browser: `<span class="math inline">TeX</span>` and
`<div class="math block">TeX</div>`, TeX HTML-escaped (docs/markdown.md "Math").

`Renderer(gfm=False, extras=False)` is plain CommonMark — used only by the spec conformance tests, which run
the GFM spec's extension examples with the extensions on and its core examples with them off, exactly as
cmark-gfm's own spec runner does.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.dollarmath import dollarmath_plugin
from mdit_py_plugins.front_matter import front_matter_plugin
from mdit_py_plugins.gfm import gfm_plugin

from deskbridge.kinds.markdown.gfm_rules import gfm_spec_rules

RENDER_MAX_CHARS: Final = 16 * 1024 * 1024
"""Characters of Markdown rendered at most (bigger documents are cut and marked)."""

_EVENT_ATTR: Final = re.compile(r"""\s+on[a-z]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE)
_JS_URL: Final = re.compile(r"""(\s(?:href|src|xlink:href|action|formaction)\s*=\s*["']?)\s*javascript:""", re.IGNORECASE)


def _math_html(content: str, options: dict[str, Any]) -> str:
    return html.escape(content, quote=False)


def neutralize_raw_html(fragment: str) -> str:
    """Drop `on…=` handlers and `javascript:` URLs from raw HTML written in the document (preview safety).

    The preview also runs under the web UI's Content-Security-Policy; this keeps exported HTML harmless too.
    """
    return _JS_URL.sub(r"\1#blocked:", _EVENT_ATTR.sub("", fragment))


def front_matter_table(yaml_text: str) -> str:
    """Front matter as an HTML table (key, value); unparsable YAML is shown as-is with a warning class."""
    try:
        import yaml

        data = yaml.safe_load(yaml_text) if yaml_text.strip() else {}
    except Exception as exc:  # any YAML error: show the raw block, never fail the render
        reason = html.escape(str(exc).splitlines()[0] if str(exc) else "invalid YAML")
        return (f'<pre class="front-matter front-matter-invalid" title="{reason}"><code>'
                f"{html.escape(yaml_text)}</code></pre>\n")
    if not isinstance(data, dict):
        return f'<pre class="front-matter"><code>{html.escape(yaml_text)}</code></pre>\n'
    rows = []
    for key, value in data.items():
        if isinstance(value, list):
            shown = ", ".join(str(v) for v in value)
        elif isinstance(value, dict):
            shown = ", ".join(f"{k}: {v}" for k, v in value.items())
        else:
            shown = "" if value is None else str(value)
        rows.append(f"<tr><th>{html.escape(str(key))}</th><td>{html.escape(shown)}</td></tr>")
    return '<table class="front-matter">\n<tbody>\n' + "\n".join(rows) + "\n</tbody>\n</table>\n"


def _render_front_matter(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return front_matter_table(tokens[idx].content)


def _source_lines(state: Any) -> None:
    """Mark top-level blocks with `data-source-line` (1-based) so the preview can scroll with the editor."""
    for token in state.tokens:
        if token.map and token.nesting >= 0 and token.level == 0 and token.type != "inline":
            token.attrSet("data-source-line", str(token.map[0] + 1))


def _safe_html_rule(original: Any):
    def render(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return neutralize_raw_html(original(self, tokens, idx, options, env))

    return render


@dataclass(frozen=True)
class RenderOptions:
    gfm: bool = True
    extras: bool = True
    """Footnotes (via gfm_plugin), front matter and math."""
    source_lines: bool = False
    safe_raw_html: bool = True


@lru_cache(maxsize=8)
def parser(options: RenderOptions = RenderOptions()) -> MarkdownIt:
    """The configured markdown-it instance for `options` (cached; instances are reused across renders)."""
    md = MarkdownIt("commonmark")
    if options.gfm:
        md.use(gfm_plugin)
        gfm_spec_rules(md)
    if options.extras:
        md.use(front_matter_plugin)
        md.add_render_rule("front_matter", _render_front_matter)
        md.use(dollarmath_plugin, allow_blank_lines=False, allow_space=False, allow_digits=False,
               renderer=_math_html)
    if options.source_lines:
        md.core.ruler.push("source_lines", _source_lines)
    if options.safe_raw_html:
        for name in ("html_block", "html_inline"):
            rule = md.renderer.rules.get(name)
            if rule is not None:
                md.add_render_rule(name, _safe_html_rule(rule.__func__ if hasattr(rule, "__func__") else rule))
    return md


PREVIEW: Final = RenderOptions(source_lines=True)
EXPORT: Final = RenderOptions()


def render_html(text: str, options: RenderOptions = EXPORT) -> str:
    """Render Markdown to an HTML fragment with the one configured renderer."""
    if len(text) > RENDER_MAX_CHARS:
        text = text[:RENDER_MAX_CHARS]
    return parser(options).render(text)


def render_spec(text: str, *, gfm: bool) -> str:
    """Spec-conformance rendering: CommonMark alone, or CommonMark + GFM extensions (no extras, raw HTML as is)."""
    return parser(RenderOptions(gfm=gfm, extras=False, safe_raw_html=False)).render(text)
