"""One Starlette app per App: `/mcp` (MCP Streamable HTTP), `/` (browser UI), `/api` (JSON API), `/api/events` (SSE).

Routes here only validate input, call the App or its services, and shape the result; no rule lives here.
"""

from __future__ import annotations

import contextlib
import gc
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext
from deskbridge.integrations.endpoints import HEALTH_PATH, PROJECT_HEADER
from deskbridge.integrations.web import integration_routes
from deskbridge.kinds.http import error_response, json_body
from deskbridge.mcp.event_store import RETRY_MS, BoundedEventStore
from deskbridge.mcp.server import build_mcp_server
from deskbridge.web.security import UI_COOKIE, SecurityMiddleware, SecurityPolicy
from deskbridge.web.server import EndOnShutdown, ShutdownSignal

if TYPE_CHECKING:
    from deskbridge.app import App

STATIC_DIR = Path(__file__).parent / "static"


def api_routes(app: App) -> list[BaseRoute]:
    """The platform's JSON API used by every kind's UI: status, settings, token, tools, approvals, audit, events."""

    async def status(request: Request) -> Response:
        return JSONResponse(app.status())

    async def settings_get(request: Request) -> Response:
        return JSONResponse(app.settings.model_dump(by_alias=True))

    async def settings_post(request: Request) -> Response:
        try:
            updated = app.update_settings(await json_body(request))
        except BridgeError as error:
            return error_response(error)
        return JSONResponse(updated.model_dump(by_alias=True))

    async def token_get(request: Request) -> Response:
        return JSONResponse({"token": app.token})

    async def token_rotate(request: Request) -> Response:
        app.rotate_token()
        return JSONResponse({"token": app.token})

    async def tools_call(request: Request) -> Response:
        """The UI calls the same tools as MCP clients, as caller 'ui' (one engine, one set of rules)."""
        try:
            body = await json_body(request)
            call = CallContext(caller="ui", client_name="browser")
            result = await app.invoke(request.path_params["name"], body.get("arguments") or {}, call)
        except BridgeError as error:
            return error_response(error)
        return JSONResponse(result)

    async def approvals_list(request: Request) -> Response:
        return JSONResponse({"pending": [req.to_dict() for req in app.approvals.pending()]})

    async def approvals_answer(request: Request) -> Response:
        try:
            body = await json_body(request)
            approved = body.get("approved")
            if not isinstance(approved, bool):
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, "'approved' must be true or false")
            app.approvals.answer(request.path_params["id"], approved)
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    async def audit(request: Request) -> Response:
        limit = min(int(request.query_params.get("limit", "100") or 100), 1000)
        return JSONResponse({"records": [record.to_dict() for record in app.audit.recent(limit)]})

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            # An open event stream is how the broker knows a person can answer approvals in the browser.
            app.approvals.attach_ui()
            try:
                with contextlib.closing(app.events.subscribe()) as subscription:
                    yield b": connected\n\n"
                    async for event in subscription:
                        payload = json.dumps(event.data, ensure_ascii=False, default=str)
                        yield f"id: {event.seq}\nevent: {event.topic}\ndata: {payload}\n\n".encode()
            finally:
                app.approvals.detach_ui()

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return [
        Route("/api/status", status),
        Route("/api/settings", settings_get, methods=["GET"]),
        Route("/api/settings", settings_post, methods=["POST"]),
        Route("/api/token", token_get, methods=["GET"]),
        Route("/api/token/rotate", token_rotate, methods=["POST"]),
        Route("/api/tools/{name}", tools_call, methods=["POST"]),
        Route("/api/approvals", approvals_list),
        Route("/api/approvals/{id}", approvals_answer, methods=["POST"]),
        Route("/api/audit", audit),
        Route("/api/events", events),
    ]


class MCPEndpoint:
    """The SDK's Streamable HTTP endpoint, behind the `mcp_enabled` switch (read on every request, so the person can
    turn MCP off from the settings panel while the server runs)."""

    def __init__(self, app: App, sdk_endpoint: ASGIApp) -> None:
        self.app = app
        self.sdk_endpoint = sdk_endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.app.settings.mcp_enabled:
            response = JSONResponse(
                {
                    "error": {
                        "code": "MCP_DISABLED",
                        "message": "MCP is turned off in deskbridge's settings",
                        "hint": "Turn it on in the web UI's MCP settings or run `deskbridge config set mcp_enabled true`.",
                    }
                },
                status_code=503,
            )
            await response(scope, receive, send)
            return
        project = self.app.workspace.path if self.app.workspace is not None else None
        if project is None:
            await self.sdk_endpoint(scope, receive, send)
            return
        # Every reply names the project it came from, so the stdio bridge can re-check it (a server restarted on
        # the same port for another project must never answer for this one).
        stamp = (PROJECT_HEADER.encode(), quote(str(project)).encode("ascii"))

        async def stamped(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), stamp]}
            await send(message)

        await self.sdk_endpoint(scope, receive, stamped)


def health_route(app: App) -> Route:
    """`GET /mcp/health` (bearer token, like /mcp): what this server serves, for `deskbridge mcp --project`."""
    import os

    from deskbridge import __version__

    started = time.time()

    async def health(request: Request) -> Response:
        workspace = app.workspace
        return JSONResponse(
            {
                "ok": True,
                "pid": os.getpid(),
                "version": __version__,
                "started": started,
                "kind": workspace.kind if workspace is not None else None,
                "projectDir": str(workspace.path) if workspace is not None else None,
                "mcpEnabled": app.settings.mcp_enabled,
            }
        )

    return Route(HEALTH_PATH, health, methods=["GET"])


def build_web_app(
    app: App, *, port: int, extra_hosts: list[str] | None = None, require_token: bool = True
) -> Starlette:
    """The whole HTTP surface of one running App."""
    mcp_server = build_mcp_server(app)
    # Host/Origin are checked once, by SecurityMiddleware, for every route; the SDK's own copy of the check
    # is switched off so that --allow-remote has a single list to configure.
    session_manager = StreamableHTTPSessionManager(
        app=mcp_server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        # SSE polling (SEP-1699): streams open with a priming event and `retry`, and resume by Last-Event-ID.
        event_store=BoundedEventStore(),
        retry_interval=RETRY_MS,
    )
    mcp_endpoint = MCPEndpoint(app, StreamableHTTPASGIApp(session_manager))

    async def index(request: Request) -> Response:
        key = request.query_params.get("k")
        if key is not None:
            # The launch URL carries the per-launch UI secret once; keep it in a strict cookie and drop it from
            # the address bar so it is not bookmarked or shared.
            response = RedirectResponse("/", status_code=303)
            response.set_cookie(UI_COOKIE, key, httponly=True, samesite="strict", path="/")
            return response
        static = app.workspace.static_dir() if app.workspace is not None else None
        page = (static / "index.html") if static is not None else STATIC_DIR / "index.html"
        return FileResponse(page, headers={"Cache-Control": "no-store"})

    routes: list[BaseRoute] = [
        Route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"]),
        health_route(app),
        Route("/", index),
        *api_routes(app),
        *integration_routes(app),
    ]
    if app.workspace is not None:
        routes.append(Mount(f"/api/{app.workspace.kind}", routes=list(app.workspace.api_routes())))
        static = app.workspace.static_dir()
        if static is not None:
            routes.append(Mount("/static", StaticFiles(directory=static), name="static"))
    if app.workspace is None or app.workspace.static_dir() is None:
        routes.append(Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"))

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with session_manager.run():
            await app.start()
            # Everything loaded so far (the SDK's models, the kind's index) lives as long as the server: move it
            # out of the collector's way, so full collections stay short and do not stall requests.
            gc.collect()
            gc.freeze()
            try:
                yield
            finally:
                await app.stop()

    shutdown = ShutdownSignal()
    policy = SecurityPolicy(
        port=port,
        mcp_token=app.token,
        ui_secret=app.ui_secret,
        extra_hosts=list(extra_hosts or []),
        require_token=require_token,
    )
    app.security_policy = policy
    web = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(SecurityMiddleware, policy=policy),
            Middleware(EndOnShutdown, signal=shutdown),
        ],
    )
    web.state.shutdown = shutdown
    return web
