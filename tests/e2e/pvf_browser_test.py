"""The PVF browser UI served by the real `deskbridge serve` (platform middleware, UI secret, SSE), in Chromium,
next to a real MCP client: browse the virtualised tree, search as you type, view and edit a script through a plan,
hold a draft that blocks an agent's save (the engine's barrier), save, and see the history.

Chromium comes from the `browser` / `new_page` fixtures in tests/e2e/conftest.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.synth import synth
from deskbridge.testing import ServerThread

pytestmark = pytest.mark.browser


def _an_equ_file(call) -> tuple[str, int, str, str]:
    """What an agent starts from: the workspace's id and revision, and the path and text of an .equ file."""
    info = call("pvf_workspace_info", {}).structured_content
    ws, rev = info["workspaceId"], info["revision"]
    hits = call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1}).structured_content
    path = hits["hits"][0]["path"]
    return ws, rev, path, call("pvf_read_file", {"workspaceId": ws, "path": path}).structured_content["text"]


def _plan_a_new_section(call, ws: str, rev: int, path: str, text: str) -> dict:
    """An agent's edit plan that adds a section `[t]` at the end of `path`."""
    edits = [{"path": path, "text": text + "\n[t]\n1\n"}]
    return call(
        "pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits}
    ).structured_content


@pytest.mark.parametrize("family", ["classic", "nkpi"])
def test_browse_search_edit_save_in_the_browser(new_page, tmp_path: Path, family: str) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family=family, files=2000, seed=2)
    with ServerThread(archive) as served, served.client() as call:
        srv = served.srv
        page = new_page(viewport={"width": 1400, "height": 860})
        errors = page.errors
        page.goto(srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_selector("#tree-rows .row.dir")
        assert "2" in page.text_content("#archive")
        # search as you type: every path holding "_00" (most of 2000 files), rendered virtually
        page.fill("#search", "_00")
        page.wait_for_function("document.querySelector('#tree-count').textContent.includes('hits')")
        page.wait_for_function("document.querySelectorAll('#tree-rows .row').length > 5")
        hits = int(page.text_content("#tree-count").split()[0].rstrip("+"))
        rendered = page.eval_on_selector_all("#tree-rows .row", "rows => rows.length")
        assert hits >= 400 and rendered < 60  # only the visible rows exist in the page
        page.eval_on_selector(
            "#tree", "t => { t.scrollTop = 300 * 24; t.dispatchEvent(new Event('scroll')); }"
        )
        page.wait_for_function(
            "[...document.querySelectorAll('#tree-rows .row')].some(r => Number(r.dataset.i) >= 300)"
        )
        # pick an .equ file and view it, highlighted
        page.fill("#search", ".equ")
        # wait for this search's rows (the previous search's rows stay until its answer arrives)
        page.wait_for_function(
            "(() => { const rows = [...document.querySelectorAll('#tree-rows .row.file')];"
            " return rows.length > 0 && rows.every(r => r.title.endsWith('.equ')); })()"
        )
        path = page.get_attribute("#tree-rows .row.file", "title")
        page.click(f"#tree-rows .row.file[title='{path}']")
        page.wait_for_selector("#viewer .t-sec")
        assert path in page.text_content("#file-path")
        # string links are shown resolved on hover (pvf_resolve)
        page.hover("#viewer .t-link")
        page.wait_for_function(
            "(() => { const t = document.querySelector('#viewer .t-link').title; return t && t !== '…'; })()"
        )
        assert page.get_attribute("#viewer .t-link", "title") not in ("(unresolved)", "")
        # edit: a draft blocks an agent's save through the barrier, then the plan is applied in the UI
        page.click("#edit-btn")
        page.fill("#editor", page.input_value("#editor") + "\n[browser edit]\n`typed in chromium`\n")
        info = call("pvf_workspace_info", {}).structured_content
        blocked = call(
            "pvf_archive_save", {"workspaceId": info["workspaceId"], "expectedRevision": info["revision"]}
        )
        assert blocked.is_error and blocked.structured_content["code"] == "UI_DRAFT_PENDING", (
            blocked.structured_content
        )
        page.click("#apply-btn")
        page.wait_for_selector("#plan:not([hidden]) .pick")
        assert "typed in chromium" in page.text_content("#plan-items")
        page.click("#plan-apply")
        page.wait_for_function("document.querySelector('#viewer').textContent.includes('typed in chromium')")
        page.wait_for_selector("#dirty:not([hidden])")
        # the agent reads what the person applied
        info = call("pvf_workspace_info", {}).structured_content
        read = call("pvf_read_file", {"workspaceId": info["workspaceId"], "path": path}).structured_content
        assert "typed in chromium" in read["text"] and read["revision"] == info["revision"]
        # save from the UI: the tab answers the barrier itself (no draft now), history shows the commit
        page.click("#save-btn")
        page.wait_for_selector("#dirty[hidden]", state="attached")
        page.wait_for_function("document.querySelector('#history').textContent.includes('#1')")
        assert not errors, errors
    reopened = open_archive(archive)
    assert "typed in chromium" in reopened.read_text(path)
    reopened.close()


def test_an_agents_change_is_approved_in_the_open_pvf_page(browser, tmp_path: Path) -> None:
    """With the pvf page open, the platform asks the person there (not the client): the page shows who wants
    to run what, and its answer decides the agent's call."""
    import threading

    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=200, seed=3)
    with ServerThread(archive) as served, served.client() as call:
        page = browser.new_context(viewport={"width": 1200, "height": 800}).new_page()
        page.goto(served.srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        ws, rev, path, text = _an_equ_file(call)
        results: dict[str, object] = {}
        for approve in (False, True):
            plan = _plan_a_new_section(call, ws, rev, path, text)
            keys = [
                i["changeKey"]
                for i in call("pvf_plan_preview", {"planId": plan["planId"]}).structured_content["items"]
            ]
            args = {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
            agent = threading.Thread(
                target=lambda a=args: results.__setitem__("apply", call("pvf_plan_apply", a))
            )
            button = "#approvals .approve" if approve else "#approvals .reject"
            # A click in the request's first half second is a reflex or a decoy, not an answer (as in the
            # markdown editor): the page says so and the request stays. The click comes from an observer
            # in the same task that shows the request, so no machine is too slow to make it "too soon".
            page.evaluate(
                """(sel) => { window.__early = null; const o = new MutationObserver(() => {
                    const b = document.querySelector(sel); if (!b) return; o.disconnect(); b.click();
                    window.__early = !!document.querySelector('#approvals .too-soon'); });
                  o.observe(document.body, {childList: true, subtree: true}); }""",
                button,
            )
            agent.start()
            page.wait_for_function("window.__early !== null")
            assert page.evaluate("window.__early") is True and agent.is_alive()
            assert "pvf_plan_apply" in page.text_content("#approvals")
            assert "+[t]" in page.text_content("#approvals .approval-diff")  # the plan's real diff
            page.wait_for_timeout(600)
            page.click(button)
            agent.join(30)
            outcome = results.pop("apply")
            if approve:
                assert not outcome.is_error, outcome.structured_content  # type: ignore[attr-defined]
                assert outcome.structured_content["approval"] == {"decision": "approved", "via": "browser"}  # type: ignore[attr-defined]
            else:
                assert outcome.structured_content["code"] == "APPROVAL_DECLINED"  # type: ignore[attr-defined]
                call("pvf_plan_discard", {"planId": plan["planId"]})
            page.wait_for_selector("#approvals .approval", state="detached")


def test_a_plan_pending_before_the_page_opened_is_listed_with_its_own_kind(new_page, tmp_path: Path) -> None:
    """The page took the workspace's pending plan for a script plan: an agent's edit plan made before the page
    opened was listed as "script" and shown as a script plan."""
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=200, seed=4)
    with ServerThread(archive) as served, served.client() as call:
        ws, rev, path, text = _an_equ_file(call)
        plan = _plan_a_new_section(call, ws, rev, path, text)
        page = new_page(viewport={"width": 1200, "height": 800})
        page.goto(served.srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_selector("#plans .show-plan")
        assert page.text_content("#plans").startswith("edit"), page.text_content("#plans")
        page.click("#plans .show-plan")
        page.wait_for_selector("#plan:not([hidden]) .pick")
        assert "· edit" in page.text_content("#plan-title"), page.text_content("#plan-title")
        assert plan["planId"] == page.get_attribute("#plan", "data-plan-id")
        assert not page.errors, page.errors


def test_the_page_shows_an_archive_replaced_on_disk_under_unsaved_changes(new_page, tmp_path: Path) -> None:
    """QA: another program replacing the open archive went unseen until a save said SOURCE_CHANGED. With
    unsaved changes the page now shows the conflict and the person's ways out as soon as any call notices it;
    once it is settled by opening the file again with "discard", the banner goes."""
    import os
    import shutil

    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=200, seed=4)
    with ServerThread(archive) as served, served.client() as call:
        # the agent's edit and discarding open are the person's to approve in the page: not what this tests
        served.srv.app.update_settings({"require_approval": False})
        page = new_page(viewport={"width": 1200, "height": 800})
        page.goto(served.srv.login_url())
        page.wait_for_selector("body[data-ready='1']")
        ws, rev, path, text = _an_equ_file(call)
        plan = _plan_a_new_section(call, ws, rev, path, text)
        keys = [
            i["changeKey"]
            for i in call("pvf_plan_preview", {"planId": plan["planId"]}).structured_content["items"]
        ]
        rev = call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        ).structured_content["revision"]
        page.wait_for_selector("#dirty:not([hidden])")
        assert page.is_hidden("#outside-banner")

        other = tmp_path / "other-tool.pvf"
        shutil.copyfile(archive, other)
        ar = open_archive(other)
        ar.stage_text(path, "[outside]\n`theirs`\n")
        ar.save()
        ar.close()
        os.replace(other, archive)
        noticed = call("pvf_list_dir", {"workspaceId": ws, "path": ""}).structured_content
        assert noticed["externalChange"]["reloaded"] is False
        page.wait_for_selector("#outside-banner:not([hidden])")
        banner = page.text_content("#outside-banner")
        assert str(archive) in banner and "Save a copy" in banner and "discard" in banner

        reopened = call(
            "pvf_archive_open",
            {"path": str(archive), "workspaceId": ws, "expectedRevision": rev, "dirtyPolicy": "discard"},
        ).structured_content
        assert reopened["state"] == "succeeded", reopened
        page.wait_for_selector("#outside-banner", state="hidden")
        assert not page.errors, page.errors
