"""Over a real MCP client: a save replaces, adds and removes the content-index rows of the files it changed — no
rebuild, old text gone at once — and the re-keyed index is what the next open of the saved file uses."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pvfws_helpers import serve, service

pytestmark = pytest.mark.anyio


async def _content(a: Any, ws: str, query: str) -> set[str]:
    page = await a.call("pvf_search", {"workspaceId": ws, "query": query, "mode": "content", "limit": 1000})
    assert page["nextCursor"] is None
    return {h["path"] for h in page["hits"]}


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
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [
                    {"path": replaced, "text": header + "[name2]\n\t`Obsidian Marmot`\n"},
                    {"path": added, "text": header + "[name2]\n\t`Obsidian Marmot twin`\n"},
                    {"path": removed, "delete": True},
                ],
            },
        )
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
        svc = service(a)
        index = svc.index
        built_seconds = index.status()["seconds"]
        assert index.state == "ready"
        found = await _content(a, ws, "obsidian MARMOT")
        assert {replaced, added} <= found <= {replaced, added, "stringtable.bin"}
        assert replaced not in await _content(a, ws, old_line)
        assert removed not in await _content(a, ws, gone_line)
        assert index.status()["seconds"] == built_seconds  # refreshed in place, not built again
        assert index.sha256 == svc.engine.workspace.source_identity.sha256
    # the saved file opens with the refreshed index from disk, rows as they were after the save
    async with serve(archive) as a:
        info = await a.ready()
        assert info["index"]["cached"] is True
        ws = info["workspaceId"]
        assert {replaced, added} <= await _content(a, ws, "Obsidian Marmot")
        assert replaced not in await _content(a, ws, old_line)
        assert removed not in await _content(a, ws, gone_line)
