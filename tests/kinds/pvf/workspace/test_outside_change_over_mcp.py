"""Another program replacing the open archive (`os.replace` over it, as a tool saving does) while `deskbridge serve`
has it open, seen by a real MCP client over HTTP: with nothing unsaved the workspace reloads the new file and
says so; with unsaved changes every answer, and the status tool, names the conflict and the way out."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx2
import pytest
from pvfws_helpers import serve

from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio


def replace_from_outside(archive: Path, path: str, text: str) -> None:
    """What another tool saving the archive does: write a new file beside it, rename it over the archive."""
    other = archive.with_name("other-tool.pvf")
    shutil.copyfile(archive, other)
    ar = open_archive(other)
    ar.stage_text(path, text)
    ar.save()
    ar.close()
    os.replace(other, archive)


async def test_a_clean_workspace_reloads_an_archive_replaced_on_disk(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        before = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        replace_from_outside(archive, path, before["text"] + "\n[outside]\n`theirs`\n")

        # The next call notices (one stat), reloads the file (nothing here was unsaved) and says so: the handle
        # the caller holds is the old file's, so the read is refused as stale, naming the new workspace.
        err = await a.fail("pvf_read_file", {"workspaceId": ws, "path": path}, "STALE_WORKSPACE")
        change = err["data"]["externalChange"]
        assert change["reloaded"] is True and change["path"] == str(archive)
        assert "changed on disk" in change["message"] and "reloaded" in change["message"]
        new_ws = change["workspaceId"]
        assert new_ws != ws and new_ws in change["hint"]

        after = await a.call("pvf_read_file", {"workspaceId": new_ws, "path": path})
        assert "theirs" in after["text"]
        assert "externalChange" not in after  # told once; the workspace is the file again
        info = await a.call("pvf_workspace_info", {})
        assert info["workspaceId"] == new_ws and info["externalChange"] is None


async def test_unsaved_changes_over_a_replaced_archive_warn_in_every_answer(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[z]\n`mine`\n")
        replace_from_outside(archive, path, "[outside]\n`theirs`\n")

        read = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        assert "mine" in read["text"]  # nothing is thrown away on its own
        change = read["externalChange"]
        assert change["reloaded"] is False and change["unsavedFiles"] >= 1
        assert str(archive) in change["message"] and "unsaved" in change["message"]
        assert "pvf_archive_save_as" in change["hint"] and "discard" in change["hint"]
        listing = await a.call("pvf_list_dir", {"workspaceId": ws, "path": ""})
        assert listing["externalChange"]["message"] == change["message"]
        info = await a.call("pvf_workspace_info", {})
        assert info["externalChange"]["message"] == change["message"] and info["workspaceId"] == ws
        assert info["changedFiles"] == change["unsavedFiles"]
        err = await a.fail(
            "pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]}, "SOURCE_CHANGED"
        )
        assert err["data"]["externalChange"]["message"] == change["message"]

        # The browser asks through the same App: its tool calls and the status route say it too.
        async with httpx2.AsyncClient(base_url=a.srv.base_url, headers=a.srv.ui_headers()) as http:
            status = (await http.get("/api/status")).json()
            assert status["workspace"]["externalChange"]["message"] == change["message"]

        # The way out the hint names: reopen discarding the unsaved changes; then the warning is gone.
        reopened = await a.call(
            "pvf_archive_open",
            {
                "path": str(archive),
                "workspaceId": ws,
                "expectedRevision": applied["revision"],
                "dirtyPolicy": "discard",
            },
        )
        assert reopened["state"] == "succeeded"
        new_ws = reopened["result"]["workspaceId"]
        fresh = await a.call("pvf_read_file", {"workspaceId": new_ws, "path": path})
        assert "theirs" in fresh["text"] and "externalChange" not in fresh


async def test_a_touched_archive_is_not_a_change(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        st = archive.stat()
        os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # same bytes, new mtime
        listing = await a.call("pvf_list_dir", {"workspaceId": ws, "path": ""})
        assert "externalChange" not in listing
        info = await a.call("pvf_workspace_info", {})
        assert info["workspaceId"] == ws and info["externalChange"] is None


async def test_a_reload_the_engine_refuses_is_said_and_tried_again(archive: Path) -> None:
    """Nothing unsaved, but a plan is waiting: reopening is refused as for pvf_archive_open (PLAN_PENDING), so
    the answers say why it was not reloaded; once the plan is gone the next call reloads."""
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": info["revision"],
                "edits": [{"path": path, "text": text + "\n[mine]\n`plan`\n"}],
            },
        )
        replace_from_outside(archive, path, text + "\n[outside]\n`theirs`\n")
        listing = await a.call("pvf_list_dir", {"workspaceId": ws, "path": ""})
        change = listing["externalChange"]
        assert change["reloaded"] is False and change["unsavedFiles"] == 0
        assert "could not be reloaded" in change["message"] and "plan" in change["message"]
        await a.call("pvf_plan_discard", {"planId": plan["planId"]})
        err = await a.fail("pvf_read_file", {"workspaceId": ws, "path": path}, "STALE_WORKSPACE")
        new_ws = err["data"]["externalChange"]["workspaceId"]
        after = await a.call("pvf_read_file", {"workspaceId": new_ws, "path": path})
        assert "theirs" in after["text"]
