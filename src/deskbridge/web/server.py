"""The uvicorn server of `deskbridge serve`: connection guards, and the middleware that ends long requests on stop.

uvicorn waits for open responses before it shuts down. Event streams, long-polls and legacy MCP GET streams never
end by themselves, so without `EndOnShutdown` Ctrl-C would hang for the grace period and then cancel them with a
traceback.

uvicorn has no header timeout (a connection that connects and sends nothing, or sends a header a byte at a time,
is kept for ever) and no connection cap that keeps the person's own requests working: `limit_concurrency` answers
503 to everyone once idle connections fill it. `GuardedProtocol` adds, per connection (core.limits):

* a header deadline — the request line and headers must arrive within `HTTP_HEADER_TIMEOUT_S` of connecting (or
  of the first byte of the next request on a kept-alive connection) and within `HTTP_HEADER_MAX_BYTES`;
* a body stall timeout — a request body that stops arriving for `HTTP_BODY_IDLE_TIMEOUT_S` ends the connection
  (not while the server itself holds reading back);
* a connection cap — at `HTTP_CONNECTIONS_MAX` open connections a new one closes the connection that has waited
  longest without a request in progress, so a thousand idle sockets cannot lock the person out; only when every
  connection is busy serving a request is the new one refused.

`BridgeServer` checks the deadlines once a second from uvicorn's own tick; `server_config` is the one place the
uvicorn options are chosen (used by `serve`, `demo` and `deskbridge.testing`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType
from typing import Any, Final

import anyio
import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskbridge.core import limits
from deskbridge.core.terminal import printable

logger = logging.getLogger(__name__)


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


class _Guard:
    """Mixed into uvicorn's HTTP protocol class (httptools or h11); see the module docstring."""

    connections: set[Any]
    transport: Any
    cycle: Any
    flow: Any

    header_timeout_s = limits.HTTP_HEADER_TIMEOUT_S
    header_max_bytes = limits.HTTP_HEADER_MAX_BYTES
    body_idle_timeout_s = limits.HTTP_BODY_IDLE_TIMEOUT_S
    connections_max = limits.HTTP_CONNECTIONS_MAX

    def connection_made(self, transport: Any) -> None:
        now = time.monotonic()
        self._waiting_since: float | None = now
        self._header_bytes = 0
        self._last_data = now
        super().connection_made(transport)  # type: ignore[misc]
        if len(self.connections) > self.connections_max:
            self._make_room()

    def _make_room(self) -> None:
        # Connections already closed by us stay in the set until the loop runs their `connection_lost`.
        live = [p for p in self.connections if p.transport is not None and not p.transport.is_closing()]
        if len(live) <= self.connections_max:
            return
        victim = None
        oldest = float("inf")
        for proto in live:
            if proto is self or not isinstance(proto, _Guard) or proto.busy:
                continue
            since = proto._waiting_since if proto._waiting_since is not None else proto._last_data
            if since < oldest:
                victim, oldest = proto, since
        if victim is not None:
            victim.drop()
        else:
            logger.warning("refusing a connection: %d connections are all busy", len(self.connections) - 1)
            self.drop()

    @property
    def busy(self) -> bool:
        """A request is in progress on this connection (its headers arrived and its response is not done)."""
        cycle = self.cycle
        return cycle is not None and not cycle.response_complete

    def drop(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        now = time.monotonic()
        self._last_data = now
        before = self.cycle
        # Waiting for the headers of a next request: no request yet, or the last one fully received and
        # answered (bytes after an early answer, e.g. a 413, are the rest of that request's body).
        waiting = before is None or (before.response_complete and not before.more_body)
        if waiting:
            if self._waiting_since is None:
                self._waiting_since = now
                self._header_bytes = 0
            self._header_bytes += len(data)
        super().data_received(data)  # type: ignore[misc]
        if self.cycle is not before:  # the headers of a request arrived
            self._waiting_since = None
            self._header_bytes = 0
        elif waiting and self._header_bytes > self.header_max_bytes and not self.transport.is_closing():
            self.transport.write(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            )
            self.transport.close()

    def overdue(self, now: float) -> str | None:
        """Why this connection should be closed now, or None."""
        if self._waiting_since is not None and now - self._waiting_since > self.header_timeout_s:
            return "headers not received in time"
        cycle = self.cycle
        if (
            cycle is not None
            and cycle.more_body
            and not getattr(self.flow, "read_paused", False)
            and now - self._last_data > self.body_idle_timeout_s
        ):
            return "request body stalled"
        return None


def guarded_protocol_class() -> type:
    """uvicorn's fastest available HTTP protocol with `_Guard` mixed in."""
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
    except ImportError:  # pragma: no cover - httptools ships with uvicorn[standard]
        from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]
    return type("GuardedProtocol", (_Guard, Base), {})


def server_config(web: ASGIApp, **overrides: Any) -> uvicorn.Config:
    """The uvicorn options of every deskbridge server (connection guards included)."""
    options: dict[str, Any] = {
        "log_level": "warning",
        "lifespan": "on",
        "timeout_graceful_shutdown": 3,
        "http": guarded_protocol_class(),
        "ws": "none",  # no route speaks WebSocket; an upgrade is then an ordinary (refused) HTTP request
        "timeout_keep_alive": limits.HTTP_KEEP_ALIVE_S,
        "h11_max_incomplete_event_size": limits.HTTP_HEADER_MAX_BYTES,
    }
    options.update(overrides)
    return uvicorn.Config(web, **options)


CONFIRM_EXIT_S: Final = 10.0
"""How long a second Ctrl+C stops a `serve` that warned about unsaved documents (seconds)."""


class BridgeServer(uvicorn.Server):
    """A uvicorn server that raises the shutdown signal before it drains connections, and enforces the
    connection deadlines of `GuardedProtocol` once a second."""

    def __init__(self, config: uvicorn.Config, stop_signal: ShutdownSignal) -> None:
        super().__init__(config)
        self.stop_signal = stop_signal  # not `shutdown`: that is uvicorn's own method
        self.dropped = 0
        """Connections closed by a deadline (for tests)."""
        self.on_stopped: list[Any] = []
        """Callables run once the server has stopped (before uvicorn re-raises a SIGTERM, which would skip a
        `finally` around `run`)."""
        self.unsaved: Callable[[], list[str]] | None = None
        """Names of documents with unsaved changes (`serve` sets it): a Ctrl+C while there are some asks first."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._warned_at = -1e9

    async def shutdown(self, sockets: list[Any] | None = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            for callback in self.on_stopped:
                try:
                    callback()
                except Exception:  # pragma: no cover - cleanup must not hide the shutdown
                    logger.warning("cleanup after stopping failed", exc_info=True)

    async def on_tick(self, counter: int) -> bool:
        if counter % 10 == 0:  # uvicorn ticks every 0.1 s
            self.enforce_deadlines()
        return await super().on_tick(counter)

    def enforce_deadlines(self, now: float | None = None) -> int:
        now = time.monotonic() if now is None else now
        closed = 0
        for proto in list(self.server_state.connections):
            if isinstance(proto, _Guard) and proto.overdue(now) is not None:
                proto.drop()
                closed += 1
        self.dropped += closed
        return closed

    async def serve(self, sockets: list[Any] | None = None) -> None:
        self.stop_signal.bind()
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        # A Ctrl+C used to end `serve` at once and drop every unsaved document (the person's typing in the
        # browser, an AI's edits) without a word. Like Jupyter's "Shutdown this server?", the first Ctrl+C with
        # unsaved documents names them and the second within CONFIRM_EXIT_S quits. The check runs on the event
        # loop, not in the signal handler, which may have interrupted code holding the workspace's locks.
        if (
            sig == signal.SIGINT
            and self.unsaved is not None
            and self._loop is not None
            and not self.should_exit
            and time.monotonic() - self._warned_at > CONFIRM_EXIT_S
        ):
            self._loop.call_soon_threadsafe(self._exit_unless_unsaved, sig, frame)
            return
        self._exit(sig, frame)

    def _exit(self, sig: int, frame: FrameType | None) -> None:
        self.stop_signal.set()
        super().handle_exit(sig, frame)

    def _exit_unless_unsaved(self, sig: int, frame: FrameType | None) -> None:
        try:
            names = self.unsaved() if self.unsaved is not None else []
        except Exception:  # pragma: no cover - never keep a person from stopping the server
            names = []
        if not names:
            self._exit(sig, frame)
            return
        self._warned_at = time.monotonic()
        # Document names are file names, which may hold anything: control characters are spelled out.
        shown = ", ".join(printable(n) for n in names[:5]) + (
            f" and {len(names) - 5} more" if len(names) > 5 else ""
        )
        print(
            f"\ndeskbridge: unsaved changes in {shown}. Save them in the browser (Ctrl+S), or press Ctrl+C again "
            f"within {CONFIRM_EXIT_S:g} s to stop and lose them.",
            file=sys.stderr,
            flush=True,
        )

    def request_exit(self) -> None:
        """Stop from code (tests, `demo --exit-after`) without faking a signal, which uvicorn would re-raise."""
        self.stop_signal.set()
        self.should_exit = True
