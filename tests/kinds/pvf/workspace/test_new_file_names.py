"""New archive files get safe names on every path that creates one (an agent's edit plan, `pvf add`, the library).

`pvf_edit_prepare` and `deskbridge pvf add` used to store `../evil.equ`, `a/../../evil.equ` or `c:/evil.equ` as
written (only an import checked its names): the game cannot use such an entry, and a tool that extracts the
archive — ours refuses, others do not — writes it outside its folder.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pvfws_helpers import serve

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import open_archive

pytestmark = [pytest.mark.anyio, pytest.mark.security]

HOSTILE = [
    "../evil.equ",
    "a/../../evil.equ",
    "equipment/./x.equ",
    "c:/evil.equ",
    "equipment//x.equ",
    "con.equ",
]


async def test_an_edit_plan_refuses_a_new_file_with_an_unsafe_name(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        for name in HOSTILE:
            err = await a.fail(
                "pvf_edit_prepare",
                {
                    "workspaceId": ws,
                    "expectedRevision": rev,
                    "edits": [{"path": name, "text": "[name]\n`x`\n"}],
                },
                "INVALID_ARGUMENT",
            )
            assert "not a valid archive path" in err["message"], err
        # an ordinary new file is still fine
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": "equipment/qa/new_one.equ", "text": "[name]\n`x`\n"}],
            },
        )
        assert plan["counts"] == {"add": 1}


def test_pvf_add_refuses_an_unsafe_name_and_leaves_the_archive_alone(archive: Path, tmp_path: Path) -> None:
    content = tmp_path / "x.bin"
    content.write_bytes(b"hello")
    before = archive.read_bytes()
    for name in HOSTILE:
        proc = subprocess.run(
            [sys.executable, "-m", "deskbridge", "pvf", "add", "--raw", str(archive), name, str(content)],
            capture_output=True,
            text=True,
            env=dict(os.environ),
        )
        assert proc.returncode != 0 and "not a valid archive path" in proc.stderr, (name, proc.stderr)
    assert archive.read_bytes() == before


def test_the_library_never_stages_a_new_dot_component(archive: Path) -> None:
    ar = open_archive(archive)
    try:
        for name in ("../evil.equ", "a/../../evil.equ", "a/./b.equ", "a//b.equ"):
            with pytest.raises(BridgeError) as refused:
                ar.stage(name, b"x")
            assert "not a valid archive path" in refused.value.message
        assert not any(".." in k for k in ar.staged())
        ar.stage("equipment/qa/fine.equ", b"x")  # an ordinary new name
        assert "equipment/qa/fine.equ" in ar.staged()
    finally:
        ar.close()


def hostile_copy(archive: Path, dest: Path) -> Path:
    """`archive` with entries other tools may write (`../x`, `a/../../x`), saved by our own writer: the overlay
    is filled directly, as `stage` refuses such names now."""
    ar = open_archive(archive)
    try:
        for name in ("../escaped.txt", "deep/../../../escaped2.txt"):
            ar._overlay[name] = b"written outside"
            ar._overlay_names[name] = name
        ar.save_copy(dest)
    finally:
        ar.close()
    return dest


@pytest.mark.parametrize("mode", ["direct", "110USextend", "115CN-mod"])
async def test_an_export_never_writes_a_hostile_entry_outside_its_folder(
    archive: Path, tmp_path: Path, mode: str
) -> None:
    hostile = hostile_copy(archive, tmp_path / "hostile.pvf")
    out = tmp_path / "out" / "parent"
    out.mkdir(parents=True)
    async with serve(hostile) as a:
        info = await a.ready()
        args: dict = {
            "workspaceId": info["workspaceId"],
            "expectedRevision": info["revision"],
            "scopes": [""],
        }
        if mode == "direct":
            args["mode"] = "direct"
        else:
            args.update(mode="mod", format=mode, name="pkg", modId="qa.pkg")
        plan = await a.call("pvf_export_prepare", args)
        run = {
            "exportPlanId": plan["exportPlanId"],
            "outputParent": str(out),
            "waitSeconds": 30,
            "acknowledgedWarningIds": [w["warningId"] for w in plan["warnings"]],
        }
        if mode == "direct":
            run["outputName"] = "files"
        err = await a.fail("pvf_export_execute", run, "ACCESS_DENIED")
        assert "cannot be extracted safely" in err["message"]
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*escaped*"))
    assert written == [], written
    assert list(out.iterdir()) == []  # and no half-written package
