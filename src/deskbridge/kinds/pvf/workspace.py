"""The pvf kind as a deskbridge workspace: one `PvfService` (an `Engine` over `PvfStore`), its tools and web routes.

`deskbridge serve Script.pvf` opens the archive at start (a task, so open-to-ready shows as progress);
`deskbridge serve --kind pvf` starts with the empty workspace, and `pvf_archive_open` opens one later.

Web routes (under `/api/pvf`) are the editors' side of the engine's draft barrier: a browser editor
registers, answers each `prepare` event (topic `ui`) with its draft state, and reports drafts for display.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import ResourceSpec, ToolSpec
from deskbridge.kinds.base import KindServices
from deskbridge.kinds.http import error_response, json_body
from deskbridge.kinds.pvf.recovery import Autosaver
from deskbridge.kinds.pvf.script_tools import script_resources, script_tools
from deskbridge.kinds.pvf.service import PvfService
from deskbridge.kinds.pvf.tools import pvf_tools

STATIC_DIR = Path(__file__).parent / "static"

APPROVAL_DEFAULTS: dict[str, bool] = {"edit": True, "export": True, "save": False, "save_as": False}
"""Which of the pvf tools' approval operations (`ToolSpec.operation`) ask an MCP client's person when the
`approval_rules` setting says nothing, as for markdown: committing a plan's changes (`edit`) and writing an
export outside the archive (`export`) ask; saving what was already approved does not (`save`, `save_as`;
`deskbridge config set approval_rules.save true` makes it ask). `require_approval false` turns all off."""


class PvfWorkspace:
    """The PVF workspace, shared by every MCP client, the browser and the CLI of this process."""

    kind = "pvf"
    approval_defaults = APPROVAL_DEFAULTS

    def __init__(self, path: Path | None, services: KindServices) -> None:
        self.services = services
        self.initial = path
        self.options = dict(services.options)
        self.service = PvfService(services.events, services.dirs.cache, services.dirs.data)
        self.service.protected_dirs = [services.dirs.config]
        self.open_task: str | None = None
        self.autosaver = Autosaver(self.service)
        self.leases = EditorLeases(self.service)
        self._lease_task: asyncio.Task[None] | None = None

    @property
    def path(self) -> Path:
        ws = self.service.engine.workspace
        if ws is not None and ws.source_path is not None:
            return ws.source_path
        return self.initial or Path()

    def tools(self) -> list[ToolSpec]:
        return pvf_tools(self.service) + script_tools(self.service, self.services.dirs.config)

    def resources(self) -> list[ResourceSpec]:
        return script_resources()

    def api_routes(self) -> list[BaseRoute]:
        return editor_routes(self.service, self.leases)

    def static_dir(self) -> Path | None:
        return STATIC_DIR

    async def start(self) -> None:
        self.autosaver.start()
        self._lease_task = asyncio.get_running_loop().create_task(self.leases.run())
        if self.initial is None:
            return
        svc = self.service
        target = self.initial
        options = {"encoding": self.options.get("encoding"), "keys": self.options.get("keys")}

        async def work(handle: Any) -> dict[str, Any]:
            return await svc.open_archive(
                target,
                caller="cli",
                options=options,
                epoch=0,
                progress=lambda d, t: handle.progress(d, t, "opening"),
            )

        task = svc.engine.start_task(
            work, owner="cli", label="pvf_archive_open", write=False, cancellable=False
        )
        self.open_task = task.id

    async def stop(self) -> None:
        if self._lease_task is not None:
            self._lease_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._lease_task
        await self.service.engine.shutdown(timeout_s=30)
        await self.autosaver.stop()
        if self.service.index is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.service.index.close)

    def status(self) -> dict[str, Any]:
        info = self.service.info()
        return {
            "kind": self.kind,
            "path": str(self.path),
            "open": info["open"],
            "workspaceId": info["workspaceId"],
            "revision": info["revision"],
            "sourceDirty": info["sourceDirty"],
            "openTask": self.open_task,
        }


EDITOR_LEASE_S = 30.0
"""An editor that has not called register/report for this long is forgotten (a closed or crashed tab would
otherwise make every save answer UI_NOT_READY until a restart); the page reports every 10 s."""


class EditorLeases:
    """Last sign of life of each registered editor; `sweep` unregisters the silent ones."""

    def __init__(self, svc: PvfService) -> None:
        self.drafts = svc.engine.drafts
        self.seen: dict[str, float] = {}

    def touch(self, client: str) -> None:
        self.seen[client] = time.monotonic()

    def forget(self, client: str) -> None:
        self.seen.pop(client, None)

    def sweep(self) -> None:
        now = time.monotonic()
        for client in [c for c, t in self.seen.items() if now - t > EDITOR_LEASE_S]:
            self.seen.pop(client, None)
            self.drafts.unregister(client)

    async def run(self) -> None:
        while True:
            await asyncio.sleep(5)
            self.sweep()


def editor_routes(svc: PvfService, leases: EditorLeases | None = None) -> list[BaseRoute]:
    drafts = svc.engine.drafts
    leases = leases or EditorLeases(svc)

    def _client(body: dict[str, Any]) -> str:
        client = body.get("clientId")
        if not isinstance(client, str) or not 0 < len(client) <= 128:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "clientId must be a string of 1 to 128 characters")
        return client

    async def register(request: Request) -> Response:
        try:
            client = _client(await json_body(request))
            drafts.register(client)
            leases.touch(client)
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True, "clients": drafts.clients()})

    async def unregister(request: Request) -> Response:
        try:
            client = _client(await json_body(request))
            drafts.unregister(client)
            leases.forget(client)
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    async def ack(request: Request) -> Response:
        try:
            body = await json_body(request)
            op = body.get("operationId")
            if not isinstance(op, str):
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, "operationId is required")
            drafts.ack(op, _client(body), bool(body.get("hasDrafts")), body.get("detail"))
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    async def report(request: Request) -> Response:
        try:
            body = await json_body(request)
            client = _client(body)
            if client not in drafts.clients():
                drafts.register(client)  # a tab that was swept while asleep comes back
            drafts.report(client, bool(body.get("hasDrafts")))
            leases.touch(client)
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    return [
        Route("/editors/register", register, methods=["POST"]),
        Route("/editors/unregister", unregister, methods=["POST"]),
        Route("/editors/ack", ack, methods=["POST"]),
        Route("/editors/report", report, methods=["POST"]),
    ]


def open_workspace(path: Path | None, services: KindServices) -> PvfWorkspace:
    return PvfWorkspace(path, services)
