"""Import, export (direct, 110USextend, 115CN-mod) and version history of the PVF workspace, over a real MCP client
on synthetic archives of both families (the pvfine MCP design's "导入导出另覆盖" list).

These tests call the design's per-kind names (`pvf_import_preview`, `pvf_import_apply {importPlanId,
selectedKeys}`, `pvf_export_preview`, `pvf_export_discard`), which stay accepted as hidden aliases of
`pvf_plan_preview` / `pvf_plan_apply` / `pvf_plan_discard`."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pvfws_helpers import Agent, editor_stream, serve

from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio


async def _script_text(a: Agent, ws: str) -> tuple[str, str]:
    path = await a.first_script(ws)
    return path, (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]


async def test_import_freezes_maps_folders_and_needs_overwrite_keys(archive: Path, tmp_path: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path, text = await _script_text(a, ws)
        folder = tmp_path / "items" / "equipment"
        (folder / "deep").mkdir(parents=True)
        (folder / "deep" / "new_one.equ").write_text(text + "\n[imported]\n`from disk`\n", "utf-8")
        (folder / "notes.str").write_text("k>plain text\n", "utf-8")
        single = tmp_path / "raw.bin"
        single.write_bytes(b"\x00\x01binary")
        over_dir = tmp_path / "over"
        target_dir, name = path.rsplit("/", 1)
        over_dir.mkdir()
        (over_dir / name).write_text(text + "\n[overwritten]\n1\n", "utf-8")
        plan = await a.call(
            "pvf_import_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "sourcePaths": [str(folder)], "targetDir": ""},
        )
        # frozen: changing the source afterwards does not change what is applied
        (folder / "notes.str").write_text("k>changed after prepare\n", "utf-8")
        preview = await a.call("pvf_import_preview", {"importPlanId": plan["importPlanId"], "limit": 200})
        items = {i["changeKey"]: i for i in preview["items"]}
        assert "equipment/deep/new_one.equ" in items and "equipment/notes.str" in items
        assert items["equipment/deep/new_one.equ"]["action"] == "add"
        assert items["equipment/deep/new_one.equ"]["overwrite"] is False
        applied = await a.call(
            "pvf_import_apply",
            {"importPlanId": plan["importPlanId"], "selectedKeys": list(items), "expectedRevision": rev},
        )
        rev = applied["revision"]
        notes = await a.call("pvf_read_file", {"workspaceId": ws, "path": "equipment/notes.str"})
        assert notes["text"] == "k>plain text\n"
        new = await a.call("pvf_read_file", {"workspaceId": ws, "path": "equipment/deep/new_one.equ"})
        assert "from disk" in new["text"]
        # a raw import keeps the bytes
        plan = await a.call(
            "pvf_import_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "sourcePaths": [str(single)],
                "targetDir": target_dir,
                "mode": "raw",
            },
        )
        raw_key = f"{target_dir}/raw.bin"
        await a.call("pvf_import_apply", {"importPlanId": plan["importPlanId"], "selectedKeys": [raw_key]})
        rev += 1
        plan = await a.call(
            "pvf_import_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "sourcePaths": [str(over_dir / name)],
                "targetDir": target_dir,
            },
        )
        preview = await a.call("pvf_import_preview", {"importPlanId": plan["importPlanId"]})
        item = next(i for i in preview["items"] if i["changeKey"] == path)
        assert item["overwrite"] is True and "+[overwritten]" in item["diff"]
        every = [i["changeKey"] for i in preview["items"]]  # with a grown stringtable.bin for classic
        err = await a.fail(
            "pvf_import_apply",
            {"importPlanId": plan["importPlanId"], "selectedKeys": every},
            "INVALID_ARGUMENT",
        )
        assert err["data"]["needOverwrite"] == [path]
        assert (
            "[overwritten]" not in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        )
        await a.call(
            "pvf_import_apply",
            {"importPlanId": plan["importPlanId"], "selectedKeys": every, "overwriteKeys": [path]},
        )
        assert "[overwritten]" in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        info = await a.call("pvf_workspace_info", {})
        assert info["sourceDirty"] is True  # an import never saves the archive


async def test_import_refuses_conflicts_links_special_files_and_bad_paths(
    archive: Path, tmp_path: Path
) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        one, two = tmp_path / "a" / "same.txt", tmp_path / "b" / "SAME.txt"
        for f in (one, two):
            f.parent.mkdir()
            f.write_text("x", "utf-8")
        args = {"workspaceId": ws, "expectedRevision": rev, "targetDir": "etc"}
        err = await a.fail(
            "pvf_import_prepare", {**args, "sourcePaths": [str(one), str(two)]}, "INVALID_ARGUMENT"
        )
        assert err["data"]["conflicts"][0]["target"] == "etc/same.txt"
        link = tmp_path / "link.txt"
        link.symlink_to(one)
        await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(link)]}, "ACCESS_DENIED")
        fifo_dir = tmp_path / "withfifo"
        fifo_dir.mkdir()
        os.mkfifo(fifo_dir / "pipe")
        await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(fifo_dir)]}, "ACCESS_DENIED")
        await a.fail("pvf_import_prepare", {**args, "sourcePaths": ["relative.txt"]}, "INVALID_ARGUMENT")
        await a.fail(
            "pvf_import_prepare",
            {**args, "sourcePaths": [str(one)], "targetDir": "../up"},
            "INVALID_ARGUMENT",
        )
        bad = tmp_path / "latin1.txt"
        bad.write_bytes("caf\xe9".encode("latin-1"))
        await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(bad)]}, "ENCODING_MISMATCH")
        big = tmp_path / "big.bin"
        big.write_bytes(b"\0" * (8 * 1024 * 1024 + 1))
        await a.fail(
            "pvf_import_prepare", {**args, "sourcePaths": [str(big)], "mode": "raw"}, "LIMIT_EXCEEDED"
        )
        await a.fail(
            "pvf_import_prepare",
            {**args, "expectedRevision": rev + 1, "sourcePaths": [str(one)]},
            "STALE_WORKSPACE",
        )


async def test_export_direct_mod_and_stale(archive: Path, tmp_path: Path, family: str) -> None:
    out = tmp_path / "out"
    out.mkdir()
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path, text = await _script_text(a, ws)
        folder = path.rsplit("/", 1)[0]
        # direct export of a selection: a new folder, text where it has a text form
        plan = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": [folder]},
        )
        preview = await a.call("pvf_export_preview", {"exportPlanId": plan["exportPlanId"], "limit": 200})
        assert path in {i["entryKey"] for i in preview["items"]}
        await a.fail(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": [folder]},
            "EXPORT_PLAN_PENDING",
        )
        await a.fail(
            "pvf_export_execute",
            {"exportPlanId": plan["exportPlanId"], "outputParent": str(out)},
            "INVALID_ARGUMENT",
        )
        done = await a.call(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(out),
                "outputName": "direct",
                "requestId": "x1",
            },
        )
        written = out / "direct" / path
        assert done["outputPath"] == str(out / "direct") and written.read_text("utf-8") == text
        # the retry of a published export answers the same result, it does not publish twice
        again = await a.call(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(out),
                "outputName": "direct",
                "requestId": "x1",
            },
        )
        assert again == done
        # the same name again is TARGET_EXISTS, never merged
        plan = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": [path]},
        )
        await a.fail(
            "pvf_export_execute",
            {"exportPlanId": plan["exportPlanId"], "outputParent": str(out), "outputName": "direct"},
            "TARGET_EXISTS",
        )
        await a.call("pvf_export_discard", {"exportPlanId": plan["exportPlanId"]})
        # memory source: the unsaved change as a 110USextend MOD
        applied = await a.edit(ws, rev, path, "\n[mod tag]\n`exported`\n")
        rev = applied["revision"]
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "source": "memory",
                "mode": "mod",
                "format": "110USextend",
                "name": "mymod",
            },
        )
        keys = {
            i["entryKey"]
            for i in (await a.call("pvf_export_preview", {"exportPlanId": plan["exportPlanId"]}))["items"]
        }
        assert f"pvf/{path}" in keys
        warnings = [w["warningId"] for w in plan["warnings"]]
        # another edit makes the snapshot stale
        other = await a.edit(ws, rev, path, "\n[later]\n1\n")
        await a.fail(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(out),
                "acknowledgedWarningIds": warnings,
            },
            "STALE_EXPORT",
        )
        await a.call("pvf_export_discard", {"exportPlanId": plan["exportPlanId"]})
        rev = other["revision"]
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "source": "memory",
                "mode": "mod",
                "format": "110USextend",
                "name": "mymod",
                "version": "2.0",
                "includeDependencies": True,
            },
        )
        done = await a.execute_export(plan, out)
        pkg = out / "mymod-2.0"
        assert done["outputPath"] == str(pkg)
        pack = json.loads((pkg / "pack.json").read_text("utf-8"))
        assert pack["name"] == "mymod" and pack["version"] == "2.0" and pack["priority"] == 100
        assert path in pack["types"] and "[later]" in (pkg / "pvf" / path).read_text("utf-8")
        # 115CN-mod needs modId; it is a zip with mod.json
        await a.fail(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "source": "memory",
                "mode": "mod",
                "format": "115CN-mod",
                "name": "m",
            },
            "INVALID_ARGUMENT",
        )
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "source": "memory",
                "mode": "mod",
                "format": "115CN-mod",
                "name": "cnmod",
                "modId": "com.example.cnmod",
            },
        )
        done = await a.execute_export(plan, out)
        with zipfile.ZipFile(done["outputPath"]) as z:
            manifest = json.loads(z.read("mod.json"))
            assert manifest["modId"] == "com.example.cnmod" and manifest["version"] == "1.0"
            assert "[later]" in z.read(f"pvf/{path}").decode("utf-8")


async def test_export_skips_deletes_refuses_empty_and_skips_tables_without_baseline(
    archive: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        plan = await a.call(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "delete": True}]},
        )
        keys = [
            i["changeKey"] for i in (await a.call("pvf_edit_preview", {"planId": plan["planId"]}))["items"]
        ]
        rev = (await a.call("pvf_edit_apply", {"planId": plan["planId"], "changeKeys": keys}))["revision"]
        err = await a.fail(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "source": "memory",
                "mode": "mod",
                "format": "110USextend",
                "name": "del",
            },
            "INVALID_ARGUMENT",
        )
        assert err["data"]["skippedDeletes"][0]["path"] == path
        # direct export of a deletion writes the content before it
        plan = await a.call(
            "pvf_export_prepare", {"workspaceId": ws, "expectedRevision": rev, "source": "memory"}
        )
        done = await a.execute_export(plan, out, outputName="before")
        assert (Path(done["outputPath"]) / path).exists()
        # a selection holding a .lst has no baseline: skipped with a warning, never written whole
        lists = (await a.call("pvf_list_registries", {"workspaceId": ws}))["registries"]
        lst = next(r["path"] for r in lists if "n_string" not in r["path"])
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "scopes": [lst, lst.rsplit("/", 1)[0]],
                "mode": "mod",
                "format": "110USextend",
                "name": "sel",
            },
        )
        assert any("no baseline" in w["message"] for w in plan["warnings"])
        preview = await a.call("pvf_export_preview", {"exportPlanId": plan["exportPlanId"], "limit": 200})
        assert f"merge/{lst}" not in {i["entryKey"] for i in preview["items"]}
        # unacknowledged warnings refuse the run
        await a.fail(
            "pvf_export_execute",
            {"exportPlanId": plan["exportPlanId"], "outputParent": str(out)},
            "INVALID_ARGUMENT",
        )


async def test_history_records_saves_and_feeds_commit_exports(
    archive: Path, tmp_path: Path, deskbridge_home: Path
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[hist]\n`first save`\n")
        await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
        hist = await a.call("pvf_history", {"workspaceId": ws})
        assert hist["total"] == 1
        commit = hist["commits"][0]
        assert commit["source"] == "mcp" and path in {f["path"] for f in commit["files"]}
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": applied["revision"],
                "source": "commit",
                "commitId": commit["id"],
                "mode": "mod",
                "format": "110USextend",
                "name": "fromcommit",
            },
        )
        done = await a.execute_export(plan, out)
        assert "first save" in (Path(done["outputPath"]) / "pvf" / path).read_text("utf-8")
        work = await a.call(
            "pvf_export_prepare",
            {"workspaceId": ws, "expectedRevision": applied["revision"], "source": "working"},
        )
        assert work["summary"]["items"] >= 1
    log = subprocess.run(
        [sys.executable, "-m", "deskbridge", "pvf", "log", str(archive)],
        capture_output=True,
        text=True,
        env={**os.environ, "DESKBRIDGE_HOME": str(deskbridge_home)},
        timeout=60,
    )
    assert log.returncode == 0, log.stderr
    assert commit["id"] in log.stdout and path in log.stdout
    reopened = open_archive(archive)
    assert "first save" in reopened.read_text(path)
    reopened.close()


async def test_unsaved_changes_are_autosaved_and_offered_after_a_crash(archive: Path) -> None:
    from deskbridge.kinds.pvf import recovery

    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        await a.edit(ws, info["revision"], path, "\n[crash]\n`survives`\n")
        svc = a.srv.app.workspace.service  # type: ignore[union-attr]
        rec = recovery.recovery_path(svc.data_dir, archive)
        for _ in range(100):
            if rec.exists():
                break
            await asyncio.sleep(0.05)
        assert rec.exists()
        # the server goes away without saving (the recovery file is what a crash leaves behind)
    async with serve(archive) as a:
        info = await a.ready()
        assert info["recovery"]["available"] is True and info["recovery"]["files"] >= 1
        ws, rev = info["workspaceId"], info["revision"]
        assert "survives" not in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        plan = await a.call("pvf_recovery_prepare", {"workspaceId": ws, "expectedRevision": rev})
        keys = [
            i["changeKey"] for i in (await a.call("pvf_edit_preview", {"planId": plan["planId"]}))["items"]
        ]
        applied = await a.call("pvf_edit_apply", {"planId": plan["planId"], "changeKeys": keys})
        assert "survives" in (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
        for _ in range(100):
            if not rec.exists():
                break
            await asyncio.sleep(0.05)
        assert not rec.exists()  # saved: nothing left to recover
    async with serve(archive) as a:
        info = await a.ready()
        assert info["recovery"] is None
        await a.call("pvf_recovery_discard", {"workspaceId": info["workspaceId"]})


async def test_export_refuses_while_an_editor_holds_a_draft(archive: Path) -> None:
    import httpx2

    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        base = a.srv.base_url + "/api/editors"
        async with (
            httpx2.AsyncClient(headers=a.srv.ui_headers(), timeout=10) as ui,
            editor_stream(a, ui, "tab-x"),
        ):
            sub = a.srv.app.events.subscribe("ui")

            async def answer() -> None:
                async for event in sub:
                    if event.data.get("event") == "prepare":
                        await ui.post(
                            f"{base}/ack",
                            json={
                                "operationId": event.data["operationId"],
                                "clientId": "tab-x",
                                "hasDrafts": True,
                            },
                        )
                        return

            responder = asyncio.ensure_future(answer())
            await a.fail(
                "pvf_export_prepare",
                {"workspaceId": ws, "expectedRevision": rev, "source": "selection", "scopes": [""]},
                "UI_DRAFT_PENDING",
            )
            await responder
            sub.close()


@pytest.mark.security
async def test_import_never_reads_credentials_or_the_mcp_token(
    archive: Path, tmp_path: Path, deskbridge_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY", "utf-8")
    monkeypatch.setenv("HOME", str(home))
    async with serve(archive) as a:
        info = await a.ready()
        args = {"workspaceId": info["workspaceId"], "expectedRevision": info["revision"], "mode": "raw"}
        for source in (home / ".ssh", home / ".ssh" / "id_ed25519", deskbridge_home / "config" / "token"):
            err = await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(source)]}, "ACCESS_DENIED")
            assert "PRIVATE" not in str(err)
        # a folder that holds a link to a credential is refused too (links are never followed)
        folder = tmp_path / "innocent"
        folder.mkdir()
        (folder / "key").symlink_to(home / ".ssh" / "id_ed25519")
        await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(folder)]}, "ACCESS_DENIED")


async def test_leaving_out_a_dependency_needs_its_warning_acknowledged(archive: Path, tmp_path: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[dep]\n1\n")
        plan = await a.call(
            "pvf_export_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": applied["revision"],
                "source": "memory",
                "mode": "mod",
                "format": "110USextend",
                "name": "deps",
                "includeDependencies": True,
            },
        )
        items = (await a.call("pvf_export_preview", {"exportPlanId": plan["exportPlanId"], "limit": 200}))[
            "items"
        ]
        script = next(i for i in items if i["entryKey"] == f"pvf/{path}")
        assert script["requires"] and all(
            r.startswith("merge/") and r.endswith(".str") for r in script["requires"]
        )
        plan_warnings = [w["warningId"] for w in plan["warnings"]]
        err = await a.fail(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(tmp_path),
                "selectedEntryKeys": [script["entryKey"]],
                "acknowledgedWarningIds": plan_warnings,
            },
            "INVALID_ARGUMENT",
        )
        dep_ids = err["data"]["unacknowledgedWarningIds"]
        done = await a.call(
            "pvf_export_execute",
            {
                "exportPlanId": plan["exportPlanId"],
                "outputParent": str(tmp_path),
                "selectedEntryKeys": [script["entryKey"]],
                "acknowledgedWarningIds": plan_warnings + dep_ids,
            },
        )
        assert done["files"] == 1 and not (Path(done["outputPath"]) / "merge").exists()


@pytest.mark.security
async def test_neither_import_nor_open_reads_the_server_record_or_a_credential(
    archive: Path, tmp_path: Path, deskbridge_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server record in the runtime folder holds the UI secret: an agent that imported it (one approval of an
    innocent-looking binary add) could read it back and from then on answer its own approval requests.
    pvf_archive_open read any file and named its first 16 bytes in the error (~/.ssh keys, the token)."""
    from deskbridge.settings import deskbridge_dirs

    run = deskbridge_dirs().run
    run.mkdir(parents=True, exist_ok=True)
    record = run / "server-1.json"
    record.write_text('{"uiSecret": "SECRET-OF-THE-UI"}', "utf-8")
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY", "utf-8")
    monkeypatch.setenv("HOME", str(home))
    async with serve(archive) as a:
        info = await a.ready()
        args = {"workspaceId": info["workspaceId"], "expectedRevision": info["revision"], "mode": "raw"}
        for source in (record, run):
            err = await a.fail("pvf_import_prepare", {**args, "sourcePaths": [str(source)]}, "ACCESS_DENIED")
            assert "SECRET" not in str(err)
        for target in (record, home / ".ssh" / "id_ed25519", deskbridge_home / "config" / "token"):
            err = await a.fail(
                "pvf_archive_open",
                {
                    "path": str(target),
                    "expectedWorkspaceEpoch": info["workspaceEpoch"],
                    "workspaceId": info["workspaceId"],
                    "expectedRevision": info["revision"],
                },
                "ACCESS_DENIED",
            )
            assert "never opened" in err["message"] and "first bytes" not in str(err), err
        after = await a.call("pvf_workspace_info", {})
        assert after["workspaceId"] == info["workspaceId"] and after["sourcePath"] == str(archive)
