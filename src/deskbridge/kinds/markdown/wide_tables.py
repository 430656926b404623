"""A GFM table wider than `TABLE_COLUMNS_MAX` columns is shown as its source text with a note, not laid out.

GFM sets no limit on a table's columns (spec §4.10), and every one of them costs a token per row in the parser,
a cell in the HTML and a column in the browser's table layout: one line of 20,000 columns took seconds to parse
and render and more than ten to show in the preview, on every keystroke. No one reads a table that wide, so past
the limit the block (found exactly as the table rule finds it: same delimiter row, same header check, same
end) becomes one `wide_table` token whose HTML is the escaped source in a `<pre>` after a one-line note — its
size is the size of the source, whatever the column count.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Final

from markdown_it import MarkdownIt
from markdown_it.rules_block import StateBlock
from markdown_it.rules_block.table import table
from markdown_it.token import Token

TABLE_COLUMNS_MAX: Final = 1000
"""Most columns a table is laid out with (a 2,000-column table still shows in the preview in well under a
second; 20,000 took seconds)."""


def _wide_table(state: StateBlock, start_line: int, end_line: int, silent: bool) -> bool:
    if start_line + 2 > end_line:
        return False
    delimiter = start_line + 1
    # The delimiter row has one '|' between each two columns: a cheap bound before any real check.
    if state.src.count("|", state.bMarks[delimiter], state.eMarks[delimiter]) <= TABLE_COLUMNS_MAX:
        return False
    if not table(state, start_line, end_line, True):  # the table rule's own checks, emitting nothing
        return False
    cells = state.src[state.bMarks[delimiter] + state.tShift[delimiter] : state.eMarks[delimiter]].split("|")
    columns = len(cells) - (not cells[0].strip()) - (len(cells) > 1 and not cells[-1].strip())
    if columns <= TABLE_COLUMNS_MAX:
        return False
    if silent:
        return True
    # The body ends where the table rule's does: a blank line, an outdent, a block that interrupts a
    # blockquote, or a code block.
    terminators = state.md.block.ruler.getRules("blockquote")
    next_line = start_line + 2
    while next_line < end_line:
        if state.sCount[next_line] < state.blkIndent or state.isEmpty(next_line):
            break
        if any(rule(state, next_line, end_line, True) for rule in terminators):
            break
        if state.is_code_block(next_line):
            break
        next_line += 1
    token = state.push("wide_table", "div", 0)
    token.map = [start_line, next_line]
    token.content = state.getLines(start_line, next_line, state.blkIndent, False)
    token.meta = {"columns": columns}
    state.line = next_line
    return True


def _render_wide_table(self: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    token = tokens[idx]
    columns = token.meta["columns"]
    note = (
        f"This table has {columns:,} columns; tables of more than {TABLE_COLUMNS_MAX:,} columns are "
        "shown as text."
    )
    return (
        f'<div class="wide-table"{self.renderAttrs(token)}><p class="wide-table-note">{note}</p>'
        f"<pre><code>{html.escape(token.content, quote=False)}</code></pre></div>\n"
    )


def wide_tables(md: MarkdownIt) -> None:
    """Install the rule on a parser with GFM tables (before the table rule)."""
    md.block.ruler.before("table", "wide_table", _wide_table, {"alt": ["paragraph", "reference"]})
    md.add_render_rule("wide_table", _render_wide_table)
