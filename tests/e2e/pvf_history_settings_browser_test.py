"""The PVF page's history diff and the platform's MCP settings panel inside it (issue 9), in Chromium over the
real `deskbridge serve`, next to a real MCP client: an agent edits and saves, the page's history lists the
commit, and clicking it shows that save's diff; the settings panel is the platform's own module (the token
only after a confirmation in the page, the approvals choice reaching the server)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from deskbridge.kinds.pvf.synth import synth
from deskbridge.testing import ServerThread

pytestmark = pytest.mark.browser


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.structured_content
    return result.structured_content


def opened(call: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        info = structured(call("pvf_workspace_info", {}))
        if info["open"] and info["lifecycle"] is None:
            return info
        assert time.monotonic() < deadline, info
        time.sleep(0.1)


@pytest.mark.parametrize("family", ["classic", "nkpi"])
def test_the_history_shows_a_commits_diff(new_page, tmp_path: Path, family: str) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family=family, files=200, seed=7)
    with ServerThread(archive) as served, served.client() as call:
        # The agent's apply would be asked in this very page (require_approval); the approval flow has its own
        # test (pvf_browser_test.py), this one is about the history.
        served.srv.app.update_settings({"require_approval": False})
        info = opened(call)
        ws = info["workspaceId"]
        path = structured(call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1}))["hits"][0][
            "path"
        ]
        page = new_page(viewport={"width": 1400, "height": 900})
        page.goto(served.srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        text = structured(call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        plan = structured(
            call(
                "pvf_edit_prepare",
                {
                    "workspaceId": ws,
                    "expectedRevision": info["revision"],
                    "edits": [{"path": path, "text": text + "\n[history mark]\n`saved by the agent`\n"}],
                },
            )
        )
        keys = [
            i["changeKey"] for i in structured(call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        applied = structured(
            call(
                "pvf_plan_apply",
                {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": info["revision"]},
            )
        )
        structured(call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]}))
        page.wait_for_selector("#history li[data-id]")
        page.click("#history li[data-id]")
        page.wait_for_selector("#commit-dialog[open] .commit-diff")
        title = page.text_content("#commit-title")
        assert "#1" in title and "mcp" in title
        shown = page.text_content("#commit-files")
        assert path in shown
        added = page.eval_on_selector_all("#commit-files .add", "spans => spans.map(s => s.textContent)")
        assert "+[history mark]" in added and any(a.strip("+\t ") == "`saved by the agent`" for a in added), (
            added
        )
        page.click("#commit-dialog button[value='close']")
        page.wait_for_selector("#commit-dialog", state="hidden")
        assert not page.errors, page.errors


def test_the_platform_settings_panel_in_the_pvf_page(new_page, tmp_path: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=50, seed=8)
    with ServerThread(archive) as served:
        srv = served.srv
        page = new_page(viewport={"width": 1400, "height": 900})
        page.goto(srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_selector("#mcp-panel[data-ready='1'] #connect")
        assert page.text_content("#mcp-panel #endpoint") == f"{srv.base_url}/mcp"
        # the token: nothing without a confirmation in the page, then shown
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click("#mcp-panel #show")
        page.wait_for_timeout(300)
        assert srv.app.token not in page.text_content("#mcp-panel #token")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#mcp-panel #show")
        page.wait_for_function(
            f"document.querySelector('#mcp-panel #token').textContent === '{srv.app.token}'"
        )
        # the client list for "Set up a client" comes from the server
        page.click("#mcp-panel #setupbtn")
        assert page.eval_on_selector_all("#mcp-panel #setuphost option", "os => os.length") >= 1
        # the approvals choice reaches the server
        page.wait_for_function("document.querySelector('#mcp-panel #via-client').checked")
        page.check("#mcp-panel #via-browser")
        page.wait_for_selector("#mcp-panel #settings-saved", state="visible")
        assert srv.app.settings.approvals_via_client is False
        # the module is the platform's, not a copy
        src = page.evaluate("fetch('/platform-static/mcp-panel.js').then(r => r.text())")
        assert "export function mountMcpPanel" in src
        assert not page.errors, page.errors
