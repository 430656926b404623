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
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import quote

from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    JSONResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext
from deskbridge.integrations.endpoints import HEALTH_PATH, PROJECT_HEADER
from deskbridge.integrations.web import integration_routes
from deskbridge.kinds.http import error_response, int_arg, json_body
from deskbridge.mcp.event_store import RETRY_MS, BoundedEventStore
from deskbridge.mcp.server import build_mcp_server
from deskbridge.web.mcp_transport import BoundedSessionManager, RequestSizeGuard
from deskbridge.web.security import UI_COOKIE, LoginCodes, SecurityMiddleware, SecurityPolicy
from deskbridge.web.server import EndOnShutdown, ShutdownSignal

if TYPE_CHECKING:
    from deskbridge.app import App

STATIC_DIR = Path(__file__).parent / "static"

AUDIT_PAGE_DEFAULT: Final = 100
"""Audit records `GET /api/audit` returns without `?limit=` (the newest; at most `limits.AUDIT_MEMORY_MAX`)."""


def api_routes(app: App, policy: SecurityPolicy | None = None) -> list[BaseRoute]:
    """The platform's JSON API used by every kind's UI: status, settings, token, tools, approvals, audit, events.

    The MCP token is never handed out by a plain GET: the page asks (`POST /api/token/reveal`), the person
    confirms in the page, and the page then redeems that one request (`POST /api/token/reveal/{id}`) within
    `TOKEN_REVEAL_TTL_S`. Each reveal is recorded in the audit and announced to every open page.
    """
    reveals = LoginCodes(ttl_s=limits.TOKEN_REVEAL_TTL_S, max_outstanding=4)

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

    async def token_reveal_request(request: Request) -> Response:
        return JSONResponse(
            {
                "requestId": reveals.issue(),
                "expiresInS": limits.TOKEN_REVEAL_TTL_S,
                "question": "Show the MCP token in this page? Anyone who sees it can act on your files "
                "through deskbridge.",
            },
            headers={"Cache-Control": "no-store"},
        )

    async def token_reveal(request: Request) -> Response:
        try:
            body = await json_body(request)
            if body.get("confirmed") is not True:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    "the person did not confirm showing the token",
                    hint='Ask in the page first and send {"confirmed": true} only after the person agreed.',
                )
            if not reveals.redeem(request.path_params["id"]):
                raise BridgeError(
                    ErrorCode.NOT_FOUND,
                    "this request to show the token is unknown, used or expired",
                    hint="Ask again with POST /api/token/reveal and confirm within a minute.",
                )
        except BridgeError as error:
            return error_response(error)
        app.audit.record(caller="ui", client="browser", tool="token.reveal", target="mcp-token")
        app.events.publish("settings", {"tokenRevealed": True})
        return JSONResponse({"token": app.token}, headers={"Cache-Control": "no-store"})

    async def token_rotate(request: Request) -> Response:
        # The new token is not returned: showing it is a separate, confirmed request (see above).
        app.rotate_token()
        app.audit.record(caller="ui", client="browser", tool="token.rotate", target="mcp-token")
        return JSONResponse({"rotated": True})

    async def login_code(request: Request) -> Response:
        """A fresh one-time login code for another browser window (`deskbridge open` asks for it)."""
        if policy is None:
            return error_response(BridgeError(ErrorCode.NOT_READY, "the server is not serving a browser UI"))
        code = policy.login_codes.issue()
        return JSONResponse(
            {"code": code, "path": f"/?k={code}", "expiresInS": policy.login_codes.ttl_s},
            headers={"Cache-Control": "no-store"},
        )

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
        try:
            limit = int_arg(
                request.query_params.get("limit") or AUDIT_PAGE_DEFAULT,
                "limit",
                minimum=1,
                maximum=limits.AUDIT_MEMORY_MAX,
            )
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"records": [record.to_dict() for record in app.audit.recent(limit)]})

    def _barrier() -> Any:
        drafts = getattr(app.workspace, "drafts", None)
        if drafts is None:
            raise BridgeError(ErrorCode.NOT_READY, "the open workspace has no editors to ask")
        return drafts

    def _editor_id(value: Any) -> str:
        if not isinstance(value, str) or not 0 < len(value) <= 128:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, "clientId (editor) must be a string of 1 to 128 characters"
            )
        return value

    async def editor_ack(request: Request) -> Response:
        """An editor's answer to a `prepare` event of the draft barrier (core.lifecycle.DraftBarrier)."""
        try:
            body = await json_body(request)
            op = body.get("operationId")
            if not isinstance(op, str):
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, "operationId is required")
            _barrier().ack(
                op, _editor_id(body.get("clientId")), bool(body.get("hasDrafts")), body.get("detail")
            )
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    async def editor_report(request: Request) -> Response:
        """An editor's own report of whether it holds a draft: shown in status, never trusted for a decision."""
        try:
            body = await json_body(request)
            _barrier().report(_editor_id(body.get("clientId")), bool(body.get("hasDrafts")))
        except BridgeError as error:
            return error_response(error)
        return JSONResponse({"ok": True})

    async def events(request: Request) -> Response:
        # Only the page's own EventSource reaches here: a document's `<img src=".../api/events?editor=x">`, which
        # registered a phantom editor that never answers the draft barrier, is refused by the platform's
        # middleware (web/security.py `fetch_metadata_refusal`).
        raw_editor = request.query_params.get("editor")
        try:
            editor = None if raw_editor is None else _editor_id(raw_editor)
        except BridgeError as error:
            return error_response(error)

        async def stream() -> AsyncIterator[bytes]:
            # An open event stream is how the broker knows a person can answer approvals in the browser,
            # and (with ?editor=) how the draft barrier knows which editors to ask: registered exactly while
            # the stream is open, so a closed tab never holds a save and an open one is always asked.
            app.approvals.attach_ui()
            drafts = getattr(app.workspace, "drafts", None) if editor else None
            if drafts is not None:
                drafts.register(editor)
            try:
                with contextlib.closing(app.events.subscribe()) as subscription:
                    yield b": connected\n\n"
                    async for event in subscription:
                        payload = json.dumps(event.data, ensure_ascii=False, default=str)
                        yield f"id: {event.seq}\nevent: {event.topic}\ndata: {payload}\n\n".encode()
            finally:
                app.approvals.detach_ui()
                if drafts is not None:
                    drafts.unregister(editor)

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(stream(), media_type="text/event-stream", headers=headers)

    return [
        Route("/api/status", status),
        Route("/api/settings", settings_get, methods=["GET"]),
        Route("/api/settings", settings_post, methods=["POST"]),
        Route("/api/token/reveal", token_reveal_request, methods=["POST"]),
        Route("/api/token/reveal/{id}", token_reveal, methods=["POST"]),
        Route("/api/token/rotate", token_rotate, methods=["POST"]),
        Route("/api/login-code", login_code, methods=["POST"]),
        Route("/api/tools/{name}", tools_call, methods=["POST"]),
        Route("/api/approvals", approvals_list),
        Route("/api/approvals/{id}", approvals_answer, methods=["POST"]),
        Route("/api/audit", audit),
        Route("/api/events", events),
        Route("/api/editors/ack", editor_ack, methods=["POST"]),
        Route("/api/editors/report", editor_report, methods=["POST"]),
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
    app.listen_port = port
    mcp_server = build_mcp_server(app)
    # Host/Origin are checked once, by SecurityMiddleware, for every route; the SDK's own copy of the check
    # is switched off so that --allow-remote has a single list to configure. Sessions are capped with LRU
    # eviction and an idle timeout; request bodies have one limit, answered readably (web/mcp_transport.py).
    session_manager = BoundedSessionManager(
        app=mcp_server,
        security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        # SSE polling (SEP-1699): streams open with a priming event and `retry`, and resume by Last-Event-ID.
        event_store=BoundedEventStore(),
        retry_interval=RETRY_MS,
    )
    mcp_endpoint = MCPEndpoint(app, RequestSizeGuard(StreamableHTTPASGIApp(session_manager)))
    policy = SecurityPolicy(
        port=port,
        mcp_token=app.token,
        ui_secret=app.ui_secret,
        extra_hosts=list(extra_hosts or []),
        require_token=require_token,
    )

    async def index(request: Request) -> Response:
        code = request.query_params.get("k")
        if code is not None:
            # A one-time login code (from the file `serve` opened, the printed link or `deskbridge open`):
            # exchange it for the UI secret in a strict cookie and drop it from the address bar. Anything that
            # is not a live code changes nothing, so a document's <img src="/?k=x"> cannot log the person out.
            if policy.login_codes.redeem(code):
                response = RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
                response.set_cookie(UI_COOKIE, app.ui_secret, httponly=True, samesite="strict", path="/")
                return response
            if policy.ui_authorised(request.scope):
                return RedirectResponse("/", status_code=303, headers={"Cache-Control": "no-store"})
            return HTMLResponse(LOGIN_EXPIRED_PAGE, status_code=403, headers={"Cache-Control": "no-store"})
        static = app.workspace.static_dir() if app.workspace is not None else None
        page = (static / "index.html") if static is not None else STATIC_DIR / "index.html"
        return FileResponse(page, headers={"Cache-Control": "no-store"})

    routes: list[BaseRoute] = [
        Route("/mcp", mcp_endpoint, methods=["GET", "POST", "DELETE"]),
        health_route(app),
        Route("/", index),
        *api_routes(app, policy),
        *integration_routes(app),
    ]
    if app.workspace is not None:
        routes.append(Mount(f"/api/{app.workspace.kind}", routes=list(app.workspace.api_routes())))
        static = app.workspace.static_dir()
        if static is not None:
            routes.append(Mount("/static", StaticFiles(directory=static), name="static"))
    if app.workspace is None or app.workspace.static_dir() is None:
        routes.append(Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"))
    # The platform's shared page modules (the MCP settings panel, connect.js's first-run offer), reachable from
    # every kind's page under a path no kind's /static can shadow.
    routes.append(Mount("/platform-static", StaticFiles(directory=STATIC_DIR), name="platform-static"))

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
    app.security_policy = policy
    web = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[
            Middleware(SecurityMiddleware, policy=policy, routes=routes),
            Middleware(EndOnShutdown, signal=shutdown),
        ],
    )
    web.state.shutdown = shutdown
    web.state.session_manager = session_manager
    web.state.policy = policy
    return web


LOGIN_EXPIRED_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>deskbridge: link used or expired</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40rem;margin:4rem auto;padding:0 1rem}</style></head>
<body><h1>This login link was already used or has expired</h1>
<p>deskbridge login links work once, within a minute, so that nobody can reuse one they saw.</p>
<p>To open the UI again, run <code>deskbridge open</code> in a terminal (it opens a fresh link in your browser),
or restart <code>deskbridge serve</code>.</p>
<p>If this browser is still signed in, <a href="/">go to deskbridge</a>.</p>
<script>
// A browser that is still signed in goes straight on (this page's own requests carry the session cookie,
// which a link opened from a file or another site does not).
fetch("/api/status", { credentials: "same-origin" }).then((r) => { if (r.ok) location.replace("/"); });
</script></body></html>
"""
