"""The Markdown editor in a real browser (Debian's Chromium through Playwright), as a person uses it while an AI
edits the same document: type and see the preview, watch AI edits arrive without losing a keystroke, approve and
reject AI changes, switch theme/typography/language/layout, export. The editor is served by the real
`deskbridge serve` (see tests/kinds/markdown/ui/harness.py), opened through its launch URL like a person's browser.

Needs /usr/bin/chromium (`apt-get install -y chromium`) and the `playwright` Python package (never
`playwright install`: the system Chromium is used). Skipped with a message when either is missing.
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve()
SHOTS = Path(os.environ.get("DESKBRIDGE_SCREENSHOTS", HERE.parents[2] / ".cache" / "screenshots"))

pytestmark = pytest.mark.browser

# Chromium and Playwright: the shared `browser` / `new_page` fixtures of tests/e2e/conftest.py (skipped
# with a message when either is missing).


def _load_harness():
    # The harness lives with the route tests (tests/kinds/markdown/ui); load it by path, as tests are not a package.
    path = HERE.parents[1] / "kinds" / "markdown" / "ui" / "harness.py"
    spec = importlib.util.spec_from_file_location("markdown_ui_harness", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()


def _open(browser, bench, errors):
    context = browser.new_context(viewport={"width": 1400, "height": 860}, accept_downloads=True)
    page = context.new_page()
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.goto(bench.launch_url)
    page.wait_for_function("() => (document.body.dataset.ready === '1' && window.deskbridge.view)")
    page.wait_for_function("() => (window.deskbridge.preview?.querySelector('h1, h2'))")
    return page


@pytest.fixture
def editor(browser, tmp_path):
    """(bench, page) with the sample notes open; approvals off unless a test turns them on."""
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        yield bench, page
        page.context.close()
    assert errors == [], f"the page raised: {errors}"


def editor_text(page) -> str:
    return page.evaluate("window.deskbridge.view.state.doc.toString()")


def server_text(bench) -> str:
    return bench.service.read()["text"]


def wait_synced(page, bench, timeout=5000):
    page.wait_for_function(
        "() => (window.deskbridge.sync && window.deskbridge.sync.pending() === 0)", timeout=timeout
    )
    deadline = time.monotonic() + timeout / 1000
    while editor_text(page) != server_text(bench):
        assert time.monotonic() < deadline, "editor and server did not converge"
        time.sleep(0.05)


def shot(page, name: str) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    return path


def type_at_end(page, text: str, delay: float = 0) -> None:
    page.click(".cm-content")
    page.keyboard.press("Control+End")
    page.keyboard.type(text, delay=delay)


# --------------------------------------------------------------------------------------------------------- tests


def test_typing_shows_in_the_server_rendered_preview_with_math(editor):
    bench, page = editor
    page.frame_locator("#preview-frame").locator(
        ".katex"
    ).first.wait_for()  # KaTeX typeset the server's math markup
    type_at_end(page, "\n## Typed by a person\n\nWith *emphasis*.")
    page.wait_for_function(
        "() => ([...window.deskbridge.preview.querySelectorAll('h2')].some(h => h.textContent === 'Typed by a person'))"
    )
    wait_synced(page, bench)
    assert server_text(bench).endswith("## Typed by a person\n\nWith *emphasis*.")
    lines = server_text(bench).count("\n") + 1
    page.wait_for_function(f"() => document.querySelector('#st-lines').textContent === '{lines} lines'")
    assert page.is_visible("#dirty-dot.on")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#outline-list .outline-item')]"
        ".map(e => e.textContent).join('|') === 'Field notes|Math|Tasks|Typed by a person'"
    )
    shot(page, "editor-light")


def test_an_ai_edit_arrives_within_a_second_while_the_person_keeps_typing(editor):
    bench, page = editor
    typed = "the quick brown fox jumps over the lazy dog 0123456789"

    async def ai_later():
        import asyncio

        await asyncio.sleep(0.3)
        await bench.ai_edit("Field notes", "Field notes, edited by AI")

    future = bench.submit(ai_later())
    type_at_end(page, "\n" + typed, delay=25)  # ~1.4 s of typing, the AI edit lands in the middle
    future.result(10)
    page.wait_for_function(
        "() => window.deskbridge.view.state.doc.toString().includes('edited by AI')", timeout=1000
    )
    page.wait_for_function(
        "() => window.deskbridge.preview?.querySelector('h1').textContent.includes('edited by AI')",
        timeout=1000,
    )
    wait_synced(page, bench)
    text = server_text(bench)
    assert text.startswith("# Field notes, edited by AI\n")
    assert text.endswith("\n" + typed)  # not one keystroke lost
    assert editor_text(page) == text


def test_several_ai_edits_and_typing_interleave_without_losing_anything(editor):
    bench, page = editor
    edits = [
        ("Euler:", "Euler's identity:"),
        ("write the editor", "write the editor (done)"),
        ("| dusk | calm |", "| dusk | serene |"),
        ("## Tasks", "## Tasks for today"),
    ]

    async def ai_edits():
        import asyncio

        for old, new in edits:
            await asyncio.sleep(0.15)
            await bench.ai_edit(old, new)

    typed = "".join(f"line {n} typed while the AI works\n" for n in range(3))
    future = bench.submit(ai_edits())
    page.click(".cm-content")
    page.keyboard.press("Control+Home")
    page.keyboard.press("End")  # typing in the first line, above every AI edit: offsets shift under the AI
    page.keyboard.type("\n" + typed, delay=15)
    future.result(20)
    wait_synced(page, bench)
    text = server_text(bench)
    assert editor_text(page) == text
    assert text.startswith("# Field notes\n" + typed)
    for _, new in edits:
        assert new in text


def test_an_ai_edit_is_highlighted_and_is_one_undo_step(editor):
    bench, page = editor
    page.click(".cm-content")
    bench.call(bench.ai_edit("the same", "one shared"))
    page.wait_for_selector(".cm-ai-edit")
    shot(page, "ai-edit-highlight")
    assert "one shared" in editor_text(page)
    page.wait_for_selector(".cm-ai-edit", state="detached", timeout=5000)  # the highlight fades away
    page.keyboard.press("Control+z")
    page.wait_for_function("() => (!window.deskbridge.view.state.doc.toString().includes('one shared'))")
    wait_synced(page, bench)
    assert "**the same** document" in server_text(bench)


def test_an_approved_ai_edit_shows_its_diff_first(editor):
    bench, page = editor
    bench.set_require_approval(True)
    future = bench.submit(bench.ai_edit("Deskbridge lets", "Deskbridge helps"))
    page.wait_for_selector("#approval-dialog")
    assert page.inner_text("#approval-diff .diff-line.del").startswith("-Deskbridge lets")
    assert page.inner_text("#approval-diff .diff-line.add").startswith("+Deskbridge helps")
    assert "md_apply_text_edit" in page.inner_text("#approval-dialog")
    assert "Deskbridge helps" not in editor_text(page)  # nothing changes before the answer
    shot(page, "approval-dialog")
    page.wait_for_timeout(600)  # answers count from 500 ms after the dialog appears
    page.click("#approval-approve")
    future.result(10)
    page.wait_for_function(
        "() => (window.deskbridge.view.state.doc.toString().includes('Deskbridge helps'))", timeout=2000
    )
    assert page.query_selector("#approval-dialog") is None


def test_a_rejected_ai_edit_changes_nothing(editor):
    bench, page = editor
    bench.set_require_approval(True)
    future = bench.submit(bench.ai_edit("Deskbridge lets", "Something else"))
    page.wait_for_selector("#approval-dialog")
    page.wait_for_timeout(600)
    page.click("#approval-reject")
    with pytest.raises(Exception, match="APPROVAL_DECLINED"):
        future.result(10)
    assert "Something else" not in server_text(bench)
    assert "Something else" not in editor_text(page)
    page.click("#menu-help .menu-button")
    page.click("#menu-help [data-action=audit]")
    page.wait_for_selector("#audit-body table")
    assert "md_apply_text_edit" in page.inner_text("#audit-body")
    assert "APPROVAL_DECLINED" in page.inner_text("#audit-body")
    shot(page, "audit-log")


def test_turning_approvals_off_shows_a_warning(editor):
    bench, page = editor
    bench.set_require_approval(True)
    page.wait_for_selector("#approvals-off-banner", state="hidden")
    page.click("#mcp-button")
    page.wait_for_selector("#panel-mcpSettings")
    assert page.input_value("#mcp-token") == ""  # never fetched silently: the person asks and confirms
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#mcp-token-show")
    page.wait_for_function(f"() => document.querySelector('#mcp-token').value === '{bench.token}'")
    # The port really served (the bench listens on a free one), not the `port` setting's 17891: a client
    # given this URL can connect; the setting's pending change is flagged as waiting for a restart.
    assert page.inner_text("#mcp-endpoint") == f"http://127.0.0.1:{bench.srv.port}/mcp"
    assert bench.srv.port != 17891 and page.is_visible("#mcp-port-note")
    assert page.inner_text("#mcp-live") == "running"
    assert page.is_checked("[data-rule=edit]") and not page.is_checked(
        "[data-rule=save]"
    )  # the kind's defaults
    page.check("[data-rule=save]")
    page.uncheck("#mcp-require-approval")
    page.click("#mcp-save")
    page.wait_for_selector("#approvals-off-banner", state="visible")
    assert bench.settings["require_approval"] is False
    assert bench.settings["approval_rules"] == {"save": True}  # only what differs from the defaults
    assert not bench.service.approvals.needed("edit")
    assert "OFF" in page.inner_text("#st-approvals")


def test_theme_typography_language_and_layout_switch_live(editor):
    bench, page = editor
    page.select_option("#theme-select", "night-sky")
    page.wait_for_function("() => (document.documentElement.dataset.theme === 'night-sky')")
    page.select_option("#typography-select", "OrangeHeart")
    page.wait_for_function("() => (window.deskbridge.preview.dataset.typo === 'OrangeHeart')")
    deadline = time.monotonic() + 5
    while bench.ui_state.snapshot()["typography"] != "OrangeHeart":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert bench.ui_state.snapshot()["theme"] == "night-sky"
    shot(page, "night-sky-orangeheart")
    # an AI switches language and layout through the md_ui_* tools (they change UiState, which publishes)
    bench.ui_state.set_language("ja-JP", source="mcp:pytest")
    page.wait_for_function(
        "() => (document.querySelector('#menu-file .menu-button').textContent === 'ファイル')"
    )
    assert page.inner_text("#tab-outline") == "アウトライン"
    bench.ui_state.set_language("zh-CN", source="mcp:pytest")
    page.wait_for_function("() => (document.querySelector('#menu-file .menu-button').textContent === '文件')")
    bench.ui_state.set_layout({"previewVisible": False, "lineNumbersVisible": False}, source="mcp:pytest")
    page.wait_for_selector("#preview-pane", state="hidden")
    page.wait_for_selector(".cm-lineNumbers", state="detached")
    bench.ui_state.set_layout({"previewVisible": True, "sidebarVisible": False, "compactLayout": True})
    page.wait_for_selector("#sidebar", state="hidden")
    page.wait_for_function("() => (document.documentElement.dataset.compact === 'true')")
    bench.ui_state.show_sidebar_tab("files")
    page.wait_for_selector("#files-list", state="visible")
    assert "ideas.md" in page.inner_text("#files-list")
    bench.ui_state.set_theme("dusk")
    bench.ui_state.set_typography("TechnologyBlue")
    page.wait_for_function("() => (document.documentElement.dataset.theme === 'dusk')")
    shot(page, "dusk-zh-compact")


def test_a_tool_command_formats_the_persons_selection(editor):
    bench, page = editor
    view_select = """(() => { const v = window.deskbridge.view; const t = v.state.doc.toString();
        const at = t.indexOf('enjoy it'); v.dispatch({selection: {anchor: at, head: at + 8}}); })()"""
    page.evaluate(view_select)
    bench.ui_state.apply_editor_command("bold", source="mcp:pytest")
    page.wait_for_function("() => (window.deskbridge.view.state.doc.toString().includes('**enjoy it**'))")
    bench.ui_state.open_panel("wordCount")
    page.wait_for_selector("#panel-wordCount")
    wait_synced(page, bench)
    assert "- [ ] **enjoy it**" in server_text(bench)


@pytest.mark.parametrize(
    ("action", "name", "magic"),
    [
        ("export-html", "notes.html", b"<!DOCTYPE html"),
        ("export-docx", "notes.docx", b"PK"),
        ("export-pdf", "notes.pdf", b"%PDF"),
        ("export-png", "notes.png", b"\x89PNG"),
    ],
)
def test_export_downloads_the_file_in_the_browser(editor, action, name, magic):
    _bench, page = editor
    page.click("#menu-export .menu-button")
    with page.expect_download(timeout=90_000) as info:
        page.click(f"#menu-export [data-action={action}]")
    download = info.value
    assert download.suggested_filename == name
    assert Path(download.path()).read_bytes()[: len(magic)].upper() == magic.upper()


def _png(width: int = 3, height: int = 2) -> bytes:
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\xff\x80\x00" * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows))
        + chunk(b"IEND", b"")
    )


def test_a_local_image_shows_in_the_preview(editor):
    bench, page = editor
    (bench.root / "img").mkdir()
    (bench.root / "img" / "dot.png").write_bytes(_png())
    type_at_end(page, "\n![a dot](img/dot.png)\n")
    page.wait_for_function(
        "() => { const i = window.deskbridge.preview.querySelector('img[alt=\"a dot\"]');"
        " return i && i.complete && i.naturalWidth === 3; }"
    )


def test_an_external_change_offers_reload(editor, tmp_path):
    bench, page = editor
    (tmp_path / "notes" / "notes.md").write_text("# Rewritten on disk\n", encoding="utf-8")
    bench.call(_check_external(bench))
    page.wait_for_selector("#external-banner", state="visible")
    page.click("#external-reload")
    page.wait_for_function("() => (window.deskbridge.view.state.doc.toString() === '# Rewritten on disk\\n')")
    page.wait_for_selector("#external-banner", state="hidden")
    # the person's choice ran as a tool through App.invoke: audited once, as caller ui
    records = [r for r in bench.audit.recent() if r.tool == "md_resolve_external_change"]
    assert [(r.caller, r.target, r.outcome) for r in records] == [("ui", "notes.md", "ok")]


async def _check_external(bench):
    return bench.service.check_external_changes()


def test_find_and_replace_uses_the_codemirror_panel(editor):
    bench, page = editor
    bench.ui_state.open_panel("replace", source="mcp:pytest")
    page.wait_for_selector(".cm-search input[name=search]")
    page.fill(".cm-search input[name=search]", "calm")
    page.fill(".cm-search input[name=replace]", "serene")
    page.click(".cm-search button[name=replaceAll]")
    wait_synced(page, bench)
    assert "| dusk | serene |" in server_text(bench)


def test_ctrl_s_saves_what_the_person_sees(editor):
    bench, page = editor
    type_at_end(page, "\nSaved by the person.")
    page.keyboard.press("Control+s")
    page.wait_for_selector("#st-dirty.clean")
    assert (bench.root / "notes.md").read_text("utf-8").endswith("\nSaved by the person.")
    assert page.title() == "notes.md — deskbridge"


@pytest.mark.parametrize("bom", [b"", b"\xef\xbb\xbf"])
def test_a_crlf_file_keeps_its_line_endings_and_bom_through_typing_an_ai_edit_and_ctrl_s(
    browser, tmp_path, bom
):
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    original = bom + harness.SAMPLE.replace("\n", "\r\n").encode("utf-8")
    (bench.root / "notes.md").write_bytes(original)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        assert "\r" not in editor_text(page)  # the editor works on \n, like CodeMirror
        type_at_end(page, "\nTyped line one.\nTyped line two.")
        bench.call(bench.ai_edit("Field notes", "Field notes (AI)"))
        page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('(AI)')")
        wait_synced(page, bench)
        page.keyboard.press("Control+s")
        page.wait_for_selector("#st-dirty.clean")
        page.context.close()
    data = (bench.root / "notes.md").read_bytes()
    assert data.startswith(bom + b"# Field notes (AI)\r\n"), data[:40]
    body = data[len(bom) :]
    assert not body.startswith(b"\xef\xbb\xbf")
    assert body.count(b"\n") == body.count(b"\r\n") > original.count(b"\n")  # every line break is CRLF
    assert body.endswith(b"\r\nTyped line one.\r\nTyped line two.")
    assert errors == [], f"the page raised: {errors}"


def test_a_file_renamed_away_while_open_is_said_so_and_keep_mine_writes_it_back(editor):
    bench, page = editor
    type_at_end(page, "\nfrom tab one")
    wait_synced(page, bench)
    (bench.root / "notes.md").rename(bench.root / "moved.md")
    page.keyboard.press("Control+s")
    page.wait_for_selector("#external-banner:not([hidden])")
    page.wait_for_function("() => document.body.innerText.includes('renamed or deleted')")
    # The banner says the file is gone (not "changed"), and offers no Reload: there is nothing to read.
    page.wait_for_function(
        "() => document.querySelector('#external-text').textContent.includes('gone from disk')"
    )
    assert page.locator("#external-reload").is_hidden()
    assert not (bench.root / "notes.md").exists()
    page.click("#external-keep")
    page.wait_for_selector("#external-banner", state="hidden")
    page.keyboard.press("Control+s")
    page.wait_for_selector("#st-dirty.clean")
    assert (bench.root / "notes.md").read_text("utf-8").endswith("\nfrom tab one")


def test_the_editor_follows_when_an_ai_opens_another_document(editor):
    bench, page = editor
    from deskbridge.core.tools import CallContext

    bench.call(
        bench.service.open("ideas.md", ctx=CallContext(caller="mcp:pytest", client_name="pytest-agent"))
    )
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'ideas.md'")
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().startsWith('# Ideas')")
    page.wait_for_function("() => window.deskbridge.preview?.querySelector('h1').textContent === 'Ideas'")
    page.click("#tab-files")
    page.click("#files-list .file-item >> text=notes.md")
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'notes.md'")


def test_undo_takes_back_the_persons_typing_and_the_ai_edit_one_step_each(editor):
    bench, page = editor
    type_at_end(page, "\nmine before")
    page.wait_for_timeout(600)  # a pause ends the person's undo group, as it would between two sentences
    bench.call(bench.ai_edit("Field notes", "Field notes by AI"))
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('by AI')")
    page.keyboard.type(" and after")
    text = lambda: editor_text(page)  # noqa: E731
    page.keyboard.press("Control+z")
    page.wait_for_function("() => !window.deskbridge.view.state.doc.toString().includes(' and after')")
    assert "by AI" in text() and "mine before" in text()
    page.keyboard.press("Control+z")
    page.wait_for_function("() => !window.deskbridge.view.state.doc.toString().includes('by AI')")
    assert "mine before" in text()
    page.keyboard.press("Control+z")
    page.wait_for_function("() => !window.deskbridge.view.state.doc.toString().includes('mine before')")
    page.keyboard.press("Control+Shift+z")  # redo brings the person's line back
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('mine before')")
    wait_synced(page, bench)
    assert server_text(bench) == text()


def test_closing_the_document_elsewhere_moves_the_editor_on(editor):
    bench, page = editor
    bench.call(bench.service.open("ideas.md"))
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'ideas.md'")
    bench.call(bench.service.close(bench.service.current_id))
    page.wait_for_function("() => document.querySelector('#doc-name').textContent === 'notes.md'")
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().startsWith('# Field notes')")


def test_ticking_a_task_in_the_preview_edits_the_source(editor):
    bench, page = editor
    page.frame_locator("#preview-frame").locator("li:has-text('enjoy it') input[type=checkbox]").click()
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('- [x] enjoy it')")
    wait_synced(page, bench)
    assert "- [x] write the editor\n- [x] enjoy it" in server_text(bench)
    page.frame_locator("#preview-frame").locator("h2:has-text('Tasks')").dblclick()
    head = page.evaluate(
        "(() => { const s = window.deskbridge.view.state; return s.doc.lineAt(s.selection.main.head).text; })()"
    )
    assert head == "## Tasks"


def test_menus_work_from_the_keyboard(editor):
    _bench, page = editor
    page.focus("#menu-view .menu-button")
    page.keyboard.press("Enter")
    page.wait_for_selector("#menu-view.open")
    assert page.evaluate("document.activeElement.dataset.action") == "toggle-sidebar"
    page.keyboard.press("ArrowDown")
    assert page.evaluate("document.activeElement.dataset.action") == "show-outline"
    page.keyboard.press("ArrowUp")
    page.keyboard.press("Enter")  # hide the sidebar
    page.wait_for_selector("#sidebar", state="hidden")


def test_two_tabs_and_an_ai_typing_at_once_converge_without_losses(editor, browser):
    bench, first = editor
    second = _open(browser, bench, [])
    try:

        async def ai_edits():
            import asyncio

            for n in range(3):
                await asyncio.sleep(0.2)
                await bench.ai_edit("## Math", f"## Math {n}")
                await bench.ai_edit(f"## Math {n}", "## Math")

        future = bench.submit(ai_edits())
        first.click(".cm-content")
        first.keyboard.press("Control+Home")
        first.keyboard.press("End")
        second.click(".cm-content")
        second.keyboard.press("Control+End")
        for a, b in zip("ABCDEFGHIJKLMNOP", "abcdefghijklmnop", strict=True):
            first.keyboard.type(a)
            second.keyboard.type(b)
        future.result(20)
        wait_synced(first, bench)
        wait_synced(second, bench)
        text = server_text(bench)
        assert editor_text(first) == text == editor_text(second)
        assert text.startswith("# Field notesABCDEFGHIJKLMNOP\n")
        assert text.endswith("abcdefghijklmnop")
        assert "\n## Math\n" in text
    finally:
        second.context.close()


def test_on_first_run_the_editor_speaks_the_browsers_language(browser, tmp_path):
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    with harness.serving(bench):
        context = browser.new_context(locale="zh-TW")
        page = context.new_page()
        page.goto(bench.launch_url)
        page.wait_for_function(
            "() => document.querySelector('#menu-file .menu-button').textContent === '檔案'"
        )
        assert bench.ui_state.snapshot()["cultureName"] == "zh-Hant"
        context.close()


def big_document(lines: int) -> str:
    """About 86 characters a line like Vex's stress document: headings, prose, lists, code, tables."""
    rng = random.Random(7)
    words = [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "editor",
        "preview",
        "文档",
        "同步",
        "markdown",
        "outline",
        "sample",
        "quick",
        "brown",
        "fox",
    ]
    out: list[str] = []
    section = 0
    while len(out) < lines:
        section += 1
        out += [f"## Section {section}", ""]
        for _ in range(6):
            out.append(" ".join(rng.choice(words) for _ in range(13)) + ".")
        out += [
            "",
            "- item one",
            "- item two",
            "",
            "```python",
            "print('hello')",
            "```",
            "",
            "| a | b |",
            "| --- | --- |",
            "| 1 | 2 |",
            "",
        ]
    return "\n".join(out[:lines]) + "\n"


def test_a_very_large_document_stays_editable(browser, tmp_path):
    text = big_document(40_000)  # ~1.15 M characters: line-based highlighting, windowed preview
    bench = harness.make_bench(tmp_path / "big", text=text, require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        assert page.evaluate("window.deskbridge.previewWindow.total") == 40_001
        type_at_end(page, "typed at the end")
        bench.call(bench.ai_edit("## Section 1\n", "## Section one\n"))
        page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('## Section one')")
        wait_synced(page, bench, timeout=15_000)
        assert server_text(bench).endswith("typed at the end")
        page.wait_for_function(
            "() => document.querySelector('#outline-list .outline-item').textContent === 'Section one'"
        )
        page.context.close()
    assert errors == []


def test_a_save_waits_for_the_keystrokes_still_on_their_way(editor):
    bench, page = editor
    released = []

    def slow_push(route):
        # Hold the person's push back, as a slow network would, until the save has started waiting.
        released.append(route)

    page.route("**/push", slow_push)
    type_at_end(page, "\nlast words")
    page.wait_for_function("() => window.deskbridge.sync.pending() > 0")
    deadline = time.monotonic() + 5
    while not bench.service.drafts.clients():  # the editor's event stream registered it with the barrier
        assert time.monotonic() < deadline
        time.sleep(0.02)
    save = bench.submit(bench.service.save())
    time.sleep(0.3)
    assert not save.done()  # the draft barrier holds the save
    for route in released:
        route.continue_()
    page.unroute("**/push")
    result = save.result(10)
    assert result["dirty"] is False
    assert (bench.root / "notes.md").read_text("utf-8").endswith("\nlast words")


def _wait_until(check, what: str, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_an_mcp_save_asks_the_editor_whose_event_stream_is_open(browser, tmp_path):
    """One draft barrier (core's): the editor is registered exactly while its event stream is open, answers
    `prepare` after its typing is accepted, and the AI's save over HTTP MCP writes what the person typed."""
    bench = harness.make_bench(tmp_path / "notes", require_approval=False)
    errors: list[str] = []
    with harness.serving(bench):
        page = _open(browser, bench, errors)
        client_id = page.evaluate("window.deskbridge.clientId")
        _wait_until(lambda: bench.service.drafts.clients() == [client_id], "the editor never registered")
        held = []
        page.route("**/push", lambda route: held.append(route))  # a slow network holds the typing back
        type_at_end(page, "\n打字 typed just before the save")
        page.wait_for_function("() => window.deskbridge.sync.pending() > 0")

        async def mcp_save():
            async with bench.srv.client() as client:
                return await client.call_tool("md_save_current_document", {})

        save = bench.submit(mcp_save())
        _wait_until(lambda: held, "the editor did not push its typing when asked")
        assert not save.done()  # the barrier waits for the editor, which waits for its push
        for route in held:
            route.continue_()
        page.unroute("**/push")
        result = save.result(30)
        assert not result.is_error, result.structured_content
        assert (bench.root / "notes.md").read_text("utf-8").endswith("\n打字 typed just before the save")
        saves = [r for r in bench.audit.recent() if r.tool == "md_save_current_document"]
        assert len(saves) == 1 and saves[0].outcome == "ok"
        page.context.close()
        # the tab is gone with its stream: nobody is asked any more and a save is not held
        _wait_until(lambda: bench.service.drafts.clients() == [], "a closed tab stayed registered")
        again = bench.submit(mcp_save()).result(30)
        assert not again.is_error, again.structured_content
    assert errors == [], f"the page raised: {errors}"


def test_the_approval_dialog_names_the_operation_it_asks_about(editor):
    """Issue 10: a tool approved centrally (App.invoke, `ToolSpec.operation`) tells the dialog its operation,
    so the title says what is asked — an export here, not an edit — and a "no" is audited as declined."""
    from deskbridge.core.tools import CallContext

    bench, page = editor
    bench.set_require_approval(True)
    ai = CallContext(caller="mcp:pytest", client_name="pytest-agent")
    future = bench.submit(bench.app.invoke("md_ui_export_current_document", {"format": "HTML"}, ai))
    page.wait_for_selector("#approval-dialog")
    text = page.inner_text("#approval-dialog")
    assert "Approve an export?" in text and "md_ui_export_current_document" in text
    page.wait_for_timeout(600)  # answers count from 500 ms after the dialog appears
    page.click("#approval-reject")
    with pytest.raises(Exception, match="APPROVAL_DECLINED"):
        future.result(10)
    record = [r for r in bench.app.audit.recent() if r.tool == "md_ui_export_current_document"][-1]
    assert record.to_dict()["approval"] == "declined"
    assert not list(Path(bench.service.workspace.allowed_root).glob("*.html"))


@pytest.mark.parametrize(
    ("tool", "args", "title"),
    [
        ("md_rename_file", {"path": "ideas.md", "newPath": "later.md"}, "Approve renaming a file?"),
        ("md_delete_file", {"path": "ideas.md"}, "Approve moving a file to the trash?"),
    ],
)
def test_the_approval_dialog_names_rename_and_delete(editor, tool, args, title):
    """Rename and delete are approved centrally too; the dialog says which, and a "no" leaves the file."""
    from deskbridge.core.tools import CallContext

    bench, page = editor
    bench.set_require_approval(True)
    ai = CallContext(caller="mcp:pytest", client_name="pytest-agent")
    future = bench.submit(bench.app.invoke(tool, args, ai))
    page.wait_for_selector("#approval-dialog")
    text = page.inner_text("#approval-dialog")
    assert title in text and tool in text
    page.wait_for_timeout(600)  # answers count from 500 ms after the dialog appears
    page.click("#approval-reject")
    with pytest.raises(Exception, match="APPROVAL_DECLINED"):
        future.result(10)
    assert (bench.root / "ideas.md").is_file()


def _dispatch_at_end(page, text: str, times: int = 1) -> None:
    """`times` transactions inserting `text` at the end, as a keystroke or a paste makes (one update each)."""
    page.evaluate(
        """([text, times]) => { const v = window.deskbridge.view;
             for (let i = 0; i < times; i++) v.dispatch({changes: {from: v.state.doc.length, insert: text},
                                                         userEvent: times > 1 ? 'input.type' : 'input.paste'}); }""",
        [text, times],
    )


def test_typing_done_while_the_server_was_unreachable_all_arrives_once_it_answers(editor):
    """Over a thousand keystrokes held in the tab (more than one push may carry) are sent in several pushes."""
    bench, page = editor
    page.route("**/push", lambda route: route.abort())
    _dispatch_at_end(page, "x", times=1500)
    page.wait_for_function("() => window.deskbridge.sync.pending() === 1500")
    page.unroute("**/push")
    wait_synced(page, bench, timeout=20000)
    assert server_text(bench) == harness.SAMPLE + "x" * 1500
    page.keyboard.press("Control+s")
    page.wait_for_selector("#st-dirty.clean")
    assert (bench.root / "notes.md").read_text("utf-8") == harness.SAMPLE + "x" * 1500


def test_a_paste_larger_than_the_general_request_limit_reaches_the_server_and_is_saved(editor):
    """9 MB of Chinese text in UTF-8 (3 bytes a character): over the 8 MiB body limit of the other routes."""
    bench, page = editor
    pasted = ("汉字测试内容" * 50 + "\n") * 10_000
    _dispatch_at_end(page, pasted)
    wait_synced(page, bench, timeout=60000)
    assert page.evaluate("document.querySelector('#error-banner').hidden")
    page.keyboard.press("Control+s")
    page.wait_for_selector("#st-dirty.clean", timeout=30000)
    assert (bench.root / "notes.md").read_text("utf-8") == harness.SAMPLE + pasted


def test_closing_a_tab_that_still_holds_unsynced_typing_asks_first(editor):
    bench, page = editor
    asked: list[str] = []

    def answer(dialog):
        asked.append(dialog.type)
        dialog.dismiss()  # stay on the page

    page.on("dialog", answer)
    page.route("**/push", lambda route: route.abort())
    type_at_end(page, " not sent yet")  # a real key press: browsers ask only on a page the person used
    page.wait_for_function("() => window.deskbridge.sync.pending() > 0")
    page.close(run_before_unload=True)
    for _ in range(100):  # Playwright's sync API delivers the dialog event while it is called
        if asked:
            break
        page.wait_for_timeout(50)
    assert asked == ["beforeunload"], "closing the tab did not ask"
    assert not page.is_closed()
    page.unroute("**/push")
    wait_synced(page, bench)
    assert server_text(bench).endswith(" not sent yet")
    with page.expect_event("close", timeout=10000):  # nothing is only here any more: it closes unasked
        page.close(run_before_unload=True)
    assert asked == ["beforeunload"]


def test_a_file_that_is_not_utf8_opens_in_the_encoding_the_person_names_and_saves_in_it(editor):
    """A GB18030 note (common for Chinese writers) was refused with "reopen it with another encoding" and no way
    to do so in the editor; now the editor asks which encoding it has, and File → Reopen with encoding… fixes a
    wrong guess. The file's bytes change only when the person saves, and stay GB18030."""
    bench, page = editor
    original = "# 中文笔记\n\n你好世界\n".encode("gb18030")
    (bench.root / "gbk.md").write_bytes(original)
    answers = ["latin-1", "gb18030"]  # a wrong guess first (latin-1 reads any bytes), then the right one
    asked: list[str] = []

    def answer(dialog):
        asked.append(dialog.message)
        dialog.accept(answers.pop(0))

    page.on("dialog", answer)
    page.evaluate("window.deskbridge.openFile('gbk.md')")
    page.wait_for_function("() => window.deskbridge.doc && window.deskbridge.doc.path === 'gbk.md'")
    assert "gbk.md" in asked[0] and "gb18030" in asked[0]
    assert "笔记" not in editor_text(page)  # the wrong guess shows mojibake
    page.click("#menu-file .menu-button")
    page.click("#menu-file [data-action=reopen-encoding]")
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('你好世界')")
    assert len(asked) == 2 and (bench.root / "gbk.md").read_bytes() == original
    assert editor_text(page) == "# 中文笔记\n\n你好世界\n"
    type_at_end(page, "再见")
    wait_synced(page, bench)
    page.keyboard.press("Control+s")
    page.wait_for_selector("#st-dirty.clean")
    assert (bench.root / "gbk.md").read_bytes() == "# 中文笔记\n\n你好世界\n再见".encode("gb18030")


def test_opening_another_file_while_typing_cannot_reach_the_server_keeps_the_typing(editor):
    """Switching documents waited 2 s for the last keystrokes, then threw away whatever had not arrived."""
    bench, page = editor
    page.route("**/push", lambda route: route.abort())
    type_at_end(page, "\nwritten offline")
    page.wait_for_function("() => window.deskbridge.sync.pending() > 0")
    page.evaluate("window.deskbridge.openFile('ideas.md')")
    assert page.evaluate("window.deskbridge.doc.fileName") == "notes.md"
    assert editor_text(page).endswith("\nwritten offline")
    assert "not reached the server" in page.inner_text("#error-text")
    assert bench.service.read()["fileName"] == "notes.md"  # what MCP tools act on is still what is on screen
    page.unroute("**/push")
    wait_synced(page, bench)
    assert server_text(bench) == harness.SAMPLE + "\nwritten offline"
    page.evaluate("window.deskbridge.openFile('ideas.md')")
    page.wait_for_function("() => window.deskbridge.doc.fileName === 'ideas.md'")


def test_reload_from_disk_over_unsaved_changes_asks_first(editor):
    """The reload replaces the editor's text and is no undo step: one click threw unsaved work away."""
    bench, page = editor
    asked: list[str] = []
    answers = [False, True]  # first "Cancel", then "OK"

    def answer(dialog):
        asked.append(dialog.message)
        (dialog.accept if answers.pop(0) else dialog.dismiss)()

    page.on("dialog", answer)
    type_at_end(page, "\nmy unsaved paragraph")
    wait_synced(page, bench)
    (bench.root / "notes.md").write_text("# Rewritten on disk\n", encoding="utf-8")
    bench.call(_check_external(bench))
    page.wait_for_selector("#external-banner", state="visible")
    page.click("#external-reload")
    page.wait_for_timeout(300)
    assert len(asked) == 1 and "notes.md" in asked[0] and "cannot be undone" in asked[0]
    assert editor_text(page).endswith("\nmy unsaved paragraph")  # Cancel: nothing changed
    assert page.is_visible("#external-banner")
    page.click("#external-reload")
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString() === '# Rewritten on disk\\n'")
    assert len(asked) == 2


def _force_a_resync(bench, page, type_while_out_of_reach) -> None:
    """Leave the tab further behind than the server's update log (20,000 updates; 2 here) with the person's
    typing unsent: while the tab cannot push or pull, an AI edit arrives, the person types
    (`type_while_out_of_reach(page)`), and three more AI edits land; then the network comes back and the tab
    must load the document again."""
    bench.service.get(None).collab._log_max = 2  # three AI edits put the tab out of the log's reach
    page.route("**/push", lambda route: route.abort())
    page.route("**/pull*", lambda route: route.abort())
    bench.call(bench.ai_edit("Field notes", "Field notes, first AI edit"))  # the pull in flight brings it
    page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('first AI edit')")
    type_while_out_of_reach(page)
    page.wait_for_function("() => window.deskbridge.sync.pending() > 0")
    for find, replacement in (
        ("Euler:", "Euler's identity:"),
        ("## Tasks", "## Tasks to do"),
        ("dusk", "dawn"),
    ):
        bench.call(bench.ai_edit(find, replacement))
    page.unroute("**/pull*")
    page.unroute("**/push")


def test_typing_not_yet_sent_survives_a_forced_resync(editor):
    """After a forced resync the person's unsynced typing was dropped with only a toast; now it is applied
    again on the fresh text and sent."""
    bench, page = editor
    _force_a_resync(bench, page, lambda page: type_at_end(page, "\nwritten while out of reach"))
    page.wait_for_function(
        "() => window.deskbridge.view.state.doc.toString().includes('dawn')"
        " && window.deskbridge.view.state.doc.toString().endsWith('written while out of reach')",
        timeout=10000,
    )
    wait_synced(page, bench, timeout=10000)
    text = server_text(bench)
    assert text.endswith("| dawn | calm |\n\nwritten while out of reach")
    for ai in ("first AI edit", "Euler's identity:", "## Tasks to do"):
        assert ai in text
    assert "applied again" in page.inner_text("#toasts")


def test_the_error_banner_goes_once_the_failing_request_succeeds_and_can_be_dismissed(editor):
    """The banner stayed up for 8 s after the problem was gone: now the next success of the request that failed
    (here: sending typing while the server cannot be reached) clears it, and × dismisses any banner."""
    bench, page = editor
    page.route("**/push", lambda route: route.abort())
    type_at_end(page, "\nsent later")
    page.wait_for_selector("#error-banner:not([hidden])")
    page.unroute("**/push")
    wait_synced(page, bench)
    # the next push retries within ~1.2 s; well before the old 8 s timer the banner must be gone
    page.wait_for_selector("#error-banner", state="hidden", timeout=4000)
    assert server_text(bench).endswith("\nsent later")
    page.evaluate("window.deskbridge.showError(new Error('something the person must read'))")
    page.wait_for_selector("#error-banner:not([hidden])")
    page.click("#error-close")
    assert page.is_hidden("#error-banner")


def test_typing_inside_text_the_server_changed_during_a_forced_resync_is_kept_and_flagged(editor):
    bench, page = editor
    # the person types between the agent's next edits: the server's changes since the tab's version are one
    # span (from "Euler:" to "dusk"), so the typing cannot be placed for sure: it is kept, and the toast says so
    _force_a_resync(
        bench,
        page,
        lambda page: page.evaluate(
            "(() => { const v = window.deskbridge.view;"
            " const at = v.state.doc.toString().indexOf('write the editor');"
            " v.dispatch({changes: {from: at, insert: 'TYPED'}}); })()"
        ),
    )
    page.wait_for_function(
        "() => window.deskbridge.view.state.doc.toString().includes('dawn')", timeout=10000
    )
    wait_synced(page, bench, timeout=10000)
    text = server_text(bench)
    assert (
        text.count("TYPED") == 1 and "## Tasks to do" in text and "| dawn" in text
    )  # kept, at the span's edge
    assert "check it" in page.inner_text("#toasts")
