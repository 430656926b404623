"""A save while the content index of the opened file is still being built: the build starts over on the
saved file once the save has ended (inside the save every task is refused, so starting it there failed with
"saved, but maintenance after saving failed: NOT_READY" and search stayed unready until a reopen)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deskbridge.core.events import EventBus
from deskbridge.core.plans import Change, PlanKind
from deskbridge.kinds.pvf.service import PvfService
from deskbridge.kinds.pvf.store import mirror_on_apply

pytestmark = pytest.mark.anyio


async def test_a_save_during_the_index_build_restarts_it_on_the_saved_file(
    archive: Path, tmp_path: Path
) -> None:
    svc = PvfService(EventBus(), tmp_path / "cache")
    info = await svc.open_archive(archive, caller="cli", options={}, epoch=0)
    try:
        assert svc.index is not None and svc.index.task_id
        svc.engine.tasks.cancel(svc.index.task_id, "ui")  # as if the build were still running
        for _ in range(200):
            if svc.index.state != "building":
                break
            await asyncio.sleep(0.02)
        assert svc.index.state != "ready"
        ws = svc._ws(info["workspaceId"])
        path = next(p for p in ws.source.archive.paths() if p.endswith(".equ"))
        old = ws.read(path)
        plan = svc.engine.create_plan(
            PlanKind.EDIT,
            owner="cli",
            workspace_id=ws.id,
            revision=ws.revision,
            changes=[Change(path, "modify", old[:-1] + bytes([old[-1] ^ 1]))],
            warnings=[],
            on_apply=mirror_on_apply(ws),
            summary={},
        )
        svc.engine.apply_plan(plan.id, caller="cli", change_keys=[path], expected_revision=info["revision"])
        saved = await svc.save(caller="cli", workspace_id=ws.id, revision=ws.revision, progress=None)
        assert not [w for w in saved.get("warnings", []) if "maintenance" in w], saved["warnings"]
        for _ in range(600):
            if svc.index.state == "ready":
                break
            await asyncio.sleep(0.05)
        assert svc.index.state == "ready"
        assert svc.index.sha256 == saved["identity"]["sha256"]  # built for the saved file, not the old one
    finally:
        await svc.engine.shutdown(timeout_s=30)
        if svc.index is not None:
            svc.index.close()
