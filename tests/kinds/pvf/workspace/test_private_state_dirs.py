"""Over a real MCP client: what deskbridge keeps of an archive outside it (the history's blobs — the archive's own
files —, the content index with every word, the verified identities naming the archives) sits in owner-only
folders, so another local user cannot read it whatever the umask made of the parent folders."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from pvfws_helpers import serve

from deskbridge.settings import deskbridge_dirs

pytestmark = [pytest.mark.anyio, pytest.mark.security]


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
async def test_history_index_and_identities_are_owner_only(archive: Path) -> None:
    old = os.umask(0o022)  # a usual umask: folders made with it are readable by everyone
    try:
        async with serve(archive) as a:
            info = await a.ready()
            ws, rev = info["workspaceId"], info["revision"]
            path = await a.first_script(ws)
            applied = await a.edit(ws, rev, path, "\n[qa7]\n1\n")
            await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
    finally:
        os.umask(old)
    dirs = deskbridge_dirs()
    history = dirs.data / "pvf-history"
    index = dirs.cache / "pvf-index"
    assert any(history.rglob("blobs/*")), "the save recorded its blobs"
    assert any(index.glob("*.pvfidx")), "the content index was built"
    for folder in (history, index):
        assert _mode(folder) & 0o077 == 0, f"{folder} is {oct(_mode(folder))}"
