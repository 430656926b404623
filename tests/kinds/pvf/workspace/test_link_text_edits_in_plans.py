"""Editing the text of a string link (`<id::key`…`>`) edits that key's `.str` entry (pvfVSCode's behaviour).
In a workspace the `.str` change is part of the plan — previewed, linked to the file that needs it, and gone
with a discarded plan — never staged into the archive behind the plan's back."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from pvfws_helpers import serve

from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio

LINK = re.compile(r"<(\d+)::(name_\d+)`([^`]*)`>")


def _linked(archive: Path) -> tuple[str, str, re.Match[str]]:
    ar = open_archive(archive)
    try:
        for p in ar.paths():
            if p.endswith(".equ"):
                text = ar.read_text(p)
                m = LINK.search(text)
                if m:
                    return p, text, m
    finally:
        ar.close()
    raise AssertionError("no linked script in the synthetic archive")


@pytest.fixture
def classic(archives: dict[str, Path], tmp_path: Path) -> Path:
    dest = tmp_path / "Script.pvf"
    shutil.copyfile(archives["classic"], dest)
    return dest


async def test_a_link_text_edit_plans_its_str_change_and_a_discard_leaves_the_str_alone(
    classic: Path,
) -> None:
    path, text, m = _linked(classic)
    async with serve(classic) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        assert m.group(0) in text, (m.group(0), text[:600])
        edited = text.replace(m.group(0), f"<{m.group(1)}::{m.group(2)}`新的名字`>")
        plan = await a.call(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": edited}]},
        )
        items = (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        keys = {i["changeKey"]: i for i in items}
        strs = [k for k in keys if k.endswith(".str")]
        assert len(strs) == 1, keys
        assert "新的名字" in (keys[strs[0]].get("diff") or "")
        assert path not in keys  # its bytes hold the link's key only: the edit is the .str entry
        # nothing reached the workspace before apply
        before = await a.call("pvf_read_file", {"workspaceId": ws, "path": strs[0]})
        assert "新的名字" not in before["text"]
        await a.call("pvf_plan_discard", {"planId": plan["planId"]})
        after = await a.call("pvf_read_file", {"workspaceId": ws, "path": strs[0]})
        assert after["text"] == before["text"]
        assert (await a.call("pvf_workspace_info", {}))["revision"] == rev

        # applied together, both land, and a save writes both
        plan = await a.call(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": edited}]},
        )
        every = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        await a.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": every, "expectedRevision": rev}
        )
        now = await a.call("pvf_read_file", {"workspaceId": ws, "path": strs[0]})
        assert f"{m.group(2)}>新的名字" in now["text"]
        assert "新的名字" in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]


async def test_a_prepare_that_fails_after_a_link_edit_leaves_the_str_file_as_it_was(classic: Path) -> None:
    path, text, m = _linked(classic)
    async with serve(classic) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        edited = text.replace(m.group(0), f"<{m.group(1)}::{m.group(2)}`新的名字`>")
        str_path = "equipment/equipment.chn.str"
        before = (await a.call("pvf_read_file", {"workspaceId": ws, "path": str_path}))["text"]
        edits = [{"path": path, "text": edited}, {"path": "equipment/broken.equ", "text": "#PVF_File\n`open"}]
        await a.fail(
            "pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits}, "SCRIPT_SYNTAX"
        )
        after = (await a.call("pvf_read_file", {"workspaceId": ws, "path": str_path}))["text"]
        assert after == before
