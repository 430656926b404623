"""REL-ATTACK in a real browser (Chromium through Playwright), against a real `deskbridge serve` (issue 8):

* clickjacking — a page on another loopback port tries to frame the UI: the frame stays empty;
* the browser's way in — the owner-only login page `serve` opens (a file:// path, no secret on any command line)
  signs the browser in once; a stray `/?k=…` (a document's <img>) never logs it out;
* the MCP token is shown only after the person confirms in the page, and "Copy client config" still works;
* the `approvals_via_client` choice in the settings panel reaches the server;
* the platform page ignores an answer in a request's first half second (the rule every page shares).

Chromium comes from the `browser` / `new_page` fixtures in tests/e2e/conftest.py.
"""

from __future__ import annotations

import contextlib
import http.server
import json
import socketserver
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskbridge.testing import ServerThread

pytestmark = [pytest.mark.browser, pytest.mark.security]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[ServerThread]:
    folder = tmp_path / "ws"
    folder.mkdir()
    (folder / "hello.txt").write_text("hello\n", "utf-8")
    with ServerThread(folder, kind="probe") as server:
        yield server


@contextlib.contextmanager
def hostile_site(pages: dict[str, str]) -> Iterator[str]:
    """A web site on another loopback port (another origin), serving `pages`."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = pages.get(self.path, "not here").encode()
            self.send_response(200 if self.path in pages else 404)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


def wait_for_clipboard(page, want: str, timeout_s: float = 10.0) -> None:
    """Poll the clipboard until it holds `want`. The system clipboard outlives a test (an earlier test's config
    is still there), and a predicate returning a promise is not awaited by wait_for_function."""
    deadline = time.monotonic() + timeout_s
    while want not in (page.evaluate("navigator.clipboard.readText()") or ""):
        assert time.monotonic() < deadline, f"the clipboard never held {want[:12]}…"
        page.wait_for_timeout(50)


def test_another_loopback_port_cannot_frame_the_ui(new_page, served) -> None:
    srv = served.srv
    decoy = (
        "<!doctype html><title>win a prize</title><button id=prize>Claim</button>"
        f'<iframe id=victim src="{srv.base_url}/" style="opacity:0.01;position:absolute;top:0;left:0"></iframe>'
        '<iframe id=own src="/inner"></iframe>'
    )
    page = new_page()
    with hostile_site({"/": decoy, "/inner": "<title>own frame</title><p id=ok>framed fine</p>"}) as site:
        # The person is signed in in this browser (a cookie exists), as during a real attack.
        page.goto(srv.login_url())
        page.wait_for_selector("#ws")
        page.goto(site + "/")
        page.wait_for_load_state("load")
        frames = {frame.name or frame.url: frame for frame in page.frames}
        own = page.frame_locator("#own")
        assert own.locator("#ok").inner_text() == "framed fine"  # frames do load here: the control
        victim = next(f for f in page.frames if f != page.main_frame and "inner" not in f.url)
        assert victim.url.startswith("chrome-error://") or victim.url == "about:blank", (victim.url, frames)
        assert victim.evaluate("document.querySelector('#pending') === null")


def test_the_login_page_signs_in_once_and_a_stray_code_never_logs_out(new_page, served, tmp_path) -> None:
    from deskbridge.web.launch import write_login_page

    srv = served.srv
    login = write_login_page(srv.app.dirs, srv.port, srv.login_url())  # what `serve` opens: a file:// path
    page = new_page()
    page.goto(login.as_uri())
    page.wait_for_url(f"{srv.base_url}/")
    page.wait_for_function("() => document.querySelector('#ws').textContent.includes('probe')")
    assert page.locator("#signin").is_hidden()
    # A document's <img src="/?k=x"> (or any page) hitting the login route must not replace the session.
    page.evaluate(
        """() => new Promise((done) => { const img = new Image(); img.onload = img.onerror = done;
                                         img.src = '/?k=forged-by-a-document'; })"""
    )
    assert page.evaluate("fetch('/api/status').then((r) => r.status)") == 200
    # Opening the used login page again: the code is spent, but this browser is still signed in.
    page.goto(login.as_uri())
    page.wait_for_url(f"{srv.base_url}/")
    page.wait_for_function("() => document.querySelector('#ws').textContent.includes('probe')")
    # A browser that never signed in gets the "used or expired" page, not a session.
    stranger = new_page()
    stranger.goto(login.as_uri())
    stranger.wait_for_selector("text=already used or has expired")
    assert stranger.evaluate("fetch('/api/status').then((r) => r.status)") == 401


def test_the_token_needs_a_confirmation_in_the_page(new_page, served) -> None:
    srv = served.srv
    page = new_page()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.base_url)
    page.goto(srv.login_url())
    page.wait_for_selector("#ws")
    dialogs: list[str] = []

    def dismiss(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.once("dialog", dismiss)
    page.click("#show")
    page.wait_for_timeout(300)
    assert dialogs and "MCP token" in dialogs[0]
    assert srv.app.token not in page.inner_text("#token")  # "no" shows nothing

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#copycfg")
    wait_for_clipboard(page, f"Bearer {srv.app.token}")
    config = json.loads(page.evaluate("navigator.clipboard.readText()"))
    assert config["mcpServers"]["deskbridge"]["headers"]["Authorization"] == f"Bearer {srv.app.token}"
    page.click("#show")  # already confirmed in this page: shown without asking again
    page.wait_for_function(f"() => document.querySelector('#token').textContent === '{srv.app.token}'")
    page.wait_for_function("() => document.querySelector('#auditrows').textContent.includes('token.reveal')")


def test_the_settings_panel_can_require_the_browser_for_approvals(new_page, served) -> None:
    srv = served.srv
    page = new_page()
    page.goto(srv.login_url())
    page.wait_for_function("() => document.querySelector('#via-client').checked")
    page.check("#via-browser")
    page.wait_for_selector("#settings-saved", state="visible")
    assert srv.app.settings.approvals_via_client is False
    page.check("#via-client")
    page.wait_for_function("() => true")
    deadline = 50
    while srv.app.settings.approvals_via_client is False and deadline:
        page.wait_for_timeout(100)
        deadline -= 1
    assert srv.app.settings.approvals_via_client is True


def test_the_editor_settings_panel_asks_before_showing_the_token(new_page, tmp_path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n\nHello.\n", "utf-8")
    with ServerThread(notes) as served:
        srv = served.srv
        page = new_page()
        page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=srv.base_url)
        page.goto(srv.login_url())
        page.wait_for_function("() => document.body.dataset.ready === '1'")
        page.click("#mcp-button")
        page.wait_for_selector("#panel-mcpSettings")
        assert page.input_value("#mcp-token") == ""  # opening the panel reads no token
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click("#mcp-config-copy")
        page.wait_for_timeout(300)
        assert page.input_value("#mcp-token") == ""
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#mcp-config-copy")
        wait_for_clipboard(page, f"Bearer {srv.app.token}")
        assert f"Bearer {srv.app.token}" in page.evaluate("navigator.clipboard.readText()")
        assert page.is_checked("#mcp-approvals-via-client")
        page.uncheck("#mcp-approvals-via-client")  # "require the browser"
        page.click("#mcp-save")
        page.wait_for_selector("#panel-mcpSettings", state="detached")
        assert srv.app.settings.approvals_via_client is False


def test_the_platform_page_ignores_an_answer_in_the_requests_first_half_second(new_page, served) -> None:
    # The platform page (every kind without its own page, e.g. sage) answers approvals too: the same rule as the
    # PVF page and the markdown editor (web/static/approval-guard.js) — a click that lands as the request appears
    # is a reflex or a decoy, not an answer.
    from deskbridge.core.policy import ApprovalRequest, Decision

    srv = served.srv
    page = new_page()
    page.goto(srv.login_url())
    page.wait_for_selector("#ws")
    deadline = time.monotonic() + 10
    while not srv.app.approvals.ui_attached:  # the page's event stream is what makes it a place to ask
        assert time.monotonic() < deadline, "the platform page never opened its event stream"
        time.sleep(0.05)
    # The click comes from an observer in the same task that shows the request: never late enough to count.
    page.evaluate(
        """() => { window.__early = null; const o = new MutationObserver(() => {
            const b = document.querySelector('#pending button[data-ok="1"]'); if (!b) return; o.disconnect();
            b.click(); setTimeout(() => { window.__early = !document.querySelector('#pending .too-soon').hidden; }, 0); });
          o.observe(document.getElementById('pending'), {childList: true, subtree: true}); }"""
    )
    req = ApprovalRequest("agent", "an agent", "sage_touch", "Data/Mod.xml", "change one attribute", "+x\n")
    answer = served.submit(srv.app.approvals.request(req, timeout_s=60))
    page.wait_for_function("window.__early !== null")
    assert page.evaluate("window.__early") is True and not answer.done()
    assert "sage_touch" in page.text_content("#pending")
    page.wait_for_timeout(600)
    page.click('#pending button[data-ok="1"]')
    assert answer.result(30).decision is Decision.APPROVED
    assert page.errors == []
