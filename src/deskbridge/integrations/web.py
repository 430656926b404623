"""The web UI's routes for connecting AI clients: plan and apply `setup`, install the skill, the first-run offer.

Nothing is written by a GET: the page shows a plan (the diff) first and writes only on the person's click, a
POST that carries the UI secret like every `/api` route. Each write is recorded in the audit log as caller `ui`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from deskbridge.core.audit import Approval
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.integrations.endpoints import private_state_dir, state_dir
from deskbridge.integrations.hosts import HOST_TABLE
from deskbridge.kinds.http import error_response, json_body

if TYPE_CHECKING:
    from deskbridge.app import App


def onboarding_file() -> Path:
    return state_dir() / "onboarding.json"


def onboarding_state() -> dict[str, Any]:
    try:
        data = json.loads(onboarding_file().read_text("utf-8"))
    except (OSError, ValueError):
        data = {}
    return data if isinstance(data, dict) else {}


def save_onboarding(**changes: Any) -> dict[str, Any]:
    data = {**onboarding_state(), **changes}
    path = onboarding_file()
    private_state_dir(path.parent)
    tmp = path.with_name(f".onboarding.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data), "utf-8")
    os.replace(tmp, path)
    return data


def integration_routes(app: App) -> list[BaseRoute]:
    def project() -> Path:
        if app.workspace is None:
            raise BridgeError(ErrorCode.NO_WORKSPACE, "no workspace is open", hint="Open a workspace first.")
        return Path(app.workspace.path)

    def plan_from(body: dict[str, Any]) -> Any:
        from deskbridge.integrations.setup import plan_remove, plan_setup

        host = str(body.get("host", ""))
        scope = body.get("scope") or "user"
        if host not in HOST_TABLE or scope not in ("user", "project"):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"unknown host {host!r} or scope {scope!r}",
                hint=f"Use one of {', '.join(HOST_TABLE)} with scope user or project.",
            )
        if body.get("remove"):
            return plan_remove(host, project(), scope=scope)
        url = app.mcp_url() if body.get("http") else None
        return plan_setup(host, project(), scope=scope, http_url=url)

    def audit(tool: str, target: str, outcome: str, started: float, names: Any) -> None:
        app.audit.record(
            caller="ui",
            client="browser",
            tool=tool,
            approval=Approval.NONE,
            target=target,
            outcome=outcome,
            duration_ms=(time.perf_counter() - started) * 1000,
            arg_names=names,
        )

    async def hosts(request: Request) -> Response:
        from deskbridge.integrations.setup import setups

        rows = [
            {"name": h.name, "title": h.title, "scopes": list(h.scopes), "http": h.http}
            for h in HOST_TABLE.values()
        ]
        return JSONResponse({"hosts": rows, "configured": setups()})

    async def setup_plan(request: Request) -> Response:
        """What a click would change: the file and the diff. Writes nothing."""
        try:
            return JSONResponse(plan_from(await json_body(request)).to_dict())
        except BridgeError as error:
            return error_response(error)

    async def setup_apply(request: Request) -> Response:
        from deskbridge.integrations.setup import apply

        started = time.perf_counter()
        body: dict[str, Any] = {}
        try:
            body = await json_body(request)
            plan = plan_from(body)
            backup = apply(plan) if plan.changes else None
        except BridgeError as error:
            audit("deskbridge_setup", str(body.get("host", "")), str(error.code), started, body.keys())
            return error_response(error)
        audit("deskbridge_setup", f"{plan.host.name}:{plan.file}", "ok", started, body.keys())
        save_onboarding(configured=True)
        return JSONResponse(
            {**plan.to_dict(), "written": plan.changes, "backup": str(backup) if backup else None}
        )

    async def skill_install(request: Request) -> Response:
        from deskbridge.integrations.skill import install

        started = time.perf_counter()
        body: dict[str, Any] = {}
        try:
            body = await json_body(request)
            result = install(str(body.get("target") or "agents"), project_dir=project())
        except BridgeError as error:
            audit(
                "deskbridge_skill_install", str(body.get("target", "")), str(error.code), started, body.keys()
            )
            return error_response(error)
        audit("deskbridge_skill_install", result["path"], "ok", started, body.keys())
        return JSONResponse(result)

    async def onboarding_get(request: Request) -> Response:
        from deskbridge.integrations.setup import setups

        state = onboarding_state()
        show = (
            app.workspace is not None
            and not setups()
            and not state.get("dismissed")
            and not state.get("configured")
        )
        return JSONResponse({"show": show, **state})

    async def onboarding_post(request: Request) -> Response:
        try:
            body = await json_body(request)
        except BridgeError as error:
            return error_response(error)
        if body.get("dismissed") is not True:
            return error_response(BridgeError(ErrorCode.INVALID_ARGUMENT, 'send {"dismissed": true}'))
        return JSONResponse(save_onboarding(dismissed=True, dismissedAt=time.time()))

    return [
        Route("/api/integrations/hosts", hosts, methods=["GET"]),
        Route("/api/integrations/setup/plan", setup_plan, methods=["POST"]),
        Route("/api/integrations/setup/apply", setup_apply, methods=["POST"]),
        Route("/api/integrations/skill/install", skill_install, methods=["POST"]),
        Route("/api/integrations/onboarding", onboarding_get, methods=["GET"]),
        Route("/api/integrations/onboarding", onboarding_post, methods=["POST"]),
    ]
