"""The renderer as the preview and exports use it: GFM extras, front matter, math, safety, incremental preview."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.kinds.markdown import render
from deskbridge.kinds.markdown.render import PREVIEW, PreviewRenderer, render_html
from deskbridge.kinds.markdown.wide_tables import TABLE_COLUMNS_MAX


def test_front_matter_is_kept_and_shown_as_a_table():
    html = render_html("---\ntitle: Hi\ntags: [a, b]\n---\n# T\n")
    assert '<table class="front-matter">' in html and "<th>tags</th><td>a, b</td>" in html


def test_invalid_front_matter_is_shown_not_dropped():
    html = render_html("---\ntitle: [unclosed\n---\ntext\n")
    assert "front-matter-invalid" in html and "[unclosed" in html


def test_front_matter_with_nested_yaml_aliases_is_shown_as_written_not_expanded():
    """A "billion laughs" front matter: 9 aliases nested 6 deep were expanded into 39 MB of preview HTML from
    these 300 bytes (one level more: 350 MB, the level after: the server's memory)."""
    names = "abcdefg"
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for prev, name in itertools.pairwise(names):
        lines.append(f"{name}: &{name} [" + ", ".join(f"*{prev}" for _ in range(9)) + "]")
    bomb = "---\n" + "\n".join(lines) + "\n---\n# Title\n"
    for options in (PREVIEW, render.EXPORT):
        html = render_html(bomb, options)
        assert len(html) < 4 * len(bomb), len(html)
        assert "[*f, *f" in html and "<h1" in html  # the block as written, and the document after it


def test_math_is_katex_ready_and_escaped():
    html = render_html("Inline $a<b$ and\n\n$$\nx^2\n$$\n")
    assert '<span class="math inline">a&lt;b</span>' in html
    assert '<div class="math block">' in html


def test_footnotes_tasks_tables_strikethrough():
    html = render_html("- [x] done\n\n~~no~~ ok[^1]\n\n| a |\n|:-:|\n| b |\n\n[^1]: note\n")
    assert '<input checked="" disabled="" type="checkbox">' in html
    assert "<del>no</del>" in html and 'align="center"' in html and "footnote" in html


def test_raw_html_handlers_and_script_are_neutralized():
    html = render_html(
        '<img src="x" onerror="alert(1)">\n\n<script>alert(2)</script>\n\n<a href="javascript:alert(3)">x</a>\n'
    )
    assert "onerror" not in html and "<script" not in html and "javascript:" not in html


def test_preview_marks_source_lines():
    assert '<h1 data-source-line="3">' in render_html("para\n\n# H\n", PREVIEW)


blocks = st.sampled_from(
    [
        "# Title",
        "## Sub",
        "text line",
        "",
        "",
        "- item",
        "```",
        "code # x",
        "[ref]: http://example.com",
        "see [ref]",
        "Setext\n---",
        "> quote",
        "| a | b |\n|---|---|\n| 1 | 2 |",
        "$x$",
        "***",
        "  # indented",
        "<div>",
        "<!--",
        "-->",
        "1. one",
        "    # code",
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.booleans(), st.lists(blocks, min_size=1, max_size=40))
def test_incremental_preview_equals_a_full_render(front_matter, lines):
    text = ("---\ntitle: x\n---\n" if front_matter else "") + "\n".join(lines) + "\n"
    old = render.CHUNKED_FROM_CHARS
    render.CHUNKED_FROM_CHARS = 0
    try:
        renderer = PreviewRenderer()
        assert renderer.render(text) == render_html(text, PREVIEW)
        edited = "intro line\n\n" + text.replace("text line", "changed line", 1)
        assert renderer.render(edited) == render_html(edited, PREVIEW)
    finally:
        render.CHUNKED_FROM_CHARS = old


def _table(columns: int, rows: int = 2) -> str:
    head = "|" + "|".join(f"c{i}" for i in range(columns)) + "|\n"
    delimiter = "|" + "|".join("-" for _ in range(columns)) + "|\n"
    body = "".join("|" + "|".join(f"r{r}" for _ in range(columns)) + "|\n" for r in range(rows))
    return head + delimiter + body


def test_a_table_at_the_column_limit_is_laid_out():
    html = render_html(_table(TABLE_COLUMNS_MAX))
    assert html.count("<th>") == TABLE_COLUMNS_MAX and html.count("<td") == 2 * TABLE_COLUMNS_MAX
    assert "wide-table" not in html


def test_a_table_wider_than_the_limit_is_shown_as_its_text_with_a_note():
    """One line of 20,000 columns took seconds to render and more than ten to show in the preview: past the
    limit the HTML is the escaped source and a note, as big as the source whatever the column count."""
    for columns in (TABLE_COLUMNS_MAX + 1, 20_000):
        source = _table(columns) + "| <b>x</b> |" * 2 + "\n"
        text = "# Wide\n\n" + source + "\nAfter the table.\n"
        html = render_html(text, PREVIEW)
        assert "<table" not in html and "<td" not in html and "<th" not in html
        assert f"This table has {columns:,} columns" in html
        assert '<div class="wide-table" data-source-line="3">' in html
        assert html.count("<pre>") == 1 and "| &lt;b&gt;x&lt;/b&gt; |" in html  # the last row, escaped
        assert "<p data-source-line=" in html and "After the table." in html  # the table ends where it did
        assert len(html) < len(text) + 1000


def test_a_wide_looking_block_that_is_not_a_table_stays_a_paragraph():
    # header and delimiter rows of different widths are no table (GFM §4.10), however wide
    text = "a | b\n" + "|" + "-|" * (TABLE_COLUMNS_MAX + 5) + "\n"
    assert render_html(text).startswith("<p>") and "wide-table" not in render_html(text)
