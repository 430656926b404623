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
    """Set once when the server starts to stop; safe to set from a signal handler."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.is_set = False

    def bind(self) -> None:
        """Attach to the running loop (called once the server runs)."""
        self._loop = asyncio.get_running_loop()
        self._event = asyncio.Event()

    def set(self) -> None:
        if self.is_set:
            return
        self.is_set = True
        if self._loop is not None and self._event is not None:
            # May run inside a signal handler: only hand the work to the loop.
            self._loop.call_soon_threadsafe(self._event.set)

    async def wait(self) -> None:
        if self._event is None:
            self.bind()
        assert self._event is not None
        await self._event.wait()


class EndOnShutdown:
    """Cancels in-flight HTTP requests when the server stops: 503 if nothing was sent yet, else the stream ends."""

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

        async with anyio.create_task_group() as tg:
            async def stop_on_shutdown() -> None:
                await self.signal.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(stop_on_shutdown)
            await self.app(scope, receive, tracking_send)
            tg.cancel_scope.cancel()
        if not self.signal.is_set or finished:
            return
        if started:  # a stream was cut short: end its body properly so the client sees a clean close
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        else:
            body = json.dumps({"error": {"code": "SHUTTING_DOWN", "message": "deskbridge is stopping",
                                         "hint": "Start `deskbridge serve` again, then retry."}}).encode()
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json")]})
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
