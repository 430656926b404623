"""A small stand-in for `deskbridge serve` around the markdown kind: the real service, event bus, approval broker
and audit log, `markdown_routes` mounted under /api/markdown, the built editor at / and /static, plus the few
platform routes the editor calls (settings, token, status, audit, approvals, SSE events).

The browser tests and the route tests use it until they can run against the lead's server; the platform routes
here follow the names in md-contract.md and web/app.py and are deliberately minimal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from deskbridge.core.audit import AuditLog
from deskbridge.core.errors import BridgeError
from deskbridge.core.events import EventBus
from deskbridge.core.policy import ApprovalBroker, ApprovalRules
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.approvals import approval_rules
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.ui_state import UiState
from deskbridge.kinds.markdown.web import STATIC_DIR, markdown_routes

SAMPLE = """# Field notes

Deskbridge lets a person and an AI edit **the same** document.

## Math

Euler: $e^{i\\pi} + 1 = 0$

$$
\\int_0^1 x^2\\,dx = \\frac{1}{3}
$$

## Tasks

- [x] write the editor
- [ ] enjoy it

| Theme | Mood |
| --- | --- |
| dusk | calm |
"""


@dataclass
class Bench:
    """Everything a test needs to drive the editor from the server side."""

    root: Path
    service: MarkdownService
    bus: EventBus
    broker: ApprovalBroker
    ui_state: UiState
    audit: AuditLog
    settings: dict[str, Any] = field(default_factory=dict)
    token: str = "tok-" + "0" * 60
    app: Starlette | None = None
    loop: asyncio.AbstractEventLoop | None = None
    url: str = ""

    # -- acting as an MCP client --------------------------------------------------------------------------
    async def ai_edit(self, find: str, replacement: str, *, caller: str = "mcp:pytest", doc_id: str | None = None,
                      occurrence: int = 0) -> dict[str, Any]:
        """Replace the `occurrence`-th `find` in the current text, as an AI client would through md_apply_text_edit."""
        doc = self.service.read(doc_id)
        text = doc["text"]
        at = -1
        for _ in range(occurrence + 1):
            at = text.index(find, at + 1)
        ctx = CallContext(caller=caller, client_name="pytest-agent")
        started = time.perf_counter()
        outcome = "ok"
        try:
            return await self.service.apply_edits(doc["docId"], [Edit(at, at + len(find), replacement)], ctx=ctx,
                                                  tool="md_apply_text_edit", base_version=doc["version"],
                                                  summary=f"replace {find!r}")
        except BridgeError as exc:
            outcome = str(exc.code)
            raise
        finally:
            # What the platform's App.invoke does for every tool call: one audit record, never the content.
            self.audit.record(caller=caller, client="pytest-agent", tool="md_apply_text_edit", target="notes.md",
                              outcome=outcome, duration_ms=(time.perf_counter() - started) * 1000,
                              arg_names=("startOffset", "length", "replacement"))

    def call(self, coro: Any, timeout: float = 30.0) -> Any:
        """Run a coroutine on the server's loop from the test thread (the browser tests)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Any) -> Any:
        """Start a coroutine on the server's loop and return its concurrent future (e.g. an edit awaiting approval)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def set_require_approval(self, on: bool) -> None:
        self.settings["require_approval"] = on
        self.service.approvals.rules = approval_rules({"enabled": on})
        self.bus.publish("settings", dict(self.settings))


def make_bench(root: Path, *, text: str = SAMPLE, require_approval: bool = True) -> Bench:
    """A folder with notes.md (+ a second file) opened by the real service."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "notes.md").write_text(text, encoding="utf-8")
    (root / "ideas.md").write_text("# Ideas\n\n- one\n- two\n", encoding="utf-8")
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=60)
    audit = AuditLog()
    rules: ApprovalRules = approval_rules({"enabled": require_approval})
    service = MarkdownService(root, policy=broker, events=bus, audit=audit, approval_settings=rules)
    service.open_path(root / "notes.md")
    ui_state = UiState(events=bus)
    settings = {
        "port": 17891, "mcp_enabled": True, "access_scope": "current_folder", "custom_roots": [],
        "require_approval": require_approval, "approval_rules": {}, "audit_log": False,
    }
    bench = Bench(root, service, bus, broker, ui_state, audit, settings)
    bench.app = build_app(bench)
    return bench


def build_app(bench: Bench) -> Starlette:
    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})

    async def settings_get(request: Request) -> Response:
        return JSONResponse(bench.settings)

    async def settings_post(request: Request) -> Response:
        body = await request.json()
        bench.settings.update(body)
        if "require_approval" in body:
            bench.set_require_approval(bool(body["require_approval"]))
        bench.bus.publish("settings", dict(bench.settings))
        return JSONResponse(bench.settings)

    async def token_get(request: Request) -> Response:
        return JSONResponse({"token": bench.token})

    async def token_rotate(request: Request) -> Response:
        bench.token = "tok-" + str(time.time_ns())
        return JSONResponse({"token": bench.token})

    async def status(request: Request) -> Response:
        return JSONResponse({"workspace": bench.service.status(), "mcpEnabled": bench.settings["mcp_enabled"],
                             "requireApproval": bench.settings["require_approval"]})

    async def audit(request: Request) -> Response:
        records = [
            {"timestamp": r.timestamp, "caller": r.caller, "client": r.client, "tool": r.tool, "target": r.target,
             "outcome": r.outcome, "approval": str(r.approval), "duration_ms": round(r.duration_ms, 1)}
            for r in bench.audit.recent(100)
        ]
        return JSONResponse({"records": records})

    async def approvals(request: Request) -> Response:
        return JSONResponse({"pending": [r.to_dict() for r in bench.broker.pending()]})

    async def approval_answer(request: Request) -> Response:
        body = await request.json()
        try:
            bench.broker.answer(request.path_params["id"], bool(body.get("approved")))
        except BridgeError as exc:
            return JSONResponse({"error": exc.to_dict()}, status_code=404)
        return JSONResponse({"ok": True})

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[bytes]:
            sub = bench.bus.subscribe()
            bench.broker.attach_ui()
            try:
                yield b": connected\n\n"
                while True:
                    try:
                        event = await sub.get(timeout=10)
                    except TimeoutError:
                        yield b": ping\n\n"
                        continue
                    payload = json.dumps(event.data, ensure_ascii=False, default=str)
                    yield f"event: {event.topic}\ndata: {payload}\n\n".encode()
            finally:
                bench.broker.detach_ui()
                sub.close()

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    routes = [
        Route("/", index),
        Route("/api/settings", settings_get, methods=["GET"]),
        Route("/api/settings", settings_post, methods=["POST"]),
        Route("/api/token", token_get),
        Route("/api/token/rotate", token_rotate, methods=["POST"]),
        Route("/api/status", status),
        Route("/api/audit", audit),
        Route("/api/approvals", approvals),
        Route("/api/approvals/{id}", approval_answer, methods=["POST"]),
        Route("/api/events", events),
        Mount("/api/markdown", routes=markdown_routes(bench.service, bench.ui_state)),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
    ]
    return Starlette(routes=routes)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(bench: Bench) -> Iterator[Bench]:
    """Run the bench app with uvicorn on a free loopback port in a thread; `bench.url` is its address."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(bench.app, host="127.0.0.1", port=port, log_level="critical",
                                           lifespan="off", timeout_graceful_shutdown=1))
    loop = asyncio.new_event_loop()
    bench.loop = loop

    async def drain() -> None:
        # Long-polls and event streams the browser left open: cancel them so the loop closes cleanly.
        pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def run() -> None:
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(server.serve())
            loop.run_until_complete(drain())
        finally:
            loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    bench.url = f"http://127.0.0.1:{port}"
    try:
        yield bench
    finally:
        server.should_exit = True
        thread.join(timeout=5)
