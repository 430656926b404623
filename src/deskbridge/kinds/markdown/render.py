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

import bisect
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
from deskbridge.kinds.markdown.highlight import highlight
from deskbridge.kinds.markdown.offsets import OffsetMap
from deskbridge.kinds.markdown.outline import front_matter_span, outline
from deskbridge.kinds.markdown.sanitize import hold_remote_images, sanitize_html
from deskbridge.kinds.markdown.wide_tables import wide_tables

RENDER_MAX_CHARS: Final = 16 * 1024 * 1024
"""Characters of Markdown rendered at most (bigger documents are cut and marked)."""


def _math_html(content: str, options: dict[str, Any]) -> str:
    return html.escape(content, quote=False)


def neutralize_raw_html(fragment: str) -> str:
    """`fragment` through the kind's one allow-list sanitiser (sanitize.py)."""
    return sanitize_html(fragment)


def yaml_has_aliases(yaml_text: str) -> bool:
    """True when the YAML uses an alias (`*name`), which repeats what its anchor holds: nine aliases nested seven
    deep are 4.7 million values, whose text ran to hundreds of megabytes from a few hundred bytes (the "billion
    laughs" of YAML 1.2 §3.2.2.2 aliases). Raises yaml's error for text that is not YAML."""
    import yaml

    return any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(yaml_text, Loader=yaml.SafeLoader))


def front_matter_table(yaml_text: str) -> str:
    """Front matter as an HTML table (key, value); unparsable YAML is shown as-is with a warning class."""
    try:
        import yaml

        if yaml_has_aliases(yaml_text):  # shown as written, never expanded
            return f'<pre class="front-matter"><code>{html.escape(yaml_text)}</code></pre>\n'
        data = yaml.safe_load(yaml_text) if yaml_text.strip() else {}
    except Exception as exc:  # any YAML error: show the raw block, never fail the render
        reason = html.escape(str(exc).splitlines()[0] if str(exc) else "invalid YAML")
        return (
            f'<pre class="front-matter front-matter-invalid" title="{reason}"><code>'
            f"{html.escape(yaml_text)}</code></pre>\n"
        )
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
    env = state.env if isinstance(state.env, dict) else {}
    offset = int(env.get("line_offset", 0))
    offset_from = int(env.get("line_offset_from", 0) or 0)  # lines before this (front matter) are not shifted
    for token in state.tokens:
        if token.map and token.nesting >= 0 and token.level == 0 and token.type != "inline":
            line = token.map[0]
            token.attrSet("data-source-line", str(line + 1 + (offset if line >= offset_from else 0)))


@dataclass(frozen=True)
class RenderOptions:
    gfm: bool = True
    extras: bool = True
    """Footnotes (via gfm_plugin), front matter and math."""
    source_lines: bool = False
    safe_raw_html: bool = True
    """Pass the output through the allow-list sanitiser (sanitize.py); off only for the spec tests."""


@lru_cache(maxsize=8)
def parser(options: RenderOptions = RenderOptions()) -> MarkdownIt:
    """The configured markdown-it instance for `options` (cached; instances are reused across renders)."""
    md = MarkdownIt("commonmark", {"highlight": highlight} if options.extras else None)
    if options.gfm:
        md.use(gfm_plugin)
        gfm_spec_rules(md)
        wide_tables(md)  # past TABLE_COLUMNS_MAX columns a table is shown as text (wide_tables.py)
    if options.extras:
        md.use(front_matter_plugin)
        md.add_render_rule("front_matter", _render_front_matter)
        md.use(
            dollarmath_plugin,
            allow_blank_lines=False,
            allow_space=False,
            allow_digits=False,
            renderer=_math_html,
        )
    if options.source_lines:
        md.core.ruler.push("source_lines", _source_lines)
    if options.safe_raw_html:
        for name in ("html_block", "html_inline"):
            rule = md.renderer.rules.get(name)
            if rule is not None:
                md.add_render_rule(name, _flag_raw_html(rule.__func__ if hasattr(rule, "__func__") else rule))
    return md


def _flag_raw_html(original: Any):
    """Wrap a raw-HTML render rule so the render's env says the output holds the document's own HTML (which
    must go through the sanitiser; markdown-it's own markup is escaped and its links validated)."""

    def render(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        if isinstance(env, dict):
            env[RAW_HTML] = True
        return original(self, tokens, idx, options, env)

    return render


RAW_HTML: Final = "deskbridge_raw_html"
"""Key a render's env gets when the document's own HTML went into the output."""


PREVIEW: Final = RenderOptions(source_lines=True)
EXPORT: Final = RenderOptions()


def render_html(text: str, options: RenderOptions = EXPORT) -> str:
    """Render Markdown to an HTML fragment with the one configured renderer."""
    if len(text) > RENDER_MAX_CHARS:
        text = text[:RENDER_MAX_CHARS]
    env: dict[str, Any] = {}
    out = parser(options).render(text, env)
    if options.safe_raw_html and env.get(RAW_HTML):
        out = sanitize_html(out)
    return hold_remote_images(out) if options.source_lines and options.safe_raw_html else out


def render_spec(text: str, *, gfm: bool) -> str:
    """Spec-conformance rendering: CommonMark alone, or CommonMark + GFM extensions (no extras, raw HTML as is)."""
    return parser(RenderOptions(gfm=gfm, extras=False, safe_raw_html=False)).render(text)


# --- incremental preview -------------------------------------------------------------------------------

CHUNKED_FROM_CHARS: Final = 200_000
"""Documents at least this long are previewed section by section, re-rendering only changed sections."""

_REF_DEF: Final = re.compile(r"(?:^|\n) {0,3}\[(?!\^)[^\]\n]{1,999}\]:[ \t]*\S")
"""A line that may be a link reference definition; the parser decides. Starts with a literal newline where
possible so `re` can skip ahead (a `^`-anchored MULTILINE scan of 10 MB takes ~100 ms)."""
_REF_DEF_FAST: Final = re.compile(r"\n {0,3}\[(?!\^)[^\]\n]{1,999}\]:[ \t]*\S")
_FOOTNOTE: Final = re.compile(r"\[\^[^\]\n]+\]")


class PreviewRenderer:
    """Preview HTML for one document, re-rendering only the sections that changed since the last call.

    A full render of the 120,000-line stress document takes seconds; an edit touches one section. Sections
    are split at top-level headings (outline.py), which always start a new block, so rendering them apart
    gives the same HTML. Link reference definitions are appended to every section (they render nothing);
    documents with footnotes are rendered whole, because footnote numbering spans the document.
    """

    def __init__(self, max_cached: int = 50_000) -> None:
        # section text -> (HTML with data-source-line relative to the section, last offset, HTML at that offset)
        self._cache: dict[str, tuple[str, int, str]] = {}
        self._max = max_cached
        self._defs = ""
        self._refs_cache: dict[str, dict[str, tuple[str, str]]] = {}

    def render(self, text: str, newline_positions: Any = None) -> str:
        """Preview HTML of `text`; pass the text's newline positions (numpy array) when already known."""
        if len(text) < CHUNKED_FROM_CHARS or _FOOTNOTE.search(text):
            return render_html(text, PREVIEW)
        newlines = newline_positions if newline_positions is not None else OffsetMap(text).newline_positions
        fm_end_line = text.count("\n", 0, front_matter_span(text)) + 1
        heads = [h.line for h in outline(text) if h.line >= fm_end_line]
        if fm_end_line > 1:
            heads = heads[1:]  # the front matter stays with the first section (it renders joined to it)
        cut_lines = sorted({1, *(line for line in heads if _safe_cut(text, newlines, line))})
        bounds = [0 if line == 1 else int(newlines[line - 2]) + 1 for line in cut_lines] + [len(text)]
        chunks = [(line, text[bounds[i] : bounds[i + 1]]) for i, line in enumerate(cut_lines)]
        def_at = [m.start() + 1 for m in _REF_DEF_FAST.finditer(text)]
        if _REF_DEF.match(text):
            def_at.insert(0, 0)
        defs = (
            self._definitions([chunks[bisect.bisect_right(bounds, p) - 1] for p in def_at]) if def_at else ""
        )
        if defs != self._defs:
            self._cache, self._defs = {}, defs
        parts: list[str] = []
        raw = False
        fresh: dict[str, tuple[str, int, str, bool]] = {}
        md = parser(PREVIEW)
        for line, chunk in chunks:
            offset = line - 1
            entry = self._cache.get(chunk) or fresh.get(chunk)
            if entry is None:
                relative, has_raw = self._render_section(md, chunk, defs)
                entry = (relative, 0, relative, has_raw)
            relative, last_offset, html, has_raw = entry
            if last_offset != offset:
                html = _shift_source_lines(relative, offset)
            fresh[chunk] = (relative, offset, html, has_raw)
            parts.append(html)
            raw = raw or has_raw
        self._cache = fresh if len(fresh) <= self._max else {}
        # Sanitised as a whole (like a full render), so an HTML block that spans a cut balances the same way.
        out = sanitize_html("".join(parts)) if raw else "".join(parts)
        return hold_remote_images(out)

    @staticmethod
    def _render_section(md: MarkdownIt, chunk: str, defs: str) -> tuple[str, bool]:
        """Render one section with the document's definitions put in front (after any front matter), where
        no unclosed fence or paragraph of the section can swallow them; source lines are corrected back."""
        if not defs:
            env: dict[str, Any] = {"line_offset": 0}
            return md.render(chunk, env), bool(env.get(RAW_HTML))
        head_end = front_matter_span(chunk)
        prefix = defs + "\n\n"
        source = chunk[:head_end] + prefix + chunk[head_end:]
        env = {
            "line_offset": -prefix.count("\n"),
            "line_offset_from": head_end and chunk.count("\n", 0, head_end),
        }
        return md.render(source, env), bool(env.get(RAW_HTML))

    def _definitions(self, chunks: list[tuple[int, str]]) -> str:
        """Link reference definitions of the whole document, as lines to append to each section.

        Only what the parser really takes as a definition counts (not one inside code or a paragraph), so the
        sections that may hold one are parsed alone; the first definition of a label wins, as in CommonMark.
        """
        seen: dict[str, str] = {}
        md = parser(PREVIEW)
        for _, chunk in dict.fromkeys(chunks):
            refs = self._refs_cache.get(chunk)
            if refs is None:
                env: dict[str, Any] = {}
                md.parse(chunk, env)
                refs = {
                    label: (ref.get("href", ""), ref.get("title", ""))
                    for label, ref in (env.get("references") or {}).items()
                }
                self._refs_cache[chunk] = refs
            for label, (href, title) in refs.items():
                if label not in seen:
                    escaped = title.replace("\\", "\\\\").replace('"', '\\"')
                    seen[label] = f"[{label}]: <{href}>" + (f' "{escaped}"' if title else "")
        return "\n".join(seen.values())


def _safe_cut(text: str, newlines: Any, line: int) -> bool:
    """Whether the document may be split before heading `line`: the heading starts in column 0 right after a
    blank line, so no list item, quote, paragraph or HTML block (types 6-7) can continue across the cut."""
    start = int(newlines[line - 2]) + 1
    return not (start < 2 or start >= len(text) or text[start - 2] != "\n" or text[start] in " \t")


_SOURCE_LINE: Final = re.compile(r'data-source-line="(\d+)"')


def _shift_source_lines(html: str, offset: int) -> str:
    return (
        _SOURCE_LINE.sub(lambda m: f'data-source-line="{int(m.group(1)) + offset}"', html) if offset else html
    )
