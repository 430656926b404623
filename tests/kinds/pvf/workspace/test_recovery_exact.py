"""The recovery autosave keeps the session's payloads as they are (with the grown classic string table and the
nkpi pool tail): a crash right after a big plan loses nothing, and the recovered files read exactly as they did.
Its text snapshot took seconds per thousand files, in which a crash or a kill during a save lost them all."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pvfws_helpers import Agent, serve, service

from deskbridge.kinds.pvf import recovery
from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio


async def _many_new_strings(a: Agent, count: int) -> tuple[dict[str, str], Path]:
    """One plan giving `count` scripts a new string each (CJK too, so both nkpi pools grow); the texts read
    back after it, and the recovery file once the autosave wrote it."""
    info = await a.ready()
    ws, rev = info["workspaceId"], info["revision"]
    hits = await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": count})
    paths = [h["path"] for h in hits["hits"]][:count]
    edits = []
    for i, path in enumerate(paths):
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        edits.append({"path": path, "text": text + f"\n[recovered]\n`kept {i} 保存 {path}`\n"})
    plan = await a.call("pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits})
    keys = [i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]]
    await a.call("pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev})
    texts = {p: (await a.call("pvf_read_file", {"workspaceId": ws, "path": p}))["text"] for p in paths}
    rec = recovery.recovery_path(
        service(a).data_dir, a.srv.app.workspace.service.engine.workspace.source_path
    )  # type: ignore[union-attr]
    for _ in range(200):
        if rec.exists() and json.loads(rec.read_bytes())["revision"] == rev + 1:
            break
        await asyncio.sleep(0.02)
    return texts, rec


async def test_recovered_files_read_exactly_as_before_the_crash(archive: Path) -> None:
    async with serve(archive) as a:
        texts, rec = await _many_new_strings(a, 12)
        doc = json.loads(rec.read_bytes())
        assert doc["version"] == recovery.VERSION and len(doc["files"]) >= 12
        # the server goes away without saving
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        assert info["recovery"]["available"] is True
        done = await a.recover(ws, rev)
        for path, text in texts.items():
            assert (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"] == text, path
        await a.call(
            "pvf_archive_save", {"workspaceId": ws, "expectedRevision": done["revision"], "waitSeconds": 30}
        )
    reopened = open_archive(archive)  # what was saved reads the same without any session state
    try:
        for path, text in texts.items():
            assert reopened.read_text(path) == text, path
    finally:
        reopened.close()


async def test_recovery_after_other_changes_in_the_new_session_is_refused_with_what_to_do(
    archive: Path,
) -> None:
    async with serve(archive) as a:
        await _many_new_strings(a, 3)
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        done = await a.edit(ws, info["revision"], path, "\n[first]\n`another new string`\n")
        err = await a.fail(
            "pvf_recovery_prepare",
            {"workspaceId": ws, "expectedRevision": done["revision"]},
            "UNSAVED_CHANGES",
        )
        assert "dirtyPolicy" in err["hint"] and "pvf_recovery_prepare" in err["hint"], err
        assert (await a.call("pvf_workspace_info", {}))["recovery"]["available"] is True  # still offered


async def test_a_recovery_file_of_the_text_form_is_still_offered_and_applied(archive: Path) -> None:
    """Version 1, written by earlier releases, kept decompiled text: it compiles again on recovery."""
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        svc = service(a)
        sha = svc.engine.workspace.source_identity.sha256
        rec = recovery.recovery_path(svc.data_dir, archive)
    rec.parent.mkdir(parents=True, exist_ok=True)
    v1 = {
        "version": 1,
        "archive": str(archive),
        "baseSha256": sha,
        "revision": 3,
        "time": 0,
        "files": [{"path": path, "text": text + "\n[old form]\n`from version one`\n"}],
    }
    rec.write_text(json.dumps(v1), "utf-8")
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        assert info["recovery"]["available"] is True
        await a.recover(ws, rev)
        assert (
            "from version one" in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        )


async def test_recovery_after_changes_that_add_no_string_goes_ahead(archive: Path) -> None:
    async with serve(archive) as a:
        texts, _rec = await _many_new_strings(a, 3)
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        other = next(
            h["path"]
            for h in (await a.call("pvf_search", {"workspaceId": ws, "query": ".equ", "limit": 20}))["hits"]
            if h["path"] not in texts
        )
        done = await a.edit(ws, info["revision"], other, "\n[name]\n\t7\n")  # a tag the archive has
        await a.recover(ws, done["revision"])
        for path, text in texts.items():
            assert (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"] == text, path
        assert "\t7\n" in (await a.call("pvf_read_file", {"workspaceId": ws, "path": other}))["text"]
