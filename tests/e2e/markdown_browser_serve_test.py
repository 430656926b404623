"""The editor served by the real `deskbridge serve` (platform middleware, UI secret, SSE, approvals) while a real
MCP client (the SDK over Streamable HTTP with the bearer token) edits and restyles the document.

Needs /usr/bin/chromium and the `playwright` package; skipped with a message otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.kinds.markdown.demo import make_sample_notes
from deskbridge.testing import ServerThread as Served

pytestmark = pytest.mark.browser

# Chromium and Playwright: the shared `browser` / `new_page` fixtures of tests/e2e/conftest.py (skipped
# with a message when either is missing).


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
        page.goto(srv.login_url())
        page.wait_for_function(
            "() => window.deskbridge && window.deskbridge.view && window.deskbridge.preview?.querySelector('h1')"
        )
        assert page.inner_text("#doc-name") == "README.md"
        # The outline skips the YAML front matter (its closing `---` is not a Setext underline), like the server's.
        assert page.inner_text("#outline-list .outline-item") == "Project notes"

        doc = served.run(served.call_tool("md_get_current_document", {}))
        assert not doc.is_error
        text, rev = doc.structured_content["markdown"], doc.structured_content["revision"]
        line = next(ln for ln in text.split("\n") if len(ln) > 12 and text.count(ln) == 1)
        call = served.submit(
            served.call_tool(
                "md_replace_text", {"oldText": line, "newText": line + " (reviewed)", "expectedRevision": rev}
            )
        )
        page.wait_for_selector("#approval-dialog")
        assert "(reviewed)" in page.inner_text("#approval-diff")
        page.wait_for_timeout(600)  # answers count from 500 ms after the dialog appears
        page.click("#approval-approve")
        result = call.result(30)
        assert not result.is_error, result.structured_content
        page.wait_for_function(
            "() => window.deskbridge.view.state.doc.toString().includes('(reviewed)')", timeout=5000
        )

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
