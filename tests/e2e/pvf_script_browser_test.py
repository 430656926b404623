"""The PVF script workspace in Chromium over the real `deskbridge serve`, beside a real MCP client (issue 14):

* the editor completes from the API's `.d.ts` (a global's members, a variable's declared type);
* the script library saves, lists, loads and deletes `.pvf.js` files in the user config folder;
* a run started in the UI shows its log and progress, its plan's diff has a checkbox per change; one change
  unticked, the rest applied, saved: on disk exactly the ticked files changed;
* a run an MCP client starts shows up in the page (log and plan) without touching the person's unsaved script,
  and is applied from the page — the client then sees its plan applied; a UI plan the client discards leaves
  the page.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.synth import synth
from deskbridge.testing import ServerThread

pytestmark = pytest.mark.browser

MARK = "[ui script mark]"


def mark_script(paths: list[str], tag: str) -> str:
    """Append a section to each of `paths` and log each one (a three-change plan)."""
    return (
        f"const paths = {json.dumps(paths)};\n"
        "for (const p of paths) {\n"
        "  const f = pvf.find(p);\n"
        f"  f.setText(f.text() + {json.dumps(chr(10) + MARK + chr(10) + '`' + tag + '`' + chr(10))});\n"
        "  pvf.log('marked', p);\n"
        "}\n"
    )


MARK_ALL = """
for (const f of pvf.glob("**/*")) {
  if (f.type === pvf.types.script && !f.path.endsWith(".lst")) f.setText(f.text() + "\\n[all]\\n`all of them`\\n");
}
"""


def plan_keys(call: Any, plan_id: str) -> list[str]:
    keys: list[str] = []
    cursor = None
    while True:
        page = structured(call("pvf_script_preview", {"planId": plan_id, "limit": 200, "cursor": cursor}))
        keys += [i["changeKey"] for i in page["items"]]
        cursor = page["nextCursor"]
        if not cursor:
            return keys


def structured(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.structured_content
    return result.structured_content


def three_files(call: Any) -> tuple[dict[str, Any], list[str]]:
    deadline = time.monotonic() + 120
    while True:
        info = structured(call("pvf_workspace_info", {}))
        if info["open"] and info["lifecycle"] is None:
            break
        assert time.monotonic() < deadline, info
        time.sleep(0.1)
    listing = structured(
        call("pvf_search", {"workspaceId": info["workspaceId"], "query": ".equ", "limit": 3})
    )
    paths = [h["path"] for h in listing["hits"]]
    assert len(paths) == 3
    return info, paths


def open_ui(new_page: Any, served: ServerThread) -> Any:
    page = new_page(viewport={"width": 1400, "height": 900})
    page.goto(served.srv.login_url())
    page.wait_for_selector("body[data-ready='1'][data-scripts-ready='1']")
    page.click("#tab-script")
    page.wait_for_selector("#script-pane:not([hidden])")
    return page


def test_ui_run_diff_partial_apply_and_library(new_page, tmp_path: Path, deskbridge_home: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=300, seed=5)
    with ServerThread(archive) as served, served.client() as call:
        info, paths = three_files(call)
        page = open_ui(new_page, served)
        # completion from the .d.ts: a global's members, then a variable whose type is declared
        page.click("#script-src")
        page.keyboard.type("pvf.gl")
        page.keyboard.press("Control+Space")
        page.wait_for_selector("#script-complete:not([hidden]) li")
        assert page.text_content("#script-complete li.on").startswith("glob")
        page.keyboard.press("Enter")
        assert page.input_value("#script-src") == "pvf.glob("
        page.fill("#script-src", 'const doc = pvf.find("a").parse();\ndoc')
        page.focus("#script-src")
        page.keyboard.press("End")
        page.keyboard.type(".")
        page.wait_for_selector("#script-complete:not([hidden]) li")
        names = [t.split("(")[0] for t in page.locator("#script-complete li").all_inner_texts()]
        assert "appendSection" in names and "setStrValue" in names and "parse" not in names  # PvfDocument's
        page.keyboard.press("Escape")
        # the library: save, list, start anew, load back
        source = mark_script(paths, "typed in the ui")
        page.fill("#script-src", source)
        page.fill("#script-name", "mark")
        page.click("#script-save")
        page.wait_for_selector("#script-lib a[data-name='mark.pvf.js']")
        saved = deskbridge_home / "config" / "pvf-scripts" / "mark.pvf.js"
        assert saved.read_text("utf-8") == source
        page.click("#script-new")
        assert page.input_value("#script-src") == ""
        page.click("#script-lib a[data-name='mark.pvf.js']")
        page.wait_for_function(f"document.querySelector('#script-src').value === {json.dumps(source)}")
        # run: log, progress, then the plan with one checkbox per change
        page.click("#script-run")
        page.wait_for_selector("#plan:not([hidden]) .pick")
        page.wait_for_function(
            "document.querySelector('#script-log').textContent.includes('change(s) to review')"
        )
        log = page.text_content("#script-log")
        assert all(f"marked {p}" in log for p in paths), log
        assert "succeeded" in page.text_content("#script-state")
        keys = page.eval_on_selector_all("#plan .pick", "cs => cs.map(c => c.value)")
        lower = [p.lower() for p in paths]
        assert sorted(k for k in keys if k in lower) == sorted(lower), (
            keys
        )  # + string-table entries they need
        assert "typed in the ui" in page.text_content("#plan-items")
        # the agent sees the same plan pending
        plan_id = page.get_attribute("#plan", "data-plan-id")
        assert structured(call("pvf_workspace_info", {}))["pendingPlan"] == plan_id
        # untick one change, apply the other two
        dropped = lower[1]
        page.uncheck(f"#plan .pick[value='{dropped}']")
        page.click("#plan-apply")
        page.wait_for_selector("#plan", state="hidden")
        page.wait_for_selector("#dirty:not([hidden])")
        after = structured(call("pvf_workspace_info", {}))
        assert after["revision"] == info["revision"] + 1 and after["pendingPlan"] is None
        saved_ok = structured(
            call(
                "pvf_archive_save",
                {"workspaceId": after["workspaceId"], "expectedRevision": after["revision"]},
            )
        )
        assert saved_ok.get("diskCommitted", True)
        # delete from the library
        page.once("dialog", lambda d: d.accept())
        page.click("#script-lib .script-del[data-name='mark.pvf.js']")
        page.wait_for_selector("#script-lib a[data-name='mark.pvf.js']", state="detached")
        assert not saved.exists()
        assert not page.errors, page.errors
    reopened = open_archive(archive)
    try:
        changed = [p.lower() for p in paths if MARK in reopened.read_text(p)]
        assert sorted(changed) == sorted(k for k in lower if k != dropped)
    finally:
        reopened.close()


def test_an_mcp_run_shows_in_the_ui_and_is_applied_there(new_page, tmp_path: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="nkpi", files=600, seed=6)  # > 2 preview pages of scripts
    with ServerThread(archive) as served, served.client() as call:
        info, paths = three_files(call)
        page = open_ui(new_page, served)
        draft = "// the person's own script, not saved yet\npvf.log('mine');\n"
        page.fill("#script-src", draft)
        run = structured(
            call(
                "pvf_script_run",
                {
                    "workspaceId": info["workspaceId"],
                    "expectedRevision": info["revision"],
                    "source": mark_script(paths, "from the agent"),
                },
            )
        )
        # the page follows the agent's run and shows its plan
        page.wait_for_selector("#plan:not([hidden]) .pick")
        page.wait_for_function("document.querySelector('#script-log').textContent.includes('marked')")
        assert run["owner"] in page.text_content("#plan-title")
        assert run["owner"] in page.text_content("#plans")
        shown = page.eval_on_selector_all("#plan .pick", "cs => cs.map(c => c.value)")
        assert {p.lower() for p in paths} <= set(shown), shown
        assert page.input_value("#script-src") == draft  # an AI run never replaces the person's script
        status = structured(call("pvf_script_status", {"taskId": run["taskId"]}))
        plan_id = status["planId"]
        assert page.get_attribute("#plan", "data-plan-id") == plan_id
        # applied from the page; the agent sees the outcome
        page.click("#plan-apply")
        page.wait_for_selector("#plan", state="hidden")
        preview = structured(call("pvf_script_preview", {"planId": plan_id}))
        assert preview["plan"]["state"] == "applied"
        now = structured(call("pvf_workspace_info", {}))
        assert now["revision"] == info["revision"] + 1
        for p in paths:
            read = structured(call("pvf_read_file", {"workspaceId": now["workspaceId"], "path": p}))
            assert "from the agent" in read["text"]
        page.wait_for_function("document.querySelector('#plans').textContent.trim() === 'none'")
        # a plan longer than a page: more pages on demand, and "also apply the rest" applies what is unseen
        page.fill("#script-src", MARK_ALL)
        page.click("#script-run")
        page.wait_for_selector("#plan:not([hidden]) #plan-more-box:not([hidden])")
        big_plan = page.get_attribute("#plan", "data-plan-id")
        all_keys = plan_keys(call, big_plan)
        first_page = page.locator("#plan .pick").count()
        assert first_page < len(all_keys)
        page.click("#plan-more")
        page.wait_for_function(f"document.querySelectorAll('#plan .pick').length > {first_page}")
        assert page.locator("#plan .pick").count() < len(all_keys)  # still more to come
        page.uncheck(f"#plan .pick[value='{all_keys[0]}']")
        page.check("#plan-rest")
        page.click("#plan-apply")
        page.wait_for_selector("#plan", state="hidden")
        now = structured(call("pvf_workspace_info", {}))
        for key, want in ((all_keys[0], False), (all_keys[-1], True)):
            text = structured(call("pvf_read_file", {"workspaceId": now["workspaceId"], "path": key}))["text"]
            assert ("`all of them`" in text) is want, key
        # the other way round: a plan the person started is discarded by the agent, and leaves the page
        page.fill("#script-src", mark_script(paths[:1], "second"))
        page.click("#script-run")
        page.wait_for_selector("#plan:not([hidden]) .pick")
        ui_plan = page.get_attribute("#plan", "data-plan-id")
        structured(call("pvf_script_discard", {"planId": ui_plan}))
        page.wait_for_selector("#plan", state="hidden")
        assert not page.errors, page.errors
