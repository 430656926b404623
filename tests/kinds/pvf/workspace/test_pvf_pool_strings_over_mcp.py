"""Over a real MCP client: an nkpi edit plan that is discarded leaves no string in the saved archive's pools,
while the strings of an applied plan prepared after it are saved and read back (issue 9)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pvfws_helpers import serve

from deskbridge.kinds.pvf.archive.nkpi import open_nkpi

pytestmark = pytest.mark.anyio


def _pools_text(path: Path) -> str:
    with open_nkpi(path) as ar:
        return ar.pools.raw_a().decode("utf-8", "replace") + ar.pools.raw_w().decode("utf-16-le", "replace")


async def test_a_discarded_plan_leaves_no_string_in_the_saved_pools(archives, tmp_path) -> None:
    archive = tmp_path / "Script.pvf"
    shutil.copyfile(archives["nkpi"], archive)
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        plan = await a.prepare_append(ws, rev, path, "\n[g]\n`被丢弃的计划 discarded plan`\n")
        await a.call("pvf_edit_discard", {"planId": plan["planId"]})
        applied = await a.edit(ws, rev, path, "\n[g]\n`应用的计划 applied plan`\n")
        saved = await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
        assert saved["result"]["diskCommitted"] is True, saved
        again = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        assert "`应用的计划 applied plan`" in again["text"] and "discarded" not in again["text"]
    text = _pools_text(archive)
    assert "应用的计划 applied plan" in text
    assert "discarded plan" not in text and "被丢弃的计划" not in text
    with open_nkpi(archive) as ar:
        assert "`应用的计划 applied plan`" in ar.read_text(path)
