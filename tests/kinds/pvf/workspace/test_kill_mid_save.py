"""SIGKILL of a real `deskbridge serve` while the save after a plan runs: the archive is the old one or the new
one, never a mix, and no change is lost — either the save finished or the next open offers them all."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters
from pvfws_helpers import serve

from deskbridge.kinds.pvf import recovery
from deskbridge.settings import deskbridge_dirs

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "transport"))
from test_bridge import Serve  # the `serve` subprocess, started and waited for like a person would

pytestmark = pytest.mark.anyio


async def _call(client: Client, name: str, args: dict) -> dict:
    result = await client.call_tool(name, args)
    assert not result.is_error, (name, result.structured_content)
    return result.structured_content


async def test_a_kill_during_the_save_after_a_big_plan_loses_nothing(archive: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "deskbridge", "config", "set", "require_approval", "false"],
        check=True,
        capture_output=True,
        env=dict(os.environ),
    )
    before = archive.read_bytes()
    server = Serve(archive, "--kind", "pvf")
    try:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "deskbridge", "mcp", "--project", str(archive), "--kind", "pvf"],
            env=dict(os.environ),
        )
        async with Client(params) as client:
            for _ in range(600):
                info = await _call(client, "pvf_workspace_info", {})
                if info["open"] and info["lifecycle"] is None:
                    break
                await asyncio.sleep(0.05)
            ws, rev = info["workspaceId"], info["revision"]
            hits = await _call(client, "pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 40})
            paths = [h["path"] for h in hits["hits"]]
            edits = []
            for i, path in enumerate(paths):
                text = (await _call(client, "pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
                edits.append({"path": path, "text": text + f"\n[killed]\n`not lost {i} 保存`\n"})
            plan = await _call(
                client, "pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits}
            )
            page = await _call(client, "pvf_plan_preview", {"planId": plan["planId"], "limit": 200})
            keys = [i["changeKey"] for i in page["items"]]
            await _call(
                client,
                "pvf_plan_apply",
                {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev},
            )
            texts = {
                p: (await _call(client, "pvf_read_file", {"workspaceId": ws, "path": p}))["text"]
                for p in paths
            }
            rec = recovery.recovery_path(deskbridge_dirs().data, archive)
            for _ in range(400):  # the autosave has caught up (a person reading the result, then saving)
                if rec.exists() and json.loads(rec.read_bytes())["revision"] == rev + 1:
                    break
                await asyncio.sleep(0.025)
            await client.call_tool(
                "pvf_archive_save", {"workspaceId": ws, "expectedRevision": rev + 1, "waitSeconds": 0}
            )
            server.proc.send_signal(signal.SIGKILL)
    finally:
        server.proc.kill()
        server.proc.communicate(timeout=20)
    after = archive.read_bytes()
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        if after == before:  # killed before the new archive replaced it: the changes are offered
            assert info["recovery"]["available"] is True, (
                json.loads(rec.read_bytes()) if rec.exists() else None
            )
            await a.recover(ws, rev)
        for path, text in texts.items():
            assert (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"] == text, path
