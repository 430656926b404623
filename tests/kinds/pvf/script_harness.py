"""A PVF workspace (`PvfService` on `core.engine`) with its script runs, for the script API and sandbox tests."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from deskbridge.core.events import EventBus
from deskbridge.core.plans import PlanKind
from deskbridge.kinds.pvf.scripting.runner import ScriptLimits, runs_for
from deskbridge.kinds.pvf.service import PvfService


class Session:
    def __init__(self, svc: PvfService, ws: str, rev: int) -> None:
        self.svc = svc
        self.ws = ws
        self.rev = rev
        self.runs = runs_for(svc)

    async def run(self, source: str, caller: str = "mcp:test", timeout: float = 600) -> dict[str, Any]:
        """Run a script to its end: {state, result|error, logs, plan (all changes) or None}."""
        task = self.runs.start(caller, self.ws, self.rev, source, None)
        await self.svc.engine.tasks.wait(task.id, timeout=timeout)
        st = self.svc.engine.tasks.status(task.id)
        logs = []
        cursor = None
        while True:
            page = self.svc.engine.tasks.status(task.id, cursor)["log"]
            logs += [e["text"] for e in page["entries"]]
            cursor = page["nextCursor"]
            if not page["hasMore"]:
                break
        out = {"state": st["state"], "error": st.get("error"), "result": st.get("result"), "logs": logs}
        plan_id = (st.get("result") or {}).get("planId")
        out["plan"] = None
        if plan_id:
            plan = self.svc.engine.plans.get(plan_id, PlanKind.SCRIPT)
            out["plan"] = plan
        return out

    def discard(self, res: dict[str, Any]) -> None:
        if res.get("plan") is not None:
            self.svc.engine.discard_plan(res["plan"].id, caller="ui")

    def text(self, path: str) -> str:
        with self.svc.engine.lock:
            ws = self.svc.engine.current(self.ws)
            return ws.source.archive.read_text(path)  # type: ignore[union-attr]


@contextlib.asynccontextmanager
async def session(path: Path, cache: Path, limits: ScriptLimits | None = None) -> AsyncIterator[Session]:
    svc = PvfService(EventBus(), cache)
    info = await svc.open_archive(path, caller="ui", options={}, epoch=0)
    s = Session(svc, info["workspaceId"], info["revision"])
    if limits is not None:
        s.runs.limits = limits
    try:
        yield s
    finally:
        await svc.engine.shutdown(timeout_s=10)
        if svc.index is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(svc.index.close)
