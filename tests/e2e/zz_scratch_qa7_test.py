import os, time
from pathlib import Path
import pytest
from markdown_browser_test import harness, _open, editor_text, type_at_end, wait_synced
pytestmark = pytest.mark.browser

def test_scratch(browser, tmp_path):
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    errors = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        p2 = _open(browser, bench, errors)
        type_at_end(page, "\nfrom tab one")
        wait_synced(page, bench)
        p2.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('from tab one')")
        print("TAB2 sees tab1 typing")
        os.rename(bench.root / "notes.md", bench.root / "moved.md")
        time.sleep(2)
        type_at_end(page, "\nafter rename")
        page.keyboard.press("Control+s")
        time.sleep(2)
        print("STATUS", page.evaluate("document.querySelector('#st-dirty')?.className"), page.evaluate("document.body.innerText").replace("\n"," | ")[:1500])
        print("FILES", sorted(x.name for x in bench.root.iterdir()))
        print("notes.md", (bench.root/"notes.md").exists() and (bench.root/"notes.md").read_text()[-60:])
        (bench.root / "notes.md").unlink(missing_ok=True)
        type_at_end(page, "\nafter delete")
        page.keyboard.press("Control+s")
        time.sleep(2)
        print("STATUS2", page.evaluate("document.body.innerText").replace("\n"," | ")[-800:])
        print("FILES2", sorted(x.name for x in bench.root.iterdir()))
        print("ERRORS", errors)
        page.context.close(); p2.context.close()
