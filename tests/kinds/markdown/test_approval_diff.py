"""The diff a person approves is exact: applying its hunks gives the text the edit produces."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.kinds.markdown.approvals import edits_diff
from deskbridge.kinds.markdown.collab import Edit, apply_edits


def apply_unified_diff(text: str, diff: str) -> str:
    """A small patch applier (enough for our hunks) so the test does not trust difflib's output blindly."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    for hunk in re.finditer(r"^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@\n((?:[ +\-\\].*\n?)*)", diff, re.M):
        old_start, old_len = int(hunk.group(1)), int(hunk.group(2) or 1)
        start = old_start - 1 if old_len else old_start
        out += lines[i:start]
        i = start
        last = None
        for line in hunk.group(3).splitlines(keepends=True):
            if line.startswith("\\"):
                if last in ("+", " ") and out and out[-1].endswith("\n"):
                    out[-1] = out[-1][:-1]
                continue
            last = line[0]
            if last == " ":
                out.append(lines[i])
                i += 1
            elif last == "-":
                i += 1
            else:
                out.append(line[1:])
    return "".join(out + lines[i:])


@st.composite
def document_and_edits(draw):
    lines = draw(
        st.lists(st.sampled_from(["# Title", "text 😀", "", "- item", "中文"]), min_size=1, max_size=40)
    )
    text = "\n".join(lines) + draw(st.sampled_from(["\n", ""]))
    points = sorted(draw(st.lists(st.integers(0, len(text)), min_size=2, max_size=8)))
    points = sorted(set(points)) if len(set(points)) >= 2 else [0, len(text)]
    inserts = st.sampled_from(["", "Z", "new\nline", "\n", "😀"])
    edits = [Edit(points[i], points[i + 1], draw(inserts)) for i in range(0, len(points) - 1, 2)]
    return text, edits


@settings(max_examples=300, deadline=None)
@given(document_and_edits())
def test_hunks_reproduce_the_edit(case):
    text, edits = case
    diff = edits_diff(text, [(e.start, e.end, e.insert) for e in edits], "doc.md")
    expected = apply_edits(text, edits)
    assert (apply_unified_diff(text, diff) if diff else text) == expected
    if diff:
        assert diff.startswith("--- a/doc.md\n+++ b/doc.md\n@@ ")
