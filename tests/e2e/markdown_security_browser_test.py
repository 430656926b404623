"""Issue 8 and issue 10 in a real browser (Debian's Chromium through Playwright) on the real `deskbridge serve`:
a hostile document in the preview, a spoofed approval dialog, clicks that come too soon or from a hidden page,
the approval dialog while the person types, remote images, and an AI's save-as.

Needs /usr/bin/chromium and the `playwright` package; skipped with a message otherwise.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()

pytestmark = pytest.mark.browser

# Chromium and Playwright: the shared `browser` / `new_page` fixtures of tests/e2e/conftest.py (skipped
# with a message when either is missing).


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load("markdown_ui_harness", HERE.parents[1] / "kinds" / "markdown" / "ui" / "harness.py")
corpus = _load("injection_corpus", HERE.parents[1] / "kinds" / "markdown" / "injection_corpus.py")


@pytest.fixture
def listener():
    with corpus.Listener() as lst:
        yield lst


def _open(browser, bench, errors):
    context = browser.new_context(viewport={"width": 1400, "height": 860})
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda d: (errors.append(f"dialog: {d.message}"), d.dismiss()))
    page.goto(bench.launch_url)
    page.wait_for_function("() => (document.body.dataset.ready === '1' && window.deskbridge.view)")
    page.wait_for_function("() => window.deskbridge.preview?.querySelector('h1, h2')")
    return page


def served_editor(browser, tmp_path, text, *, require_approval=True):
    bench = harness.make_bench(tmp_path / "notes", text=text, require_approval=require_approval)
    return bench


def editor_text(page) -> str:
    return page.evaluate("window.deskbridge.view.state.doc.toString()")


@pytest.mark.security
def test_a_hostile_document_in_the_preview_runs_nothing_fetches_nothing_and_cannot_cover_the_dialog(
    browser, tmp_path, listener
):
    bench = harness.make_bench(tmp_path / "notes", text=corpus.document(listener.port))
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        frame = page.query_selector("#preview-frame")
        assert frame.get_attribute("sandbox") == "allow-same-origin"  # never allow-scripts
        page.wait_for_timeout(800)
        html = page.evaluate("window.deskbridge.preview.innerHTML")
        assert "a fine link" in html
        # the editor maps relative images to the document's asset route; nothing else is fetched
        corpus.assert_harmless(
            html.replace(f'src="/api/markdown/docs/{bench.service.current_id}/asset/', 'src="'),
            where="preview",
        )
        # the overlay vector is drawn inside the frame only: an approval dialog is on top of it
        future = bench.submit(bench.ai_edit("a fine link", "a changed link"))
        page.wait_for_selector("#approval-dialog")
        box = page.query_selector("#approval-approve").bounding_box()
        top = page.evaluate(
            "([x, y]) => document.elementFromPoint(x, y)?.id", [box["x"] + box["width"] / 2, box["y"] + 5]
        )
        assert top == "approval-approve"
        page.wait_for_timeout(600)
        page.click("#approval-reject")
        with pytest.raises(Exception, match="APPROVAL_DECLINED"):
            future.result(10)
        page.context.close()
    assert listener.hits == [], f"the preview reached out: {listener.hits[:3]}"
    assert [e for e in errors if "dialog" in e] == []


@pytest.mark.security
def test_approval_clicks_too_soon_or_from_a_hidden_page_are_ignored(browser, tmp_path):
    bench = harness.make_bench(tmp_path / "notes")
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        future = bench.submit(bench.ai_edit("Deskbridge lets", "Deskbridge helps"))
        page.wait_for_selector("#approval-dialog")
        page.evaluate("document.querySelector('#approval-approve').click()")  # at once: a decoy or a reflex
        page.wait_for_selector("#approval-dialog .too-soon:not([hidden])")
        page.wait_for_timeout(600)
        page.evaluate(
            "Object.defineProperty(document, 'visibilityState', {get: () => 'hidden', configurable: true})"
        )
        page.click("#approval-approve")  # the page says it is not visible (framed, in the background)
        time.sleep(0.3)
        assert not future.done() and page.query_selector("#approval-dialog") is not None
        page.evaluate("delete document.visibilityState")
        page.click("#approval-approve")
        future.result(10)
        page.context.close()
    assert errors == []


def test_the_approval_dialog_never_takes_the_keyboard_from_the_person(browser, tmp_path):
    """Issue 10 data loss 1: the person types through the dialog's arrival; nothing typed answers it; the answer
    is a shortcut typing cannot produce, and focus stays in the editor."""
    bench = harness.make_bench(tmp_path / "notes")
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type("\nTyped ", delay=30)
        future = bench.submit(bench.ai_edit("Deskbridge lets", "Deskbridge helps"))
        page.keyboard.type("while the dialog appears, with spaces and Enter\nand more ", delay=40)
        page.wait_for_selector("#approval-dialog")
        page.keyboard.type("after it is shown", delay=40)
        assert page.evaluate("document.activeElement.classList.contains('cm-content')")
        assert not future.done(), "typing answered the approval"
        page.keyboard.press("Control+Shift+Enter")
        future.result(10)
        page.wait_for_function("() => !document.querySelector('#approval-dialog')")
        assert page.evaluate("document.activeElement.classList.contains('cm-content')")
        page.keyboard.type("!", delay=20)
        page.wait_for_function("() => window.deskbridge.sync.pending() === 0")
        text = editor_text(page)
        assert text.endswith(
            "\nTyped while the dialog appears, with spaces and Enter\nand more after it is shown!"
        ), text[-120:]
        assert "Deskbridge helps" in text
        page.context.close()
    assert errors == []


@pytest.mark.security
def test_remote_images_wait_for_a_click_or_the_switch(browser, tmp_path, listener):
    text = f"# Pictures\n\n![pixel](http://127.0.0.1:{listener.port}/pixel.png)\n"
    bench = harness.make_bench(tmp_path / "notes", text=text, require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        holder = page.frame_locator("#preview-frame").locator(".remote-image-blocked")
        holder.wait_for()
        page.wait_for_timeout(500)
        assert listener.hits == [], "looking at the document told its author"
        holder.click()
        deadline = time.monotonic() + 5
        while not listener.hits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.hits and b"GET /pixel.png" in listener.hits[0]
        # the switch (View → Load remote images) loads every remote image without asking
        listener.hits.clear()
        bench.call(_set_ui(bench, {"allowRemoteImages": True}))
        page.wait_for_function("() => window.deskbridge.ui.allowRemoteImages === true")
        bench.service.workspace  # noqa: B018 - the document did not change; the preview is rebuilt
        deadline = time.monotonic() + 5
        while not listener.hits and time.monotonic() < deadline:
            time.sleep(0.05)
        assert listener.hits, "allowed remote images did not load"
        page.context.close()


def test_after_an_ai_save_as_the_editor_follows_the_new_file(browser, tmp_path):
    """Issue 10 data loss 3: the title and file list show the new file at once, and the person's Ctrl+S writes
    the new file (the old one keeps what it had)."""
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        before = (bench.root / "notes.md").read_text("utf-8")
        result = bench.call(bench.app.invoke("md_save_current_document_as", {"path": "renamed.md"}, _ai()))
        assert result["path"] == "renamed.md"
        page.wait_for_function(
            "() => document.querySelector('#doc-name').textContent === 'renamed.md'", timeout=3000
        )
        page.wait_for_selector(
            "#files-list .file-item.active:has-text('renamed.md')", state="attached", timeout=3000
        )
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type("\nAfter the rename.")
        page.keyboard.press("Control+s")
        page.wait_for_function("() => !document.querySelector('#dirty-dot.on')", timeout=5000)
        assert (bench.root / "renamed.md").read_text("utf-8").endswith("After the rename.")
        assert (bench.root / "notes.md").read_text("utf-8") == before
        page.context.close()
    assert errors == []


async def _set_ui(bench, changes):
    return bench.ui_state.update(changes, source="ui")


def _ai():
    from deskbridge.core.tools import CallContext

    return CallContext(caller=harness.AI_CALLER, client_name="pytest-agent")


def _command(bench, command):
    return bench.app.invoke("md_ui_apply_editor_command", {"command": command}, _ai())


@pytest.mark.security
def test_an_ais_editor_commands_ask_like_edits_and_its_undo_never_reaches_the_persons_typing(
    browser, tmp_path
):
    """Issue 8: selectAll + codeFence used to rewrite the document unasked, and undo ×3 to discard the person's
    typing. Now the fence is an AI edit with its diff (rejected here), and the AI's undo/redo take AI changes only."""
    bench = harness.make_bench(tmp_path / "notes")
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type("\nmine", delay=20)
        page.wait_for_function("() => window.deskbridge.sync.pending() === 0")
        assert bench.call(_command(bench, "selectAll"))["sent"] is True
        fence = bench.submit(_command(bench, "codeFence"))
        page.wait_for_selector("#approval-dialog")
        assert "+```" in page.inner_text(
            "#approval-diff"
        ) and "md_ui_apply_editor_command" in page.inner_text("#approval-dialog")
        page.wait_for_timeout(600)
        page.click("#approval-reject")
        with pytest.raises(Exception, match="APPROVAL_DECLINED"):
            fence.result(10)
        assert "```" not in editor_text(page) and editor_text(page).endswith("\nmine")

        bench.set_require_approval(False)
        bench.call(bench.ai_edit("Deskbridge lets", "Deskbridge helps"))
        page.wait_for_function(
            "() => window.deskbridge.view.state.doc.toString().includes('Deskbridge helps')"
        )
        page.click(".cm-content")
        page.keyboard.press("Control+End")
        page.keyboard.type(" and more of mine", delay=20)
        page.wait_for_function("() => window.deskbridge.sync.pending() === 0")
        undone = bench.call(_command(bench, "undo"))
        assert undone["changed"] is True
        page.wait_for_function(
            "() => window.deskbridge.view.state.doc.toString().includes('Deskbridge lets')"
        )
        for _ in range(3):  # nothing of the AI's is left to undo: the person's typing stays
            assert bench.call(_command(bench, "undo"))["changed"] is False
        assert editor_text(page).endswith("\nmine and more of mine")
        assert bench.call(_command(bench, "redo"))["changed"] is True
        page.wait_for_function(
            "() => window.deskbridge.view.state.doc.toString().includes('Deskbridge helps')"
        )
        assert editor_text(page).endswith("\nmine and more of mine")
        audit = [r.to_dict() for r in bench.audit.recent() if r.tool == "md_ui_apply_editor_command"]
        assert len(audit) >= 7
        page.context.close()
    assert errors == []


def test_bold_twice_is_off_and_a_table_goes_beside_the_selection(browser, tmp_path):
    bench = harness.make_bench(tmp_path / "notes", text="# T\n\nword here\n", require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        page.evaluate(
            "() => { const v = window.deskbridge.view; const at = v.state.doc.toString().indexOf('word');"
            " v.dispatch({selection: {anchor: at, head: at + 4}}); v.focus(); }"
        )
        page.click("button.tool[data-command=bold]")
        assert "**word** here" in editor_text(page)
        page.click("button.tool[data-command=bold]")
        assert editor_text(page) == "# T\n\nword here\n"
        page.click("button.tool[data-command=italic]")
        page.click("button.tool[data-command=italic]")
        assert editor_text(page) == "# T\n\nword here\n"
        page.click("button.tool[data-command=table]")
        text = editor_text(page)
        assert text.startswith("# T\n\nword here\n\n| Column | Column |"), text  # the selection stays
        page.context.close()
    assert errors == []


@pytest.mark.security
def test_an_image_of_deskbridges_own_event_stream_cannot_hold_the_persons_saves(browser, tmp_path):
    """A document someone sent points its images at deskbridge's event stream as a phantom editor; once the
    person loads remote images, that image registered an editor that never answers, and every save then failed
    (UI_NOT_READY). Only the editor's EventSource may open the stream."""
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        hostile = (
            f"# Sent to me\n\n![a](http://127.0.0.1:{bench.srv.port}/api/events?editor=phantom)\n\n"
            f'<img src="http://localhost:{bench.srv.port}/api/events?editor=phantom2">\n'
        )
        (bench.root / "sent.md").write_text(hostile, encoding="utf-8")
        page = _open(browser, bench, errors)
        client_id = page.evaluate("window.deskbridge.clientId")
        page.evaluate("window.deskbridge.openFile('sent.md')")
        page.wait_for_function("() => window.deskbridge.preview?.textContent.includes('Sent to me')")
        bench.call(_set_ui(bench, {"allowRemoteImages": True}))  # View → Load remote images
        page.wait_for_function("() => window.deskbridge.ui.allowRemoteImages === true")
        page.wait_for_function(
            "() => window.deskbridge.preview?.querySelectorAll('img').length === 2"
            " && !window.deskbridge.preview.querySelector('.remote-image-blocked')"
        )
        page.wait_for_timeout(1000)  # time for the images' requests to reach the server
        assert bench.service.drafts.clients() == [client_id]
        page.click(".cm-line >> nth=0", position={"x": 5, "y": 5})
        page.keyboard.type("Read. ")
        page.keyboard.press("Control+s")
        page.wait_for_selector("#st-dirty.clean", timeout=10000)
        assert (bench.root / "sent.md").read_text("utf-8").startswith("Read. # Sent to me")
        page.context.close()
    assert errors == []
