"""A `.pvf.js` run sees the workspace as the person sees it, unsaved changes included. On nkpi an unsaved edit
can add strings to the archive's name pools; the script worker opens the archive afresh, so it must be given
those strings too, or the edited file reads as garbage (or not as a script at all)."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from pvfws_helpers import Agent, serve

pytestmark = pytest.mark.anyio

NEW_TEXT = "deskbridge unsaved pool string 7f3c"


async def run(a: Agent, ws: str, rev: int, source: str) -> dict[str, Any]:
    started = await a.call("pvf_script_run", {"workspaceId": ws, "expectedRevision": rev, "source": source})
    for _ in range(1200):
        st = await a.call("pvf_script_status", {"taskId": started["taskId"]})
        if st["state"] in ("succeeded", "failed", "cancelled"):
            return st
        await asyncio.sleep(0.05)
    raise AssertionError("the run never finished")


@pytest.mark.parametrize("family", ["classic", "nkpi"])
async def test_a_script_reads_a_file_whose_unsaved_edit_added_new_strings(
    archives: dict[str, Path], tmp_path: Path, family: str
) -> None:
    archive = tmp_path / "Script.pvf"
    shutil.copyfile(archives[family], archive)
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = (await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 1}))["hits"][0][
            "path"
        ]
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        edited = text + f"\n[deskbridge unsaved]\n`{NEW_TEXT}`\n"
        plan = await a.call(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": edited}]},
        )
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        applied = await a.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        )
        source = (
            f"const d = pvf.glob({json.dumps(path)})[0].parse();\n"
            'pvf.log(JSON.stringify(d.get("deskbridge unsaved")));\n'
        )
        st = await run(a, ws, applied["revision"], source)
        assert st["state"] == "succeeded", st.get("error")
        assert json.loads(st["log"]["entries"][-1]["text"]) == NEW_TEXT
