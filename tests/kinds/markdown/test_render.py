"""The renderer as the preview and exports use it: GFM extras, front matter, math, safety, incremental preview."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.kinds.markdown import render
from deskbridge.kinds.markdown.render import PREVIEW, PreviewRenderer, render_html


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
