"""The outline in a real browser: every heading of a document with thousands of them is reachable (issue 10:
the sidebar used to stop at 3,000 of 5,639 with a "… and N more" that did nothing). The list is virtualised."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
pytestmark = pytest.mark.browser

_spec = importlib.util.spec_from_file_location(
    "markdown_ui_harness", HERE.parents[1] / "kinds" / "markdown" / "ui" / "harness.py"
)
harness = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = harness
_spec.loader.exec_module(harness)


def test_every_one_of_5639_headings_is_reachable_in_the_outline(tmp_path, new_page):
    text = "".join(f"## Heading {n}\n\nBody {n}.\n\n" for n in range(1, 5640))
    bench = harness.make_bench(tmp_path / "notes", text=text, require_approval=False)
    with harness.serving(bench):
        page = new_page(viewport={"width": 1400, "height": 860})
        page.goto(bench.launch_url)
        page.wait_for_function("() => document.body.dataset.ready === '1' && window.deskbridge.view")
        page.click("#tab-outline")
        page.wait_for_selector("#outline-list .outline-item")
        # only what shows is drawn, yet the list is as tall as all 5,639 rows
        drawn = page.evaluate("document.querySelectorAll('#outline-list .outline-item').length")
        assert 0 < drawn < 200
        page.evaluate(
            "() => { const l = document.querySelector('#outline-list'); l.scrollTop = l.scrollHeight; }"
        )
        last = page.wait_for_selector("#outline-list .outline-item[title='Heading 5639']")
        last.click()
        line = page.evaluate(
            "() => { const v = window.deskbridge.view; return v.state.doc.lineAt(v.state.selection.main.head).number; }"
        )
        assert line == 4 * 5638 + 1
    assert page.errors == []
