"""The Markdown editor's newer features in a real browser (Debian's Chromium through Playwright), served by the
real `deskbridge serve` and logged in through its one-time link: the first-run offer to connect an AI client
(the platform's own code, web/static/connect.js)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

# The served editor and the harness (one set-up for the markdown browser tests); `browser` is conftest.py's.
from markdown_browser_test import _open, editor, harness  # noqa: F401

pytestmark = pytest.mark.browser


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The person's home, where AI clients keep their configs (set before the server starts)."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))  # the trash (freedesktop.org)
    return home


def test_the_editor_offers_once_to_connect_an_ai_client(home, editor, browser):  # noqa: F811
    bench, page = editor
    page.wait_for_selector("#onboarding-banner", state="visible")
    assert page.evaluate("document.activeElement.id") != "onboarding-open"  # it never takes the keyboard
    page.click("#onboarding-open")
    page.wait_for_selector("#panel-onboarding .onbhost")
    hosts = page.eval_on_selector_all("#panel-onboarding .onbhost", "boxes => boxes.map(b => b.value)")
    assert {"claude-code", "cursor", "vscode", "codex", "claude-desktop"} <= set(hosts)
    page.click("#panel-onboarding #onbgo")  # nothing chosen: says so, writes nothing
    page.wait_for_function("() => document.querySelector('#onbmsg').textContent.length > 0")
    assert not (home / ".cursor" / "mcp.json").exists()
    page.check("#panel-onboarding .onbhost[value=cursor]")
    page.uncheck("#panel-onboarding #onbskill")
    page.click("#panel-onboarding #onbgo")
    page.wait_for_function("() => document.querySelector('#onbmsg').textContent.includes('cursor:')")
    config = json.loads((home / ".cursor" / "mcp.json").read_text("utf-8"))
    assert "deskbridge" in config["mcpServers"]
    assert page.query_selector("#onboarding-banner") is None
    assert any(r.tool == "deskbridge_setup" and r.caller == "ui" for r in bench.audit.recent())
    again = _open(browser, bench, [])  # a later visit: set up, so no offer
    again.wait_for_function("() => document.body.dataset.onboarding === 'none'")
    assert again.query_selector("#onboarding-banner") is None
    again.context.close()


def test_not_now_is_remembered_by_the_editor(home, editor, browser):  # noqa: F811
    bench, page = editor
    page.click("#onboarding-open")
    page.click("#panel-onboarding #onbnot")
    page.wait_for_selector("#panel-onboarding", state="detached")
    assert page.query_selector("#onboarding-banner") is None
    again = _open(browser, bench, [])
    again.wait_for_function("() => document.body.dataset.onboarding === 'none'")
    assert again.query_selector("#onboarding-banner") is None
    again.context.close()


def test_the_platform_page_shows_the_same_offer(home, browser, tmp_path):
    from deskbridge.testing import ServerThread

    (tmp_path / "files").mkdir()
    with ServerThread(tmp_path / "files", kind="probe") as thread:
        context = browser.new_context()
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(thread.srv.login_url())
        page.wait_for_selector("#onboarding .onbhost[value=codex]")
        page.check("#onboarding .onbhost[value=codex]")
        page.uncheck("#onbskill")
        page.click("#onbgo")
        page.wait_for_function("() => document.querySelector('#onbmsg').textContent.includes('codex:')")
        assert "[mcp_servers.deskbridge]" in (home / ".codex" / "config.toml").read_text("utf-8")
        context.close()
    assert errors == []


def test_spell_check_is_on_for_prose_and_off_in_code(editor):  # noqa: F811
    _bench, page = editor
    assert page.get_attribute(".cm-content", "spellcheck") == "true"
    page.evaluate(
        "() => { const v = window.deskbridge.view; v.dispatch({changes: {from: 0, insert: "
        "'```python\\ndef teh_function(): pass\\n```\\n\\nSome prose.\\n'}}); }"
    )
    page.wait_for_function(
        "() => [...document.querySelectorAll('.cm-line')].some(l => l.textContent.includes('teh_function')"
        " && l.getAttribute('spellcheck') === 'false')"
    )
    prose = page.evaluate(
        "() => [...document.querySelectorAll('.cm-line')].find(l => l.textContent === 'Some prose.')"
        ".getAttribute('spellcheck')"
    )
    assert prose is None  # inherits the content's spellcheck="true"


def test_keyboard_shortcuts_are_listed_in_a_help_panel(editor):  # noqa: F811
    _bench, page = editor
    page.click("#menu-help .menu-button")
    page.click("#menu-help [data-action=shortcuts]")
    page.wait_for_selector("#panel-shortcuts #shortcuts-table")
    rows = dict(
        page.eval_on_selector_all(
            "#shortcuts-table tr",
            "rows => rows.map(r => [r.querySelector('th').textContent, r.querySelector('td').textContent])",
        )
    )
    assert rows["Bold"] == "Ctrl+B" and rows["Italic"] == "Ctrl+I" and rows["Link"] == "Ctrl+K"
    assert rows["Heading 1"] == "Ctrl+1" and rows["Save"] == "Ctrl+S"
    assert rows["Approve an AI request"] == "Ctrl+Shift+Enter"
    page.keyboard.press("Escape")
    page.wait_for_selector("#panel-shortcuts", state="detached")
    page.click(".cm-content")
    page.keyboard.press("F1")  # also from the keyboard
    page.wait_for_selector("#panel-shortcuts")


def test_code_in_the_preview_is_highlighted(editor):  # noqa: F811
    _bench, page = editor
    page.evaluate(
        "() => { const v = window.deskbridge.view; v.dispatch({changes: {from: v.state.doc.length, insert: "
        "'\\n\\n```python\\ndef greet(name):\\n    return \"hi \" + name  # say hi\\n```\\n'}}); }"
    )
    frame = page.frame_locator("#preview-frame")
    keyword = frame.locator("pre code.language-python .hl-k").first
    keyword.wait_for()
    assert keyword.text_content() == "def"
    colours = frame.locator("pre code.language-python").evaluate(
        "code => ['hl-k', 'hl-s2', 'hl-c1'].map(c => getComputedStyle(code.querySelector('.' + c)).color)"
    )
    plain = frame.locator("pre code.language-python").evaluate("code => getComputedStyle(code).color")
    assert len(set(colours)) == 3 and plain not in colours, (colours, plain)


PNG_B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="

FIRE = """([kind, b64]) => {
  const bytes = Uint8Array.from(atob(b64), c => c.charCodeAt(0));
  const data = new DataTransfer();
  data.items.add(new File([bytes], 'shot.png', {type: 'image/png'}));
  const content = document.querySelector('.cm-content');
  if (kind === 'paste') {
    content.dispatchEvent(new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true}));
  } else {
    const line = [...document.querySelectorAll('.cm-line')][0].getBoundingClientRect();
    content.dispatchEvent(new DragEvent('drop', {dataTransfer: data, clientX: line.left + 2,
      clientY: line.top + 2, bubbles: true, cancelable: true}));
  }
}"""


def test_a_pasted_or_dropped_image_is_saved_beside_the_document_and_linked(editor):  # noqa: F811
    bench, page = editor
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.evaluate(FIRE, ["paste", PNG_B64])
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('![shot](shot.png)')")
    assert (bench.root / "shot.png").is_file()
    page.evaluate(FIRE, ["drop", PNG_B64])
    page.wait_for_function(
        "() => window.deskbridge.view.state.doc.toString().startsWith('![shot](shot-2.png)')"
    )
    assert (bench.root / "shot-2.png").is_file()
    frame = page.frame_locator("#preview-frame")
    frame.locator("img[alt=shot]").first.wait_for()  # the relative link shows in the preview


def test_new_close_rename_and_delete_from_the_editor(home, editor):  # noqa: F811
    bench, page = editor
    page.once("dialog", lambda dialog: dialog.accept("journal"))
    page.click("#file-new")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent.includes('journal.md')")
    assert (bench.root / "journal.md").read_text("utf-8") == "# journal\n"
    page.click("#menu-file .menu-button")
    page.click("#menu-file [data-action=close]")
    page.wait_for_function("() => !document.querySelector('#doc-name').textContent.includes('journal.md')")
    row = "#files-list .file-row[data-path='journal.md']"
    page.click("#tab-files")
    page.wait_for_selector(row)
    page.once("dialog", lambda dialog: dialog.accept("diary.md"))
    page.hover(row)
    page.click(f"{row} .file-rename")
    page.wait_for_selector("#files-list .file-row[data-path='diary.md']")
    assert not (bench.root / "journal.md").exists()
    page.once("dialog", lambda dialog: dialog.accept())  # "Move diary.md to the trash?"
    page.hover("#files-list .file-row[data-path='diary.md']")
    page.click("#files-list .file-row[data-path='diary.md'] .file-delete")
    page.wait_for_selector("#files-list .file-row[data-path='diary.md']", state="detached")
    assert not (bench.root / "diary.md").exists()
    assert (home / ".local" / "share" / "Trash" / "files" / "diary.md").is_file()


def test_closing_an_unsaved_document_leaves_no_stale_status(editor):  # noqa: F811
    """After File → Close (discarding the unsaved typing), the title, the status bar and the file list said the
    closed document was still there: "Unsaved changes", its line and word counts, its row highlighted."""
    bench, page = editor
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.type("typed and never saved\n")
    page.wait_for_function("() => document.querySelector('#st-dirty').classList.contains('dirty')")
    page.once(
        "dialog", lambda dialog: dialog.accept()
    )  # "The document has unsaved changes. Close it and lose them?"
    page.click("#menu-file .menu-button")
    page.click("#menu-file [data-action=close]")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === ''")
    state = page.evaluate(
        """() => ({
        dirty: document.querySelector('#st-dirty').className,
        dot: document.querySelector('#dirty-dot').classList.contains('on'),
        lines: document.querySelector('#st-lines').textContent,
        title: document.title,
        active: [...document.querySelectorAll('#files-list .file-item.active')].length,
      })"""
    )
    assert state == {
        "dirty": "clean",
        "dot": False,
        "lines": "1 lines",
        "title": "deskbridge",
        "active": 0,
    }, state
    assert "typed and never saved" not in (bench.root / "notes.md").read_text("utf-8")


def test_recent_files_reopen_a_document(editor):  # noqa: F811
    _bench, page = editor
    page.click("#tab-files")
    page.click("#files-list .file-item >> text=ideas.md")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'ideas.md'")
    page.click("#files-list .file-item >> text=notes.md")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'notes.md'")
    page.click("#menu-file .menu-button")
    page.click("#menu-file [data-action=recent]")
    page.wait_for_selector("#recent-list .file-item")
    names = page.eval_on_selector_all("#recent-list .file-name", "els => els.map(e => e.textContent)")
    assert names[:2] == ["notes.md", "ideas.md"]
    page.click("#recent-list .file-item >> text=ideas.md")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'ideas.md'")


def test_the_file_list_is_a_folder_tree_that_folds(editor):  # noqa: F811
    bench, page = editor
    (bench.root / "guides").mkdir()
    (bench.root / "guides" / "setup.md").write_text("# Setup\n", "utf-8")
    page.reload()
    page.wait_for_function("() => document.body.dataset.ready === '1'")
    page.click("#tab-files")
    folder = "#files-list .folder-row[data-folder=guides]"
    file_row = "#files-list .file-row[data-path='guides/setup.md']"
    page.wait_for_selector(file_row)
    assert page.get_attribute(folder, "aria-expanded") == "true"
    page.click(folder)
    page.wait_for_selector(file_row, state="detached")
    assert page.is_visible("#files-list .file-row[data-path='notes.md']")  # top-level files stay
    page.click(folder)
    page.click(f"{file_row} .file-item")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'setup.md'")


def test_save_as_writes_another_file_and_replaces_one_only_when_confirmed(editor):  # noqa: F811
    """File → Save as… writes the open document's text (unsaved typing included) into another file of the
    folder, which the editor then shows; a file that exists is replaced only after the person confirms, and
    declining leaves it as it was."""
    bench, page = editor
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.type("typed before save as\n")
    page.once("dialog", lambda dialog: dialog.accept("second"))
    page.click("#menu-file .menu-button")
    page.click("#menu-file [data-action=save-as]")
    second = bench.root / "second.md"
    page.wait_for_function("() => document.querySelector('#doc-name').textContent.includes('second.md')")
    assert "typed before save as" in second.read_text("utf-8")
    assert "typed before save as" not in (bench.root / "notes.md").read_text("utf-8")
    (bench.root / "keep.md").write_text("# keep me\n", "utf-8")
    answers = iter(["keep.md", None])  # the path, then "keep.md exists. Replace it?" declined

    def decline(dialog) -> None:
        answer = next(answers)
        dialog.accept(answer) if answer is not None else dialog.dismiss()

    page.on("dialog", decline)
    page.keyboard.press("Control+Shift+S")
    page.wait_for_timeout(500)
    assert (bench.root / "keep.md").read_text("utf-8") == "# keep me\n"
    page.remove_listener("dialog", decline)
    answers = iter(["keep.md", ""])  # the path, then the replacement confirmed
    page.on("dialog", lambda dialog: dialog.accept(next(answers)))
    page.keyboard.press("Control+Shift+S")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent.includes('keep.md')")
    assert "typed before save as" in (bench.root / "keep.md").read_text("utf-8")
