"""Over a real MCP client: a save replaces, adds and removes the content-index rows of the files it changed — no
rebuild, old text gone at once — and the re-keyed index is what the next open of the saved file uses. The rows
are replaced after the save has answered; until then search reads those files directly."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pvfws_helpers import serve, service

pytestmark = pytest.mark.anyio


async def _content(a: Any, ws: str, query: str) -> set[str]:
    page = await a.call("pvf_search", {"workspaceId": ws, "query": query, "mode": "content", "limit": 1000})
    assert page["nextCursor"] is None
    return {h["path"] for h in page["hits"]}


async def _refreshed(a: Any) -> dict[str, Any]:
    """`pvf_workspace_info` once the index holds every saved file (the refresh after a save has ended)."""
    for _ in range(600):
        info = await a.call("pvf_workspace_info", {})
        if info["index"]["unindexedFiles"] == 0 and not any(
            t["label"] == "pvf-index-refresh" for t in info["runningTasks"]
        ):
            return info
        await asyncio.sleep(0.05)
    raise AssertionError(f"the index refresh never ended: {info}")


async def _edit_and_save(a: Any, ws: str, rev: int, edits: list[dict[str, Any]]) -> None:
    plan = await a.call("pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits})
    preview = await a.call("pvf_edit_preview", {"planId": plan["planId"]})
    applied = await a.call(
        "pvf_edit_apply",
        {
            "planId": plan["planId"],
            "changeKeys": [i["changeKey"] for i in preview["items"]],
            "expectedRevision": rev,
        },
    )
    await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})


async def test_a_save_replaces_adds_and_removes_index_rows(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        hits = await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 2})
        replaced, removed = (h["path"] for h in hits["hits"])
        old = (await a.call("pvf_read_file", {"workspaceId": ws, "path": replaced}))["text"]
        gone = (await a.call("pvf_read_file", {"workspaceId": ws, "path": removed}))["text"]
        old_line = next(line.strip() for line in old.splitlines() if "name_" in line)
        gone_line = next(line.strip() for line in gone.splitlines() if "name_" in line)
        assert replaced in await _content(a, ws, old_line)
        assert removed in await _content(a, ws, gone_line)
        header = "#PVF_File\n" if old.startswith("#PVF_File") else ""
        added = "equipment/added_by_test.equ"
        await _edit_and_save(
            a,
            ws,
            rev,
            [
                {"path": replaced, "text": header + "[name2]\n\t`Obsidian Marmot`\n"},
                {"path": added, "text": header + "[name2]\n\t`Obsidian Marmot twin`\n"},
                {"path": removed, "delete": True},
            ],
        )
        svc = service(a)
        index = svc.index
        built_seconds = index.status()["seconds"]
        assert index.state == "ready"
        found = await _content(a, ws, "obsidian MARMOT")
        assert {replaced, added} <= found <= {replaced, added, "stringtable.bin"}
        assert replaced not in await _content(a, ws, old_line)
        assert removed not in await _content(a, ws, gone_line)
        await _refreshed(a)
        assert index.status()["seconds"] == built_seconds  # refreshed in place, not built again
        assert index.sha256 == svc.engine.workspace.source_identity.sha256
        assert replaced not in await _content(a, ws, old_line)
        assert {replaced, added} <= await _content(a, ws, "obsidian MARMOT")
    # the saved file opens with the refreshed index from disk, rows as they were after the save
    async with serve(archive) as a:
        info = await a.ready()
        assert info["index"]["cached"] is True
        ws = info["workspaceId"]
        assert {replaced, added} <= await _content(a, ws, "Obsidian Marmot")
        assert replaced not in await _content(a, ws, old_line)
        assert removed not in await _content(a, ws, gone_line)


async def test_search_is_right_while_the_index_takes_in_a_save_and_a_close_waits_for_it(
    archive: Path,
) -> None:
    """The save answers before the index holds its files; search reads them directly meanwhile (new text
    found, old text not), `unindexedFiles` says so; the refresh then takes them in, and closing right after
    a save finishes the refresh, so the next open of the saved file uses the index from disk."""
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        hit = (await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1}))["hits"][0][
            "path"
        ]
        old = (await a.call("pvf_read_file", {"workspaceId": ws, "path": hit}))["text"]
        old_line = next(line.strip() for line in old.splitlines() if "name_" in line)
        header = "#PVF_File\n" if old.startswith("#PVF_File") else ""
        svc = service(a)
        svc._refresh_lock.acquire()  # the refresh task starts and waits here: the save must not wait for it
        try:
            await _edit_and_save(a, ws, rev, [{"path": hit, "text": header + "[name2]\n\t`Quartz Wombat`\n"}])
            info = await a.call("pvf_workspace_info", {})
            assert info["index"]["unindexedFiles"] >= 1  # the file (and stringtable.bin when it grew)
            assert svc.index.sha256 != svc.engine.workspace.source_identity.sha256  # not re-keyed yet
            assert hit in await _content(a, ws, "quartz wombat")
            assert hit not in await _content(a, ws, old_line)
        finally:
            svc._refresh_lock.release()
        await _refreshed(a)
        assert svc.index.sha256 == svc.engine.workspace.source_identity.sha256
        assert hit in await _content(a, ws, "quartz wombat")
        assert hit not in await _content(a, ws, old_line)
        info = await a.call("pvf_workspace_info", {})
        svc._start_index_refresh = lambda *args: (
            None
        )  # this save's refresh never starts: the close must do it
        await _edit_and_save(
            a, ws, info["revision"], [{"path": hit, "text": header + "[name2]\n\t`Basalt Quokka`\n"}]
        )
        info = await a.call("pvf_workspace_info", {})
        assert info["index"]["unindexedFiles"] >= 1
        await a.call(
            "pvf_archive_close",
            {"workspaceId": ws, "expectedRevision": info["revision"], "dirtyPolicy": "reject"},
        )
        assert svc._unindexed == {}
    async with serve(archive) as a:
        info = await a.ready()
        assert info["index"]["cached"] is True  # the close finished the refresh: no rebuild
        ws = info["workspaceId"]
        assert hit in await _content(a, ws, "basalt quokka")
        assert hit not in await _content(a, ws, "quartz wombat")
