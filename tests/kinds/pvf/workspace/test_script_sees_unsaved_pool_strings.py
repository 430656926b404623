"""A `.pvf.js` run sees the workspace as the person sees it, unsaved changes included. On nkpi an unsaved edit
can add strings to the archive's name pools; the script worker opens the archive afresh, so it must be given
those strings too, or the edited file reads as garbage (or not as a script at all)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pvfws_helpers import serve

pytestmark = pytest.mark.anyio

NEW_TEXT = "deskbridge unsaved pool string 7f3c"


@pytest.mark.parametrize("family", ["classic", "nkpi"])
async def test_a_script_reads_a_file_whose_unsaved_edit_added_new_strings(
    archives: dict[str, Path], tmp_path: Path, family: str
) -> None:
    archive = tmp_path / "Script.pvf"
    shutil.copyfile(archives[family], archive)
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, rev, path, f"\n[deskbridge unsaved]\n`{NEW_TEXT}`\n")
        source = (
            f"const d = pvf.glob({json.dumps(path)})[0].parse();\n"
            'pvf.log(JSON.stringify(d.get("deskbridge unsaved")));\n'
        )
        st = await a.run_script(ws, applied["revision"], source)
        assert st["state"] == "succeeded", st.get("error")
        assert json.loads(st["log"]["entries"][-1]["text"]) == NEW_TEXT
