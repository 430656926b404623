"""On 110US (the page-guarded nkpi variant) a plain string `set` in a `.pvf.js` script registers a `.str` entry
and writes a type-8 reference to it, as pvfine does; the `.str` change is linked to the script change that needs
it (`requires`). Over a real MCP client: run → preview → apply → save → reopen → the reference resolves."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from pvfws_helpers import serve

from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio

SCRIPT = """
const out = [];
for (const f of pvf.glob("equipment/**/*.equ").slice(0, 2)) {
  const d = f.parse();
  d.set("deskbridge note", "Hello 110US", {create: true});
  d.setStrValue("deskbridge inline", "kept inline", {create: true});
  const v = d.get("deskbridge note");
  out.push({path: f.path, value: v, text: typeof v === "object" ? pvf.getOriStrValue(v.value) : v, inline: d.get("deskbridge inline")});
  f.write(d);
}
pvf.log(JSON.stringify(out));
"""


async def test_a_plain_string_on_110us_becomes_a_str_entry_and_a_type_8_reference(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    archive = tmp_path / "Script.pvf"
    shutil.copyfile(archives["paged"], archive)
    keys = Path(f"{archives['paged']}.keys.json")
    async with serve(None) as a:
        epoch = (await a.call("pvf_workspace_info", {}))["workspaceEpoch"]
        await a.call(
            "pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": epoch, "keyFile": str(keys)}
        )
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        st = await a.run_script(ws, rev, SCRIPT)
        assert st["state"] == "succeeded", st.get("error")
        got = json.loads(st["log"]["entries"][-1]["text"])
        assert len(got) == 2
        refs = {g["value"]["value"] for g in got}
        assert len(refs) == 1  # one entry for one text, however many files use it
        ref = refs.pop()
        table, key = re.fullmatch(r"<(\d+)::(pvfjs_\d+)>", ref).groups()  # type: ignore[union-attr]
        assert all(g["value"] == {"type": "typed", "code": 8, "value": ref} for g in got)
        assert all(g["text"] == "Hello 110US" for g in got)  # resolves within the run already
        assert all(g["inline"] == "kept inline" for g in got)  # setStrValue still writes an inline string

        items = (await a.call("pvf_plan_preview", {"planId": st["planId"], "limit": 200}))["items"]
        by_key = {i["changeKey"]: i for i in items}
        str_files = [k for k in by_key if k.endswith(".str")]
        assert len(str_files) == 1 and f"+{key}>Hello 110US" in by_key[str_files[0]]["diff"]
        scripts = [g["path"] for g in got]
        assert all(by_key[p]["requires"] == str_files for p in scripts)
        # the script changes without the .str entry would point at nothing: refused unless acknowledged
        err = await a.fail(
            "pvf_plan_apply",
            {"planId": st["planId"], "changeKeys": scripts, "expectedRevision": rev},
            "INVALID_ARGUMENT",
        )
        assert str_files[0] in json.dumps(err["data"]["warnings"])
        await a.call(
            "pvf_plan_apply", {"planId": st["planId"], "changeKeys": list(by_key), "expectedRevision": rev}
        )
        await a.call("pvf_archive_save", {"workspaceId": ws})
        await a.call("pvf_archive_close", {"workspaceId": ws})

    again = open_archive(archive, keys=keys)
    try:
        assert again.refs().lookup(int(table), key) == "Hello 110US"
        text = again.read_text(scripts[0])
        assert f"{{8=`{ref}`}}" in text and "`kept inline`" in text
    finally:
        again.close()


async def test_other_archives_keep_a_plain_string_inline(archives: dict[str, Path], tmp_path: Path) -> None:
    archive = tmp_path / "Script.pvf"
    shutil.copyfile(archives["nkpi"], archive)
    async with serve(archive) as a:
        info = await a.ready()
        st = await a.run_script(info["workspaceId"], info["revision"], SCRIPT)
        assert st["state"] == "succeeded", st.get("error")
        got = json.loads(st["log"]["entries"][-1]["text"])
        assert all(g["value"] == "Hello 110US" for g in got)
        items = (await a.call("pvf_plan_preview", {"planId": st["planId"], "limit": 200}))["items"]
        assert not [i for i in items if i["changeKey"].endswith(".str")]
