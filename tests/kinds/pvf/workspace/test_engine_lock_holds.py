"""Long holds of the engine lock must not stop everyone else. The recovery autosave holds the lock only to take
references to the changed payloads and encodes them without it (decompiling them under the lock once kept
pvf_workspace_info waiting 8.6 s after a big plan on classic-200k, 12,081 files, and about 21 s on nkpi-1m); a
lifecycle tool waiting for the lock waits off the event loop."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pvfws_helpers import serve, service

from deskbridge.kinds.pvf import recovery

pytestmark = pytest.mark.anyio


class CountingLock:
    """The engine's lock, recording how many recovery documents are encoded in each hold (outermost `with`)."""

    def __init__(self, real: Any) -> None:
        self.real, self.depth, self.holds = real, 0, []

    def __enter__(self) -> None:
        self.real.__enter__()
        self.depth += 1
        if self.depth == 1:
            self.holds.append(0)

    def __exit__(self, *exc: object) -> None:
        self.depth -= 1
        self.real.__exit__(*exc)


async def test_the_autosave_snapshot_encodes_without_the_lock(
    archive: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import base64

    async with serve(archive) as a:
        for _ in range(600):
            info = await a.call("pvf_workspace_info", {})
            if info["open"] and info["lifecycle"] is None:
                break
            await asyncio.sleep(0.05)
        svc = service(a)
        ws, rev = info["workspaceId"], info["revision"]
        paths = [p for p in svc.engine.workspace.source.archive.paths() if p.endswith(".equ")][:5]
        edits = []
        for path in paths:
            text = (await a.call("pvf_read_file", {"workspaceId": ws, "path": path}))["text"]
            edits.append({"path": path, "text": text + "\n[qa recovery]\n\t7\n"})
        plan = await a.call("pvf_edit_prepare", {"workspaceId": ws, "expectedRevision": rev, "edits": edits})
        keys = [
            i["changeKey"] for i in (await a.call("pvf_plan_preview", {"planId": plan["planId"]}))["items"]
        ]
        await a.call(
            "pvf_plan_apply", {"planId": plan["planId"], "changeKeys": keys, "expectedRevision": rev}
        )

        real_document = recovery.document
        lock = CountingLock(svc.engine.lock)

        def counted(*args: Any) -> Any:
            if lock.depth:
                lock.holds[-1] += 1
            return real_document(*args)

        monkeypatch.setattr(recovery, "document", counted)
        monkeypatch.setattr(svc.engine, "lock", lock)
        await asyncio.to_thread(recovery.Autosaver(svc).flush)
        monkeypatch.setattr(svc.engine, "lock", lock.real)

        assert lock.holds == [0], lock.holds  # one short hold, and nothing encoded in it
        doc = json.loads(recovery.recovery_path(svc.data_dir, archive).read_bytes())
        data = {f["path"]: base64.b64decode(f["data"]) for f in doc["files"]}
        workspace = svc.engine.workspace
        assert set(paths) <= set(data) and all(data[p] == workspace.read(p) for p in paths)
        assert doc["revision"] == rev + 1 and doc["version"] == recovery.VERSION


async def test_a_save_waiting_for_the_engine_lock_does_not_stop_other_clients(archive: Path) -> None:
    # pvf_archive_save's precheck took the engine lock on the event loop: while a script run's compile held
    # the lock (106 s on nkpi-1m) a save froze every client and the UI, not only itself.
    import threading

    async with serve(archive) as a:
        # the index build has finished: a task that finishes takes the lock on the event loop too (not mended)
        info = await a.ready()
        lock = service(a).engine.lock
        held, answered = threading.Event(), threading.Event()
        timed_out: list[bool] = []

        def hold() -> None:
            with lock:
                held.set()
                timed_out.append(not answered.wait(30))

        holder = threading.Thread(target=hold)
        holder.start()
        assert await asyncio.to_thread(held.wait, 10)
        save = asyncio.ensure_future(
            a.client.call_tool("pvf_archive_save", {"workspaceId": info["workspaceId"], "waitSeconds": 0})
        )
        await asyncio.sleep(0.3)  # the save is waiting for the lock now
        async with a.srv.client() as other:
            helped = await other.call_tool("pvf_script_help", {"topic": "overview"})
            answered.set()
        await asyncio.to_thread(holder.join)
        assert not helped.is_error and timed_out == [False]  # answered while the lock was still held
        await save
