"""The uvicorn server of `deskbridge serve`, and the middleware that ends long requests when it is asked to stop.

uvicorn waits for open responses before it shuts down. Event streams, long-polls and legacy MCP GET streams never
end by themselves, so without this Ctrl-C would hang for the grace period and then cancel them with a traceback.
"""

from __future__ import annotations

import asyncio
import json
from types import FrameType
from typing import Any

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send


class ShutdownSignal:
    """Raised once when the server starts to stop; cancels every registered in-flight request.

    Safe to raise from a signal handler: the work is handed to the event loop.
    """

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scopes: set[anyio.CancelScope] = set()
        self.is_set = False

    def bind(self) -> None:
        """Attach to the running loop (called once the server runs)."""
        self._loop = asyncio.get_running_loop()

    def set(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._fire)
        else:
            self.is_set = True

    def _fire(self) -> None:
        self.is_set = True
        for scope in list(self._scopes):
            scope.cancel()

    def register(self, scope: anyio.CancelScope) -> None:
        if self.is_set:
            scope.cancel()
        self._scopes.add(scope)

    def unregister(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)


class EndOnShutdown:
    """Cancels in-flight HTTP requests when the server stops: 503 if nothing was sent yet, else the stream ends.

    One cancel scope per request and no extra task, so the cost on the hot path stays in microseconds.
    """

    def __init__(self, app: ASGIApp, signal: ShutdownSignal) -> None:
        self.app = app
        self.signal = signal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = finished = False

        async def tracking_send(message: Message) -> None:
            nonlocal started, finished
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                finished = True
            await send(message)

        with anyio.CancelScope() as cancel_scope:
            self.signal.register(cancel_scope)
            try:
                await self.app(scope, receive, tracking_send)
            finally:
                self.signal.unregister(cancel_scope)
        if not cancel_scope.cancelled_caught or finished:
            return
        if started:  # a stream was cut short: end its body properly so the client sees a clean close
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            body = json.dumps(
                {
                    "error": {
                        "code": "SHUTTING_DOWN",
                        "message": "deskbridge is stopping",
                        "hint": "Start `deskbridge serve` again, then retry.",
                    }
                }
            ).encode()
            await send(
                {
                    "type": "http.response.start",
                    "status": 503,
                    "headers": [(b"content-type", b"application/json")],
                }
            )
            await send({"type": "http.response.body", "body": body})


class BridgeServer(uvicorn.Server):
    """A uvicorn server that raises the shutdown signal before it drains connections."""

    def __init__(self, config: uvicorn.Config, stop_signal: ShutdownSignal) -> None:
        super().__init__(config)
        self.stop_signal = stop_signal  # not `shutdown`: that is uvicorn's own method

    async def serve(self, sockets: list[Any] | None = None) -> None:
        self.stop_signal.bind()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stop_signal.set()
        super().handle_exit(sig, frame)

    def request_exit(self) -> None:
        """Stop from code (tests, `demo --exit-after`) without faking a signal, which uvicorn would re-raise."""
        self.stop_signal.set()
        self.should_exit = True
