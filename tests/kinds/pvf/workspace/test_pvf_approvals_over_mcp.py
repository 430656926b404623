"""`require_approval` for the pvf tools, decided by the platform from each tool's declared operation
(`ToolSpec.operation`), over a real MCP client on HTTP: the person is asked through elicitation (a live
request, and the 2026 InputRequiredResult round trip), a "no" changes nothing, the settings decide who asks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from pvfws_helpers import Agent, serve

pytestmark = pytest.mark.anyio


def answer(approve: bool, seen: list[str]):
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


async def edit_plan(a: Agent) -> tuple[str, int, str, list[str]]:
    info = await a.ready()
    ws, rev = info["workspaceId"], info["revision"]
    path = await a.first_script(ws)
    text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
    plan = await a.call(
        "pvf_edit_prepare",
        {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": text + "\n[t]\n1\n"}]},
    )
    keys = [i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]]
    return ws, rev, plan["planId"], keys


@pytest.mark.parametrize(
    "mode", ["legacy", "auto"]
)  # a live elicitation request / the 2026 InputRequiredResult
@pytest.mark.parametrize("approve", [True, False])
async def test_applying_a_plan_asks_the_person_through_the_client(
    archive: Path, approve: bool, mode: str
) -> None:
    seen: list[str] = []
    async with serve(archive, approvals=True, mode=mode, elicitation_callback=answer(approve, seen)) as a:
        _ws, rev, plan_id, keys = await edit_plan(a)
        assert not seen  # reading, planning and previewing ask nobody
        result = await a.client.call_tool(
            "pvf_plan_apply", {"planId": plan_id, "changeKeys": keys, "expectedRevision": rev}
        )
        after = await a.call("pvf_workspace_info", {})
        audit = [r.to_dict() for r in a.srv.app.audit.recent() if r.tool == "pvf_plan_apply"]
    assert len(seen) == 1 and "pvf_plan_apply" in seen[0] and plan_id in seen[0]
    assert "+[t]" in seen[0], seen[0]  # what the plan really changes, not only its file names
    assert audit[-1]["approval"] == ("approved" if approve else "declined")
    if mode == "auto":  # the first round returned the question, the client's retry carried the answer
        assert [r["outcome"] for r in audit][-2] == "INPUT_REQUIRED"
    if approve:
        assert not result.is_error, result.structured_content
        assert result.structured_content["approval"] == {"decision": "approved", "via": "client"}
        assert after["revision"] == rev + 1
    else:
        assert result.is_error and result.structured_content["code"] == "APPROVAL_DECLINED"
        assert after["revision"] == rev and not after["sourceDirty"]


async def test_a_selection_that_cannot_apply_is_refused_before_anyone_is_asked(archive: Path) -> None:
    seen: list[str] = []
    async with serve(archive, approvals=True, mode="legacy", elicitation_callback=answer(True, seen)) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        # classic: a tag never seen before grows stringtable.bin, which the script's change requires
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": path, "text": text + "\n[qa7]\n1\n"}],
            },
        )
        if plan["changeCount"] > 1:
            err = await a.fail(
                "pvf_plan_apply",
                {"planId": plan["planId"], "changeKeys": [path], "expectedRevision": rev},
                "INVALID_ARGUMENT",
            )
            assert err["data"]["unacknowledgedWarningIds"], err
        await a.fail(
            "pvf_plan_apply",
            {"planId": plan["planId"], "changeKeys": ["no/such.equ"], "expectedRevision": rev},
            "INVALID_ARGUMENT",
        )
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        err = await a.fail(
            "pvf_plan_apply",
            {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev + 5},
            "STALE_PLAN",
        )
        assert f"expectedRevision {rev}" in err["hint"], err
        assert not seen  # nobody approved a commit that was going to fail
        selection = {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        await a.call("pvf_plan_apply", selection)
        assert len(seen) == 1
        await a.fail("pvf_plan_apply", selection, "NOT_FOUND")
        assert len(seen) == 1  # an applied plan is not offered again


async def test_the_settings_decide_which_operations_ask(archive: Path, tmp_path: Path) -> None:
    seen: list[str] = []
    original = archive.read_bytes()
    async with serve(archive, approvals=True, mode="legacy", elicitation_callback=answer(False, seen)) as a:
        app = a.srv.app
        ws, rev, plan_id, keys = await edit_plan(a)
        # a plan nobody issued is refused before anyone is asked
        await a.fail("pvf_plan_apply", {"planId": "edit-0000000000000000", "changeKeys": keys}, "NOT_FOUND")
        assert not seen
        # the person relaxes `edit` for this setup: applying no longer asks
        app.update_settings({"approval_rules": {"edit": False}})
        await a.call("pvf_plan_apply", {"planId": plan_id, "changeKeys": keys, "expectedRevision": rev})
        assert not seen
        # saving does not ask by default (like markdown)…
        await a.call("pvf_archive_save_as", {"workspaceId": ws, "path": str(tmp_path / "copy.pvf")})
        assert not seen and (tmp_path / "copy.pvf").exists()
        # …until the settings say it does; the "no" leaves the archive on disk as it was
        app.update_settings({"approval_rules": {"edit": False, "save": True}})
        # so is a save of a workspace that is not open
        await a.fail("pvf_archive_save", {"workspaceId": "ws-other"}, "STALE_WORKSPACE")
        assert not seen
        err = await a.fail("pvf_archive_save", {"workspaceId": ws}, "APPROVAL_DECLINED")
        assert "pvf_archive_save" in seen[-1] and err["data"]["decision"] == "declined"
        assert archive.read_bytes() == original
        # an export writes outside the archive: asked by default, and a "no" writes nothing
        plan = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev + 1, "source": "memory"},
        )
        out = tmp_path / "out"
        out.mkdir()
        await a.fail(
            "pvf_export_execute",
            {"exportPlanId": plan["exportPlanId"], "outputParent": str(out), "outputName": "x"},
            "APPROVAL_DECLINED",
        )
        assert "pvf_export_execute" in seen[-1] and not any(out.iterdir())
        # require_approval off: nothing asks
        asked = len(seen)
        app.update_settings({"require_approval": False})
        await a.call("pvf_archive_save", {"workspaceId": ws})
        assert len(seen) == asked and archive.read_bytes() != original


async def test_the_browser_is_the_person_and_is_not_asked(archive: Path) -> None:
    async with serve(archive, approvals=True) as a:  # this client cannot be asked (no elicitation)
        _ws, rev, plan_id, keys = await edit_plan(a)
        err = await a.fail(
            "pvf_plan_apply",
            {"planId": plan_id, "changeKeys": keys, "expectedRevision": rev},
            "APPROVAL_DECLINED",
        )
        assert err["data"]["decision"] == "no_one_to_ask" and "pvf_plan_apply" in err["hint"]
        async with httpx2.AsyncClient() as http:  # the same tool from the pvf page, as the person
            done = await http.post(
                a.srv.base_url + "/api/tools/pvf_plan_apply",
                json={"arguments": {"planId": plan_id, "changeKeys": keys, "expectedRevision": rev}},
                headers=a.srv.ui_headers(),
            )
        assert done.status_code == 200, done.text
        assert done.json()["revision"] == rev + 1


async def test_throwing_away_unsaved_changes_with_an_open_or_close_asks_first(
    archive: Path, tmp_path: Path
) -> None:
    """pvf_archive_close (or _open) with dirtyPolicy 'discard' dropped the unsaved changes — the person's own
    applied edits among them — and their recovery file, with no one asked."""
    seen: list[str] = []

    async def only_edits(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": "pvf_plan_apply" in params.message})

    other = tmp_path / "other.pvf"
    other.write_bytes(archive.read_bytes())
    async with serve(archive, approvals=True, mode="legacy", elicitation_callback=only_edits) as a:
        ws, rev, plan_id, keys = await edit_plan(a)
        await a.call("pvf_plan_apply", {"planId": plan_id, "changeKeys": keys, "expectedRevision": rev})
        info = await a.call("pvf_workspace_info", {})
        assert info["sourceDirty"]
        asked = len(seen)
        await a.fail(
            "pvf_archive_close",
            {"workspaceId": ws, "expectedRevision": info["revision"], "dirtyPolicy": "reject"},
            "UNSAVED_CHANGES",
        )
        assert len(seen) == asked  # nothing to throw away without 'discard': nobody is asked
        for tool, extra in (
            ("pvf_archive_close", {}),
            ("pvf_archive_open", {"path": str(other)}),
        ):
            args = {
                "workspaceId": ws,
                "expectedRevision": info["revision"],
                "dirtyPolicy": "discard",
                **extra,
            }
            await a.fail(tool, args, "APPROVAL_DECLINED")
            assert "throw away the unsaved changes to" in seen[-1] and tool in seen[-1], seen[-1]
        after = await a.call("pvf_workspace_info", {})
        assert after["workspaceId"] == ws and after["sourceDirty"] and after["revision"] == info["revision"]


async def test_forgetting_the_recovery_file_asks_first(archive: Path) -> None:
    """pvf_recovery_discard deleted what a crash had left unsaved with no one asked."""
    import asyncio

    from deskbridge.kinds.pvf import recovery

    async with serve(archive) as a:  # approvals off: the edit that the crash leaves unsaved
        info = await a.ready()
        path = await a.first_script(info["workspaceId"])
        await a.edit(info["workspaceId"], info["revision"], path, "\n[crash]\n`survives`\n")
        rec = recovery.recovery_path(a.srv.app.workspace.service.data_dir, archive)  # type: ignore[union-attr]
        for _ in range(100):
            if rec.exists():
                break
            await asyncio.sleep(0.05)
        assert rec.exists()
    seen: list[str] = []
    async with serve(archive, approvals=True, mode="legacy", elicitation_callback=answer(False, seen)) as a:
        info = await a.ready()
        assert info["recovery"]["available"] is True
        await a.fail("pvf_recovery_discard", {"workspaceId": info["workspaceId"]}, "APPROVAL_DECLINED")
        assert seen and "recovered unsaved changes" in seen[-1], seen
        assert rec.exists() and (await a.call("pvf_workspace_info", {}))["recovery"]["available"] is True


async def test_a_save_as_that_replaces_an_existing_file_asks_first(archive: Path, tmp_path: Path) -> None:
    """With the identity from TARGET_EXISTS, pvf_archive_save_as overwrite replaced any file an agent named
    (a person's notes.txt became archive bytes) with no one asked; a copy to a new path still asks nothing."""
    seen: list[str] = []
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n", "utf-8")
    async with serve(archive, approvals=True, mode="legacy", elicitation_callback=answer(False, seen)) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        exists = await a.fail(
            "pvf_archive_save_as",
            {"workspaceId": ws, "expectedRevision": rev, "path": str(notes)},
            "TARGET_EXISTS",
        )
        assert not seen
        args = {
            "workspaceId": ws,
            "expectedRevision": rev,
            "path": str(notes),
            "overwrite": True,
            "targetIdentity": exists["data"]["identity"],
        }
        await a.fail("pvf_archive_save_as", args, "APPROVAL_DECLINED")
        assert len(seen) == 1 and "replace the existing file" in seen[0] and str(notes) in seen[0], seen
        assert notes.read_text("utf-8") == "precious\n"
        copy = tmp_path / "copy.pvf"
        await a.call("pvf_archive_save_as", {"workspaceId": ws, "expectedRevision": rev, "path": str(copy)})
        assert copy.exists() and len(seen) == 1
