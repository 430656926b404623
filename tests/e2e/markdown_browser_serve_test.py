"""The editor served by the real `deskbridge serve` (platform middleware, UI secret, SSE, approvals) while a real
MCP client (the SDK over Streamable HTTP with the bearer token) edits and restyles the document.

Needs /usr/bin/chromium and the `playwright` package; skipped with a message otherwise.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from deskbridge.kinds.markdown.demo import make_sample_notes
from deskbridge.testing import running_server

CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.browser

playwright_sync = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the Python package)")
if not CHROMIUM.exists():
    pytest.skip("Chromium is not installed at /usr/bin/chromium (apt-get install -y chromium)",
                allow_module_level=True)


class Served:
    """`running_server` on its own loop in a thread, so the synchronous Playwright API can drive the page."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.stop: asyncio.Event | None = None
        self.srv = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            self.stop = asyncio.Event()
            try:
                async with running_server(self.folder) as srv:
                    self.srv = srv
                    self.ready.set()
                    await self.stop.wait()
            except BaseException as exc:
                self.error = exc
                self.ready.set()

        self.loop.run_until_complete(main())

    def __enter__(self) -> Served:
        self.thread.start()
        self.ready.wait(30)
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(15)

    def run(self, coro, timeout: float = 30):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call_tool(self, name: str, arguments: dict):
        async with self.srv.client() as client:
            result = await client.call_tool(name, arguments)
        return result


@pytest.fixture(scope="module")
def browser():
    with playwright_sync.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM),
                              args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                                    "--disable-component-update", "--no-first-run"])
        yield b
        b.close()


def test_the_served_editor_follows_a_real_mcp_client(browser, tmp_path):
    notes = make_sample_notes(tmp_path / "notes")
    with Served(notes) as served:
        srv = served.srv
        context = browser.new_context(viewport={"width": 1400, "height": 860})
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        # Without the launch URL's secret the API refuses the page.
        page.goto(srv.base_url + "/")
        page.wait_for_selector("#error-banner", state="visible")
        # The launch URL sets the UI cookie and lands on the editor.
        page.goto(f"{srv.base_url}/?k={srv.app.ui_secret}")
        page.wait_for_function("() => window.deskbridge && window.deskbridge.view && document.querySelector('#preview h1')")
        assert page.inner_text("#doc-name") == "README.md"

        doc = served.run(served.call_tool("md_get_current_document", {}))
        assert not doc.is_error
        text, rev = doc.structured_content["markdown"], doc.structured_content["revision"]
        line = next(ln for ln in text.split("\n") if len(ln) > 12 and text.count(ln) == 1)
        call = served.submit(served.call_tool("md_replace_text", {
            "oldText": line, "newText": line + " (reviewed)", "expectedRevision": rev}))
        page.wait_for_selector("#approval-dialog")
        assert "(reviewed)" in page.inner_text("#approval-diff")
        page.click("#approval-approve")
        result = call.result(30)
        assert not result.is_error, result.structured_content
        page.wait_for_function("() => window.deskbridge.view.state.doc.toString().includes('(reviewed)')",
                               timeout=5000)

        themed = served.run(served.call_tool("vex_ui_set_theme", {"themeKey": "dusk"}))
        assert not themed.is_error and themed.structured_content["theme"] == "dusk"
        page.wait_for_function("() => document.documentElement.dataset.theme === 'dusk'")

        page.click("#tab-files")
        shots = Path(__file__).resolve().parents[2] / ".cache" / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "served-demo-dusk.png"))
        page.click("#menu-help .menu-button")
        page.click("#menu-help [data-action=audit]")
        page.wait_for_selector("#audit-body table")
        assert "md_replace_text" in page.inner_text("#audit-body")
        context.close()
    assert errors == []
