"""Our own markdown-it rules that close the gap between markdown-it-py's GFM plugins and the GFM 0.29 spec.

Measured gap (research/markdown.md §3: 661/671 with `gfm_plugin`): strikethrough renders `<s>` where GFM says
`<del>` (spec §6.5); table alignment renders `style="text-align:…"` where GFM says `align="…"` (§4.10); task
list items carry classes GFM does not emit (§5.3); the extended email autolink loses a local part containing
`_`, because `_` is an emphasis delimiter and is not in the inline scanner's pending text (§6.9, example
632); and the tag filter (§6.11) is not implemented at all. Each fix is a renderer override or a core rule.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

_TAGFILTER: Final = re.compile(
    r"<(?=/?(?:title|textarea|style|xmp|iframe|noembed|noframes|script|plaintext)(?=[\s/>]|$))",
    re.IGNORECASE,
)
"""GFM §6.11: these nine tags get their leading `<` replaced by `&lt;` (case-insensitive)."""

_EMAIL_LOCAL_TAIL: Final = re.compile(r"[A-Za-z0-9.+\-_]+$")
"""GFM §6.9: the local part of an extended email autolink: alphanumerics and `.`, `-`, `_`, `+`."""

_ALIGN: Final = re.compile(r"text-align:\s*(left|center|right)")


def tagfilter(html: str) -> str:
    """Escape the disallowed raw HTML tags of GFM §6.11."""
    return _TAGFILTER.sub("&lt;", html)


def _render_del(open_: bool):
    def render(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
        return "<del>" if open_ else "</del>"

    return render


def _render_cell(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    style = token.attrGet("style")
    if style:
        m = _ALIGN.search(str(style))
        attrs = dict(token.attrs)
        attrs.pop("style", None)
        if m:
            attrs["align"] = m.group(1)
        token.attrs = attrs
    return self.renderToken(tokens, idx, options, env)


def _render_task_item(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    result = self.renderToken(tokens, idx, options, env)
    if token.meta and "checked" in token.meta:
        checked = ' checked=""' if token.meta["checked"] else ""
        result += f'<input{checked} disabled="" type="checkbox"> '
    return result


def _drop_task_classes(state: StateCore) -> None:
    """GFM §5.3 output has no classes on task lists; we style them with `li > input[type=checkbox]`."""
    for token in state.tokens:
        cls = token.attrGet("class")
        if cls in ("contains-task-list", "task-list-item"):
            attrs = dict(token.attrs)
            attrs.pop("class", None)
            token.attrs = attrs


def _join_email_local_part(state: StateCore) -> None:
    """Move an email local part split off by an `_` delimiter back into its `mailto:` autolink."""
    for block in state.tokens:
        children = block.children
        if block.type != "inline" or not children:
            continue
        for i, tok in enumerate(children):
            if (
                tok.type != "link_open"
                or tok.info != "auto"
                or not str(tok.attrGet("href") or "").startswith("mailto:")
                or i == 0
                or i + 2 >= len(children)
            ):
                continue
            prev, text = children[i - 1], children[i + 1]
            if prev.type != "text":
                continue
            m = _EMAIL_LOCAL_TAIL.search(prev.content)
            if not m:
                continue
            head = prev.content[: m.start()]
            if head and (head[-1].isalnum() or head[-1] in "@"):
                continue
            local = m.group(0)
            prev.content = head
            text.content = local + text.content
            tok.attrSet("href", "mailto:" + local + str(tok.attrGet("href"))[len("mailto:") :])


def _render_html_block(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return tagfilter(tokens[idx].content)


def _render_html_inline(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    return tagfilter(tokens[idx].content)


def gfm_spec_rules(md: MarkdownIt) -> None:
    """Install the GFM 0.29 output rules on a parser that already uses `mdit_py_plugins.gfm.gfm_plugin`."""
    md.add_render_rule("s_open", _render_del(True))
    md.add_render_rule("s_close", _render_del(False))
    md.add_render_rule("th_open", _render_cell)
    md.add_render_rule("td_open", _render_cell)
    md.add_render_rule("list_item_open", _render_task_item)
    md.add_render_rule("html_block", _render_html_block)
    md.add_render_rule("html_inline", _render_html_inline)
    md.core.ruler.push("gfm_task_classes", _drop_task_classes)
    md.core.ruler.push("gfm_email_local_part", _join_email_local_part)
