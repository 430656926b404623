"""The PVF workspace served by `deskbridge serve`, driven by a real MCP client over HTTP, on synthetic archives of
both families: the lifecycle (open/close/save/save-as with every error path of the pvfine MCP design), reads,
search, edit plans, links and registries."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import httpx2
import pytest
from pvfws_helpers import editor_stream, serve, service

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import file_identity
from deskbridge.core.tools import CallContext
from deskbridge.kinds.pvf.archive import open_archive

pytestmark = pytest.mark.anyio
# --------------------------------------------------------------------------------------------- lifecycle


async def test_open_from_the_empty_workspace_needs_the_epoch(archive: Path) -> None:
    async with serve(None) as a:
        info = await a.call("pvf_workspace_info", {})
        assert info["open"] is False and info["workspaceId"] is None
        epoch = info["workspaceEpoch"]
        # a null workspaceId says what to do: open an archive, with this epoch
        assert "pvf_archive_open" in info["hint"] and f"expectedWorkspaceEpoch {epoch}" in info["hint"], info
        await a.fail("pvf_archive_open", {"path": str(archive)}, "INVALID_ARGUMENT")
        await a.fail(
            "pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": epoch + 5}, "STALE_WORKSPACE"
        )
        await a.fail(
            "pvf_archive_open", {"path": "relative.pvf", "expectedWorkspaceEpoch": epoch}, "INVALID_ARGUMENT"
        )
        opened = await a.call("pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": epoch})
        assert opened["state"] == "succeeded", opened
        result = opened["result"]
        assert result["workspaceEpoch"] == epoch + 1 and result["revision"] == 1
        assert result["archive"]["files"] > 200 and result["indexStatus"] is not None
        # The same epoch again (a second caller who saw "empty"): refused, the archive stays.
        await a.fail(
            "pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": epoch}, "STALE_WORKSPACE"
        )
        info = await a.ready()
        assert info["workspaceId"] == result["workspaceId"] and info["sourcePath"] == str(archive)
        assert "hint" not in info


async def test_failed_open_keeps_the_current_archive(archive: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.pvf"
    bad.write_bytes(archive.read_bytes()[:200])
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, rev, path, "\n[kept]\n`kept edit`\n")
        err = await a.client.call_tool(
            "pvf_archive_open",
            {
                "path": str(bad),
                "workspaceId": ws,
                "expectedRevision": applied["revision"],
                "dirtyPolicy": "discard",
            },
        )
        assert err.is_error and err.structured_content["code"] in ("PVF_CORRUPT", "UNSUPPORTED_VARIANT")
        after = await a.call("pvf_workspace_info", {})
        assert (
            after["workspaceId"] == ws and after["revision"] == applied["revision"] and after["sourceDirty"]
        )
        read = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        assert "kept edit" in read["text"]


async def test_dirty_policy_reject_save_discard(archive: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pvf"
    shutil.copyfile(archive, other)
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[x]\n`policy save`\n")
        rev = applied["revision"]
        base = {"workspaceId": ws, "expectedRevision": rev}
        await a.fail("pvf_archive_close", base, "UNSAVED_CHANGES")
        await a.fail("pvf_archive_open", {**base, "path": str(other)}, "UNSAVED_CHANGES")
        await a.fail("pvf_archive_close", {**base, "expectedRevision": rev - 1}, "STALE_WORKSPACE")
        # save: written to the source first, then switched
        opened = await a.call("pvf_archive_open", {**base, "path": str(other), "dirtyPolicy": "save"})
        assert opened["state"] == "succeeded"
        ar = open_archive(archive)
        assert "policy save" in ar.read_text(path)
        ar.close()
        new_ws = opened["result"]["workspaceId"]
        assert new_ws != ws and opened["result"]["previousWorkspaceId"] == ws
        # the old handle is stale now
        await a.fail("pvf_read_file", {"workspaceId": ws, "path": path}, "STALE_WORKSPACE")
        info = await a.ready()
        applied = await a.edit(new_ws, info["revision"], path, "\n[y]\n`policy discard`\n")
        before = other.read_bytes()
        closed = await a.call(
            "pvf_archive_close",
            {"workspaceId": new_ws, "expectedRevision": applied["revision"], "dirtyPolicy": "discard"},
        )
        assert closed["result"]["closedWorkspaceId"] == new_ws
        assert other.read_bytes() == before  # discarded, never written
        info = await a.call("pvf_workspace_info", {})
        assert info["open"] is False and info["workspaceEpoch"] == closed["result"]["workspaceEpoch"]


async def test_editor_drafts_block_lifecycle_through_the_barrier(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        svc = service(a)
        svc.engine.drafts.timeout_s = 0.5
        base = a.srv.base_url + "/api/editors"
        async with (
            httpx2.AsyncClient(headers=a.srv.ui_headers(), timeout=10) as ui,
            editor_stream(a, ui, "tab-1"),
        ):
            # An editor that does not answer: UI_NOT_READY, never "assume no draft".
            err = await a.fail(
                "pvf_archive_save", {"workspaceId": ws, "expectedRevision": rev}, "UI_NOT_READY"
            )
            assert err["data"]["clients"] == ["tab-1"]
            # An editor that answers with a draft: UI_DRAFT_PENDING; discard does not skip it.
            subscription = a.srv.app.events.subscribe("ui")

            async def answer(has_drafts: bool) -> None:
                async for event in subscription:
                    if event.data.get("event") == "prepare":
                        resp = await ui.post(
                            f"{base}/ack",
                            json={
                                "operationId": event.data["operationId"],
                                "clientId": "tab-1",
                                "hasDrafts": has_drafts,
                            },
                        )
                        assert resp.status_code == 200, resp.text
                        return

            responder = asyncio.ensure_future(answer(True))
            await a.fail(
                "pvf_archive_close",
                {"workspaceId": ws, "expectedRevision": rev, "dirtyPolicy": "discard"},
                "UI_DRAFT_PENDING",
            )
            await responder
            responder = asyncio.ensure_future(answer(False))
            saved = await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": rev})
            await responder
            assert saved["result"]["diskCommitted"] is True
            subscription.close()
            # A late answer for a finished operation is refused.
            late = await ui.post(
                f"{base}/ack", json={"operationId": saved["result"]["operationId"], "clientId": "tab-1"}
            )
            assert late.status_code == 409 and late.json()["error"]["code"] == "UI_NOT_READY"


async def test_task_busy_and_plan_pending_block_lifecycle(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        svc = service(a)
        release = asyncio.Event()

        async def writer(handle: Any) -> None:
            await release.wait()

        task = svc.engine.start_task(writer, owner="mcp:other", label="script run", write=True)
        err = await a.fail("pvf_archive_save", {"workspaceId": ws, "expectedRevision": rev}, "TASK_BUSY")
        assert err["data"]["taskId"] == task.id
        await a.fail("pvf_archive_close", {"workspaceId": ws, "expectedRevision": rev}, "TASK_BUSY")
        release.set()
        await svc.engine.tasks.wait(task.id, 5)
        path = await a.first_script(ws)
        plan = await a.prepare_append(ws, rev, path, "\n[t]\n1\n")
        for tool in ("pvf_archive_save", "pvf_archive_close"):
            err = await a.fail(tool, {"workspaceId": ws, "expectedRevision": rev}, "PLAN_PENDING")
            assert err["data"]["planId"] == plan["planId"]
        await a.fail(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": "x"}]},
            "PLAN_PENDING",
        )
        # refused before the sources are read: a source that does not exist is not even looked at
        err = await a.fail(
            "pvf_import_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "sourcePaths": [str(archive.parent / "absent")]},
            "PLAN_PENDING",
        )
        assert err["data"]["planId"] == plan["planId"] and "pvf_workspace_info" in err["hint"]
        await a.call("pvf_plan_discard", {"planId": plan["planId"]})
        await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": rev})


async def test_source_changed_on_disk_is_never_overwritten(archive: Path, archives: dict[str, Path]) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[z]\n`mine`\n")
        outside = archive.read_bytes() + b"\0\0\0\0"  # another program wrote the file
        archive.write_bytes(outside)
        err = await a.fail(
            "pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]}, "SOURCE_CHANGED"
        )
        assert err["data"].get("diskCommitted") is not True
        assert archive.read_bytes() == outside
        info = await a.call("pvf_workspace_info", {})
        assert info["sourceDirty"] is True  # still unsaved: the person decides (save a copy, reopen)


async def test_source_changed_just_before_the_rename(archive: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[z]\n`mine`\n")
        store = service(a).store
        real_verify = store.verify
        sneaky = archive.read_bytes()[::-1]

        def verify_then_someone_writes(ws_: Any, tmp: Path) -> None:
            real_verify(ws_, tmp)
            archive.write_bytes(sneaky)  # after our checks started, before the rename

        monkeypatch.setattr(store, "verify", verify_then_someone_writes)
        await a.fail(
            "pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]}, "SOURCE_CHANGED"
        )
        assert archive.read_bytes() == sneaky
        assert not list(archive.parent.glob("*.tmp*"))


async def test_save_writes_bak_once_and_reports_maintenance_failure_separately(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        original = archive.read_bytes()
        path = await a.first_script(ws)
        first = await a.edit(ws, info["revision"], path, "\n[a]\n`one`\n")
        saved = (
            await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": first["revision"]})
        )["result"]
        bak = Path(saved["backupPath"])
        assert bak.read_bytes() == original and saved["sourceDirty"] is False
        assert saved["identity"] == file_identity(archive).to_dict()
        svc = service(a)

        def broken(ws_: Any, p: Path) -> None:
            raise OSError("index disk full")

        svc.store.after_save_hooks.append(broken)
        second = await a.edit(ws, first["revision"], path, "\n[b]\n`two`\n")
        res = (await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": second["revision"]}))[
            "result"
        ]
        assert res["diskCommitted"] is True and res["backupPath"] is None  # .bak only on the first save
        assert any("index disk full" in w for w in res["warnings"])
        assert bak.read_bytes() == original
        ar = open_archive(archive)
        assert "`two`" in ar.read_text(path)
        ar.close()


async def test_save_as_writes_a_copy_only(archive: Path, tmp_path: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[c]\n`copy only`\n")
        rev = applied["revision"]
        original = archive.read_bytes()
        copy = tmp_path / "copy.pvf"
        out = (
            await a.call(
                "pvf_archive_save_as", {"workspaceId": ws, "expectedRevision": rev, "path": str(copy)}
            )
        )["result"]
        assert out["writtenPath"] == str(copy) and out["sourcePath"] == str(archive)
        assert out["sourceDirty"] is True and out["snapshotRevision"] == rev
        assert archive.read_bytes() == original and not Path(f"{archive}.bak").exists()
        ar = open_archive(copy)
        assert "copy only" in ar.read_text(path)
        ar.close()
        info = await a.call("pvf_workspace_info", {})
        assert (
            info["workspaceId"] == ws and info["sourceDirty"] is True and info["sourcePath"] == str(archive)
        )
        # the autosaved recovery of the unsaved changes stays too (a copy saves nothing of the source)
        from deskbridge.kinds.pvf import recovery

        rec = recovery.recovery_path(service(a).data_dir, archive)
        for _ in range(100):
            if rec.exists():
                break
            await asyncio.sleep(0.05)
        assert rec.exists()
        # the same file under another name is the source itself
        link = tmp_path / "alias.pvf"
        link.symlink_to(archive)
        for target in (archive, link, tmp_path / "sub" / ".." / archive.name):
            (tmp_path / "sub").mkdir(exist_ok=True)
            await a.fail(
                "pvf_archive_save_as",
                {"workspaceId": ws, "expectedRevision": rev, "path": str(target)},
                "SAME_AS_SOURCE",
            )
        exists = await a.fail(
            "pvf_archive_save_as",
            {"workspaceId": ws, "expectedRevision": rev, "path": str(copy)},
            "TARGET_EXISTS",
        )
        identity = exists["data"]["identity"]
        stale = dict(identity, sha256="0" * 64)
        await a.fail(
            "pvf_archive_save_as",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "path": str(copy),
                "overwrite": True,
                "targetIdentity": stale,
            },
            "TARGET_CHANGED",
        )
        await a.fail(
            "pvf_archive_save_as",
            {"workspaceId": ws, "expectedRevision": rev, "path": str(copy), "overwrite": True},
            "INVALID_ARGUMENT",
        )
        again = await a.call(
            "pvf_archive_save_as",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "path": str(copy),
                "overwrite": True,
                "targetIdentity": identity,
            },
        )
        assert again["result"]["diskCommitted"] is True
        await a.fail(
            "pvf_archive_save_as",
            {"workspaceId": ws, "expectedRevision": rev, "path": str(tmp_path / "nope" / "x.pvf")},
            "NOT_FOUND",
        )


async def test_request_id_replay_conflict_and_old_results_after_a_switch(
    archive: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other.pvf"
    shutil.copyfile(archive, other)
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[d]\n`once`\n")
        args = {"workspaceId": ws, "expectedRevision": applied["revision"], "requestId": "save-1"}
        first = await a.call("pvf_archive_save", args)
        mtime = archive.stat().st_mtime_ns
        replay = await a.call("pvf_archive_save", args)
        assert replay == first and archive.stat().st_mtime_ns == mtime  # not written twice
        await a.fail("pvf_archive_save", {**args, "expectedRevision": 1}, "REQUEST_CONFLICT")
        opened = await a.call(
            "pvf_archive_open",
            {
                "path": str(other),
                "workspaceId": ws,
                "expectedRevision": applied["revision"],
                "requestId": "open-1",
            },
        )
        await a.ready()
        # After the switch: the old save's retry still answers the first result, its task keeps its result.
        assert await a.call("pvf_archive_save", args) == first
        status = await a.call("pvf_task_status", {"taskId": first["taskId"]})
        assert status["result"]["writtenPath"] == str(archive) and status["workspaceId"] == ws
        # A new request naming the old workspace is stale.
        await a.fail("pvf_archive_save", {**args, "requestId": "save-2"}, "STALE_WORKSPACE")
        assert opened["result"]["workspaceId"] != ws


async def test_paged_archive_needs_keys(archives: dict[str, Path], tmp_path: Path) -> None:
    paged = tmp_path / "paged.pvf"
    shutil.copyfile(archives["paged"], paged)
    keys = Path(f"{archives['paged']}.keys.json")
    async with serve(None) as a:
        epoch = (await a.call("pvf_workspace_info", {}))["workspaceEpoch"]
        err = await a.fail(
            "pvf_archive_open", {"path": str(paged), "expectedWorkspaceEpoch": epoch}, "KEY_REQUIRED"
        )
        assert "keyFile" in err["hint"] and "skDat" in err["data"]["options"]
        opened = await a.call(
            "pvf_archive_open", {"path": str(paged), "expectedWorkspaceEpoch": epoch, "keyFile": str(keys)}
        )
        assert opened["result"]["archive"]["variant"] == "paged"
        info = await a.ready()
        hits = await a.call(
            "pvf_search", {"workspaceId": info["workspaceId"], "query": "name", "mode": "content"}
        )
        assert hits["hits"]


# --------------------------------------------------------------------------------------------- reading


async def test_read_list_and_case_insensitive_paths(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        full = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        assert full["kind"] == "text" and full["totalLines"] > 5 and full["revision"] == rev
        part = await a.call(
            "pvf_read_file", {"workspaceId": ws, "path": path.upper(), "startLine": 2, "endLine": 4}
        )
        assert part["text"] == "".join(full["text"].splitlines(keepends=True)[1:4]) and part["path"] == path
        cut = await a.call("pvf_read_file", {"workspaceId": ws, "path": path, "maxChars": 20})
        assert cut["truncated"] is True and cut["nextStartLine"] is not None
        await a.fail(
            "pvf_read_file", {"workspaceId": ws, "path": path, "expectedRevision": rev + 1}, "STALE_WORKSPACE"
        )
        missing = await a.fail("pvf_read_file", {"workspaceId": ws, "path": "no/such.equ"}, "NOT_FOUND")
        # the next step is the archive's own search, not the annotation search (which knows no paths)
        assert "call pvf_search " in missing["hint"] and "annotation" not in missing["hint"], missing
        binary = await a.call("pvf_read_file", {"workspaceId": ws, "path": "n_string.lst"})
        assert binary["kind"] in ("text", "binary")
        # listing: root, then a folder page by page
        root = await a.call("pvf_list_dir", {"workspaceId": ws})
        assert {"equipment"} <= {e["name"] for e in root["entries"] if e["type"] == "dir"}
        folder = path.rsplit("/", 1)[0]
        page1 = await a.call("pvf_list_dir", {"workspaceId": ws, "path": folder.upper(), "limit": 1})
        assert len(page1["entries"]) == 1 and page1["revision"] == rev
        seen = [e["path"] for e in page1["entries"]]
        cursor = page1["nextCursor"]
        while cursor:
            page = await a.call(
                "pvf_list_dir", {"workspaceId": ws, "path": folder, "limit": 1, "cursor": cursor}
            )
            seen += [e["path"] for e in page["entries"]]
            cursor = page["nextCursor"]
        assert path in seen and len(seen) == page1["total"]
        # a cursor this server did not issue is refused with how to restart (core.paging), never page 1 again
        for tool, extra in (("pvf_list_dir", {"path": folder}), ("pvf_search", {"query": "equ"})):
            bad = await a.fail(
                tool, {"workspaceId": ws, **extra, "cursor": "not-a-cursor"}, "INVALID_ARGUMENT"
            )
            assert "without cursor" in bad["hint"] and tool in bad["hint"], bad
        await a.fail("pvf_list_dir", {"workspaceId": ws, "path": "nope"}, "NOT_FOUND")
        # an edit with another spelling of the path changes the same file
        applied = await a.edit(ws, rev, path.upper(), "\n[e]\n`case`\n")
        again = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        assert (
            "`case`" in again["text"]
            and again["changed"] is True
            and again["revision"] == applied["revision"]
        )
        await a.fail(
            "pvf_list_dir",
            {"workspaceId": ws, "path": folder, "cursor": cursor or page1["nextCursor"]},
            "STALE_WORKSPACE",
        ) if page1["nextCursor"] else None


async def test_search_paths_and_content_pages_and_revisions(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        page = await a.call("pvf_search", {"workspaceId": ws, "query": "EQUIPMENT", "limit": 5})
        assert len(page["hits"]) == 5 and page["revision"] == rev and page["nextCursor"]
        assert all("equipment" in h["path"].lower() for h in page["hits"])
        nxt = await a.call(
            "pvf_search", {"workspaceId": ws, "query": "EQUIPMENT", "limit": 5, "cursor": page["nextCursor"]}
        )
        assert not {h["path"] for h in nxt["hits"]} & {h["path"] for h in page["hits"]}
        scoped = await a.call(
            "pvf_search", {"workspaceId": ws, "query": ".", "scope": "equipment", "limit": 1000}
        )
        assert scoped["hits"] and all(h["path"].lower().startswith("equipment/") for h in scoped["hits"])
        content = await a.call(
            "pvf_search", {"workspaceId": ws, "query": "[NAME]", "mode": "content", "limit": 3}
        )
        assert content["hits"] and all(
            m["text"].lower().count("[name]") for h in content["hits"] for m in h["matches"]
        )
        small = await a.call(
            "pvf_search",
            {"workspaceId": ws, "query": "name", "mode": "content", "limit": 1000, "maxBytes": 1024},
        )
        assert small["nextCursor"] and 1 <= len(small["hits"]) < 50
        await a.fail(
            "pvf_search", {"workspaceId": ws, "query": "x", "mode": "content"}, "LIMIT_EXCEEDED"
        ) if info["archive"]["files"] > 20_000 else None
        # edits are found before and after saving; the page cursor of an older revision is refused
        path = await a.first_script(ws)
        applied = await a.edit(ws, rev, path, "\n[f]\n`Quixotic Needle`\n")
        await a.fail(
            "pvf_search",
            {"workspaceId": ws, "query": "EQUIPMENT", "limit": 5, "cursor": page["nextCursor"]},
            "STALE_WORKSPACE",
        )
        # a word from inside a file, asked in the default (path) mode: no hits, and the answer says which mode finds it
        by_name = await a.call("pvf_search", {"workspaceId": ws, "query": "quixotic needle"})
        assert by_name["hits"] == [] and 'mode: "content"' in by_name["hint"], by_name
        assert "hint" not in page
        found = await a.call("pvf_search", {"workspaceId": ws, "query": "quixotic needle", "mode": "content"})
        # the script, and for classic the string table that holds the new string
        assert path in [h["path"] for h in found["hits"]]
        assert {h["path"] for h in found["hits"]} <= {path, "stringtable.bin"}
        await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
        found = await a.call("pvf_search", {"workspaceId": ws, "query": "QUIXOTIC", "mode": "content"})
        assert path in [h["path"] for h in found["hits"]]
        assert {h["path"] for h in found["hits"]} <= {path, "stringtable.bin"}
        status = await a.call("pvf_workspace_info", {})
        assert status["index"]["state"] == "ready"


async def test_content_search_reports_not_ready_while_the_index_builds(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskbridge.kinds.pvf import search

    gate = asyncio.Event()
    real = search.ContentIndex.build
    loop: asyncio.AbstractEventLoop | None = None

    def slow_build(self: Any, *args: Any, **kwargs: Any) -> None:
        assert loop is not None
        asyncio.run_coroutine_threadsafe(gate.wait(), loop).result(20)
        real(self, *args, **kwargs)

    monkeypatch.setattr(search.ContentIndex, "build", slow_build)
    loop = asyncio.get_running_loop()
    async with serve(archive) as a:
        for _ in range(100):
            info = await a.call("pvf_workspace_info", {})
            if info["open"] and info["lifecycle"] is None:
                break
            await asyncio.sleep(0.05)
        err = await a.fail(
            "pvf_search",
            {"workspaceId": info["workspaceId"], "query": "name", "mode": "content"},
            "NOT_READY",
        )
        assert err["data"]["taskId"] and "pvf_task_status" in err["hint"]
        paths = await a.call("pvf_search", {"workspaceId": info["workspaceId"], "query": "equ"})
        assert paths["hits"]
        gate.set()
        await a.ready()
        # a second open of the same file finds the index on disk
    async with serve(archive) as a:
        info = await a.ready()
        assert info["index"]["cached"] is True


async def test_edit_plan_links_new_strings_and_stale_plans(archive: Path, family: str) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        read = await a.call("pvf_read_file", {"workspaceId": ws, "path": path})
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": path, "text": read["text"] + "\n[g]\n`a string never seen before`\n"}],
            },
        )
        preview = await a.call("pvf_plan_preview", {"planId": plan["planId"]})
        items = {i["changeKey"]: i for i in preview["items"]}
        if family == "classic":
            assert items[path]["requires"] == ["stringtable.bin"] and "stringtable.bin" in items
            # selecting the script without its string table needs the dependency warning acknowledged
            err = await a.fail(
                "pvf_plan_apply",
                {"planId": plan["planId"], "changeKeys": [path], "expectedRevision": rev},
                "INVALID_ARGUMENT",
            )
            assert "warning" in err["message"].lower() or err.get("data")
        assert "+[g]" in items[path]["diff"]
        # another commit moves the workspace: the plan is stale, nothing applied
        await a.call("pvf_plan_discard", {"planId": plan["planId"]})
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": rev,
                "edits": [{"path": path, "text": read["text"] + "\n[h]\n`b`\n"}],
            },
        )
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        await a.fail(
            "pvf_plan_apply",
            {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev + 1},
            "STALE_PLAN",
        )
        done = await a.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        )
        assert done["revision"] == rev + 1
        await a.fail(
            "pvf_edit_prepare",
            {"workspaceId": ws, "expectedRevision": rev, "edits": [{"path": path, "text": "x"}]},
            "STALE_WORKSPACE",
        )
        # create and delete files
        new_path = path.rsplit("/", 1)[0] + "/brand_new.equ"
        plan = await a.call(
            "pvf_edit_prepare",
            {
                "workspaceId": ws,
                "expectedRevision": done["revision"],
                "edits": [{"path": new_path, "text": read["text"]}, {"path": path, "delete": True}],
            },
        )
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        applied = await a.call("pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys})
        await a.fail("pvf_read_file", {"workspaceId": ws, "path": path}, "NOT_FOUND")
        assert (await a.call("pvf_search", {"workspaceId": ws, "query": "brand_new"}))["hits"][0][
            "path"
        ] == new_path
        await a.call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": applied["revision"]})
        ar = open_archive(archive)
        assert ar.exists(new_path) and not ar.exists(path)
        ar.close()
        listing = await a.call(
            "pvf_list_dir", {"workspaceId": ws, "path": new_path.rsplit("/", 1)[0], "limit": 1000}
        )
        names = {e["path"] for e in listing["entries"]}
        assert new_path in names and path not in names


async def test_resolve_links_and_registries(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        regs = await a.call("pvf_list_registries", {"workspaceId": ws, "limit": 50})
        assert regs["total"] >= 1 and all("entries" in r or "error" in r for r in regs["registries"])
        lst = next(r for r in regs["registries"] if r.get("entries") and "n_string" not in r["path"])
        entry = lst["firstEntries"][0]
        first = await a.call("pvf_resolve", {"workspaceId": ws, "listPath": lst["path"], "id": entry["id"]})
        assert first["path"] == entry["path"]
        assert (await a.call("pvf_read_file", {"workspaceId": ws, "path": first["path"]}))["kind"] == "text"
        back = await a.call(
            "pvf_resolve", {"workspaceId": ws, "listPath": lst["path"], "path": entry["path"]}
        )
        assert entry["id"] in back["ids"]
        path = await a.first_script(ws)
        text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
        import re

        m = re.search(r"<(\d+)::([^`>]+)", text)
        assert m, text[:300]
        link = f"<{m.group(1)}::{m.group(2)}>"
        resolved = await a.call("pvf_resolve", {"workspaceId": ws, "link": link})
        assert resolved["text"]
        reverse = await a.call("pvf_resolve", {"workspaceId": ws, "text": resolved["text"]})
        assert link in {r["link"] for r in reverse["links"]}


async def test_two_callers_race_to_open_the_empty_workspace(archive: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.pvf"
    shutil.copyfile(archive, other)
    async with serve(None) as a, a.srv.client() as second:
        epoch = (await a.call("pvf_workspace_info", {}))["workspaceEpoch"]
        results = await asyncio.gather(
            a.client.call_tool("pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": epoch}),
            second.call_tool("pvf_archive_open", {"path": str(other), "expectedWorkspaceEpoch": epoch}),
        )
        ok = [r for r in results if not r.is_error]
        refused = [r for r in results if r.is_error]
        assert len(ok) == 1 and len(refused) == 1, [r.structured_content for r in results]
        assert refused[0].structured_content["code"] in ("STALE_WORKSPACE", "NOT_READY")
        info = await a.call("pvf_workspace_info", {})
        assert info["workspaceEpoch"] == epoch + 1
        assert info["sourcePath"] == ok[0].structured_content["result"]["sourcePath"]


async def test_a_failed_save_changes_nothing_and_can_be_retried(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deskbridge.core.errors import BridgeError, ErrorCode

    async with serve(archive) as a:
        info = await a.ready()
        ws = info["workspaceId"]
        path = await a.first_script(ws)
        applied = await a.edit(ws, info["revision"], path, "\n[r]\n`retry`\n")
        store = service(a).store
        real = store.verify
        before = archive.read_bytes()

        def failing(ws_: Any, tmp: Path) -> None:
            raise BridgeError(ErrorCode.INTERNAL, "verify failed: simulated")

        monkeypatch.setattr(store, "verify", failing)
        args = {"workspaceId": ws, "expectedRevision": applied["revision"], "requestId": "retry-1"}
        err = await a.fail("pvf_archive_save", args, "INTERNAL")
        assert "simulated" in err["message"] and archive.read_bytes() == before
        assert not list(archive.parent.glob("*.tmp*"))
        assert (await a.call("pvf_workspace_info", {}))["sourceDirty"] is True
        monkeypatch.setattr(store, "verify", real)
        saved = await a.call("pvf_archive_save", args)  # a failure is not remembered: the same id retries
        assert saved["result"]["sourceDirty"] is False
        ar = open_archive(archive)
        assert "`retry`" in ar.read_text(path)
        ar.close()


async def test_the_ui_sees_and_applies_an_agents_plan(archive: Path) -> None:
    async with serve(archive) as a:
        info = await a.ready()
        ws, rev = info["workspaceId"], info["revision"]
        path = await a.first_script(ws)
        plan = await a.prepare_append(ws, rev, path, "\n[u]\n1\n")
        assert (await a.call("pvf_workspace_info", {}))["pendingPlan"] == plan["planId"]
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        async with httpx2.AsyncClient(headers=a.srv.ui_headers(), timeout=30) as ui:
            r = await ui.post(
                f"{a.srv.base_url}/api/tools/pvf_plan_apply",
                json={"arguments": {"planId": plan["planId"], "changeKeys": keys}},
            )
            assert r.status_code == 200, r.text
        # the agent then sees the plan's final state, and its own apply is refused
        await a.fail("pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys}, "NOT_FOUND")
        assert (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["revision"] == rev + 1


def test_demo_pvf_serves_a_sample_archive(deskbridge_home: Path) -> None:
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "deskbridge", "demo", "pvf", "--exit-after", "0", "--no-browser"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "DESKBRIDGE_HOME": str(deskbridge_home)},
    )
    assert proc.returncode == 0, proc.stderr
    assert "pvf_archive_open" in proc.stderr and "Script.pvf" in proc.stderr
    assert (deskbridge_home / "data" / "demo" / "pvf" / "Script.pvf").is_file()


async def test_an_editor_is_asked_exactly_while_its_event_stream_is_open(archive: Path) -> None:
    """The platform's one editor protocol: registered while `/api/events?editor=` is open (a closed tab
    never holds a save as UI_NOT_READY), asked in `prepare`, answering on `/api/editors/ack`."""
    async with serve(archive) as a:
        info = await a.ready()
        svc = service(a)
        args = {"workspaceId": info["workspaceId"], "expectedRevision": info["revision"]}
        async with httpx2.AsyncClient(headers=a.srv.ui_headers(), timeout=30) as ui:
            prepares: asyncio.Queue = asyncio.Queue()

            async def tab() -> None:
                url = a.srv.base_url + "/api/events?editor=tab-1"
                async with ui.stream("GET", url, timeout=None) as stream:
                    async for line in stream.aiter_lines():
                        if line.startswith("data:") and '"prepare"' in line:
                            await prepares.put(json.loads(line[5:]))

            listener = asyncio.create_task(tab())
            for _ in range(500):
                if svc.engine.drafts.clients() == ["tab-1"]:
                    break
                await asyncio.sleep(0.02)
            assert svc.engine.drafts.clients() == ["tab-1"]
            save = asyncio.create_task(a.srv.app.invoke("pvf_archive_save", args, CallContext("mcp:t", "t")))
            prepare = await asyncio.wait_for(prepares.get(), 30)
            ack = {"operationId": prepare["operationId"], "clientId": "tab-1", "hasDrafts": True}
            assert (await ui.post(a.srv.base_url + "/api/editors/ack", json=ack)).status_code == 200
            with pytest.raises(BridgeError) as err:
                await save
            assert err.value.code is ErrorCode.UI_DRAFT_PENDING
            listener.cancel()
            for _ in range(500):
                if not svc.engine.drafts.clients():
                    break
                await asyncio.sleep(0.02)
            assert svc.engine.drafts.clients() == []  # the tab closed its stream: nobody to ask
        await a.call("pvf_archive_save", args)
