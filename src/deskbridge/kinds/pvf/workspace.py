"""The pvf kind as a deskbridge workspace: one `PvfService` (an `Engine` over `PvfStore`), its tools and web routes.

`deskbridge serve Script.pvf` opens the archive at start (a task, so open-to-ready shows as progress);
`deskbridge serve --kind pvf` starts with the empty workspace, and `pvf_archive_open` opens one later.

Editors join the engine's draft barrier through the platform (web/app.py, the same for every kind): a browser
editor is registered while its event stream `/api/events?editor=<clientId>` is open, answers each `prepare`
event (topic `ui`) on `/api/editors/ack`, and reports drafts for display on `/api/editors/report`.
`/api/pvf/scripts…` is the person's library of saved `.pvf.js` scripts (`script_library.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from deskbridge.core.errors import BridgeError
from deskbridge.core.tools import ResourceSpec, ToolSpec
from deskbridge.kinds.base import KindServices
from deskbridge.kinds.http import error_response
from deskbridge.kinds.pvf.recovery import Autosaver
from deskbridge.kinds.pvf.script_library import ScriptLibrary, script_library_routes
from deskbridge.kinds.pvf.script_tools import script_resources, script_tools
from deskbridge.kinds.pvf.service import PvfService
from deskbridge.kinds.pvf.tools import pvf_tools

STATIC_DIR = Path(__file__).parent / "static"

APPROVAL_DEFAULTS: dict[str, bool] = {
    "edit": True,
    "export": True,
    "discard": True,
    "overwrite": True,
    "save": False,
}
"""Which of the pvf tools' approval operations (`ToolSpec.operation`) ask an MCP client's person when the
`approval_rules` setting says nothing, as for markdown: committing a plan's changes (`edit`), writing an
export outside the archive (`export`), throwing away unsaved changes with an open or close (`discard`: they
may be the person's own) and a save-as that replaces an existing file (`overwrite`, as the markdown editor's
save-as) ask; saving what was already approved does not (`save`; a save-as to a new file asks nothing;
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
        # the token lives in the config folder; the runtime folder's server records hold the UI secret, with which
        # an agent that read one could answer its own approval requests in place of the person
        self.service.protected_dirs = [services.dirs.config, services.dirs.run]
        self.open_task: str | None = None
        self.autosaver = Autosaver(self.service)

    @property
    def path(self) -> Path:
        ws = self.service.engine.workspace
        if ws is not None and ws.source_path is not None:
            return ws.source_path
        return self.initial or Path()

    @property
    def drafts(self) -> Any:
        """The engine's draft barrier, for the platform's editor routes (web/app.py)."""
        return self.service.engine.drafts

    def tools(self) -> list[ToolSpec]:
        return pvf_tools(self.service) + script_tools(self.service, self.services.dirs.config)

    def resources(self) -> list[ResourceSpec]:
        return script_resources()

    def api_routes(self) -> list[BaseRoute]:
        # editors use the platform's routes (web/app.py) with `drafts` below
        return history_routes(self.service) + script_library_routes(ScriptLibrary(self.services.dirs.config))

    def static_dir(self) -> Path | None:
        return STATIC_DIR

    async def start(self) -> None:
        self.autosaver.start()
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
        await self.service.engine.shutdown(timeout_s=30)
        await self.autosaver.stop()
        if self.service.index is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(self.service.index.close)

    async def outside_change(self, tool: str) -> dict[str, Any] | None:
        """The platform's check before every tool call (`KindWorkspace`): has another program replaced the
        archive? Reloads it when nothing is unsaved; the notice the answer carries (kinds/pvf/outside.py)."""
        return await self.service.outside.notice(tool)

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
            "externalChange": info["externalChange"],
        }


def history_routes(svc: PvfService) -> list[BaseRoute]:
    async def commit(request: Request) -> Response:
        # The history panel's diff of one saved commit (the journal holds each file's content before and after).
        try:
            out = await asyncio.to_thread(
                svc.commit_diff, request.query_params.get("workspaceId", ""), request.path_params["id"]
            )
        except BridgeError as error:
            return error_response(error)
        return JSONResponse(out)

    return [Route("/history/{id}", commit, methods=["GET"])]


def open_workspace(path: Path | None, services: KindServices) -> PvfWorkspace:
    return PvfWorkspace(path, services)
