"""The MCP endpoint's guards around the SDK's Streamable HTTP transport: bounded sessions and bounded requests.

* `BoundedSessionManager` — the SDK refuses every new session with 503 once `max_sessions` are open, and an
  abandoned session lives for its idle timeout (30 min by default), so a client that opens sessions and walks
  away locks everyone else out. Here the cap is `MCP_SESSIONS_MAX` and, at the cap, the least recently used
  session that has no request in flight is ended to make room (once the new session's initialize succeeded, so a
  refused one ends no one's session); sessions idle for `MCP_SESSION_IDLE_TIMEOUT_S` end by themselves.
* Only an initialize request opens a session. The SDK admitted a session for every request without a session id
  before looking at it — a `tools/list` without one was refused with 400 but was a session while it ran (at the
  cap it ended someone's idle session to make room) and its refusal named that session's id. Here a request
  without a session id that is not an initialize is refused (400, the SDK's own answer) before any session is
  admitted, and a refused initialize names no session.
* `RequestSizeGuard` — one limit, `REQUEST_BODY_MAX_BYTES`, for every MCP request: the same number the tool
  schemas advertise as their largest `maxLength`. The SDK answers a bigger body with a bare 413, which clients
  report as a transport failure the model cannot read; here an oversize `tools/call` gets an ordinary `isError`
  result (code LIMIT_EXCEEDED) that names the limit, and any other oversize request a JSON-RPC error naming it.
"""

from __future__ import annotations

import collections
import json
import logging
import time
from typing import Any, Final

import anyio
from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode

logger = logging.getLogger(__name__)

_PEEK_BYTES: Final = 64 * 1024
"""Bytes kept from the start of an oversize body to find its JSON-RPC id, method and tool name."""

_DRAIN_MAX_BYTES: Final = 8 * limits.REQUEST_BODY_MAX_BYTES
"""An oversize body is read (and thrown away) up to this size, so the client gets to read the answer; past it the
connection is closed with a 413."""


class BoundedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with least-recently-used eviction at the session cap (module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("max_sessions", limits.MCP_SESSIONS_MAX)
        kwargs.setdefault("session_idle_timeout", limits.MCP_SESSION_IDLE_TIMEOUT_S)
        kwargs.setdefault("max_request_body_size", limits.REQUEST_BODY_MAX_BYTES)
        super().__init__(*args, **kwargs)
        self._last_used: dict[str, float] = {}
        self._in_flight: collections.Counter[str] = collections.Counter()
        self.evicted = 0
        """Sessions ended to make room (for tests and the status page)."""

    @property
    def open_sessions(self) -> int:
        return len(self._server_instances)

    async def _handle_stateful_request(self, scope: Scope, receive: Receive, send: Send) -> None:
        session_id = _header(scope, MCP_SESSION_ID_HEADER.lower().encode())
        if session_id is None:
            await self._open_session(scope, receive, send)
            return
        if session_id not in self._server_instances:
            await super()._handle_stateful_request(scope, receive, send)
            return
        self._last_used[session_id] = time.monotonic()
        self._in_flight[session_id] += 1
        try:
            await super()._handle_stateful_request(scope, receive, send)
        finally:
            self._in_flight[session_id] -= 1
            if self._in_flight[session_id] <= 0:
                del self._in_flight[session_id]
            if session_id in self._server_instances:
                self._last_used[session_id] = time.monotonic()

    async def _open_session(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A request without a session id: an initialize goes on to the SDK, which admits a session for it;
        anything else is refused here, admitting none (module docstring)."""
        body = b""
        if scope.get("method") == "POST":
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    return  # the client went away
                body += message.get("body", b"")
                if not message.get("more_body", False):
                    break
        try:
            document = json.loads(body) if body else None
        except ValueError:
            await _json(send, 400, _rpc_error(-32700, "Parse error: the request body is not JSON"))
            return
        if not (isinstance(document, dict) and document.get("method") == "initialize" and "id" in document):
            # The SDK's answer to a request without a session id that is not an initialize.
            await _json(send, 400, _rpc_error(-32600, "Bad Request: Missing session ID"))
            return
        replay: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

        async def replayed() -> Message:
            return replay.pop() if replay else await receive()

        async def no_session_named_when_refused(message: Message) -> None:
            # The SDK names the session it admitted even in a refusal, and then discards that session.
            if message["type"] == "http.response.start" and message["status"] >= 400:
                header = MCP_SESSION_ID_HEADER.lower().encode()
                message = {
                    **message,
                    "headers": [(k, v) for k, v in message.get("headers", []) if k != header],
                }
            await send(message)

        await super()._handle_stateful_request(scope, replayed, no_session_named_when_refused)

    def _admit_session(self, requestor: Any) -> Any:
        # Called by the SDK under its session-creation lock. At the cap, a session is admitted one over it while
        # its initialize runs when an idle session could make room; that one is ended only once the initialize
        # succeeded (`_serve_opening_request`): a refused initialize ends no one's session.
        cap = self.max_sessions
        over = cap is not None and len(self._server_instances) >= cap and bool(self._idle_sessions())
        if over:
            assert cap is not None
            self.max_sessions = len(self._server_instances) + 1
        try:
            transport = super()._admit_session(requestor)
        finally:
            self.max_sessions = cap
        if transport is not None and transport.mcp_session_id is not None:
            self._last_used[transport.mcp_session_id] = time.monotonic()
        return transport

    async def _serve_opening_request(
        self, http_transport: Any, scope: Scope, receive: Receive, send: Send
    ) -> None:
        opened = http_transport.mcp_session_id

        async def making_room(message: Message) -> None:
            # The initialize succeeded: room is made before the client can see the new session (no await
            # between the count and the eviction, so no admission interleaves).
            cap = self.max_sessions
            succeeded = message["type"] == "http.response.start" and message["status"] < 400
            over = cap is not None and opened in self._server_instances and len(self._server_instances) > cap
            if succeeded and over:
                self._evict_least_recently_used(keep=opened)
            await send(message)

        await super()._serve_opening_request(http_transport, scope, receive, making_room)

    def _idle_sessions(self, keep: str | None = None) -> list[str]:
        return [sid for sid in self._server_instances if not self._in_flight.get(sid) and sid != keep]

    def _evict_least_recently_used(self, keep: str | None = None) -> None:
        idle = self._idle_sessions(keep)
        if not idle:
            return  # every session is serving a request right now
        victim = min(idle, key=lambda sid: self._last_used.get(sid, 0.0))
        transport = self._server_instances.pop(victim)
        self._session_owners.pop(victim, None)
        self._last_used.pop(victim, None)
        self.evicted += 1
        logger.info("MCP session %s ended to make room (least recently used)", victim[:16])
        if self._task_group is not None:
            self._task_group.start_soon(_terminate, transport)

    async def _discard_session(self, session_id: str, transport: Any) -> None:
        self._last_used.pop(session_id, None)
        await super()._discard_session(session_id, transport)


async def _terminate(transport: Any) -> None:
    with anyio.CancelScope(shield=True):
        if not transport.is_terminated:
            await transport.terminate()


def _rpc_error(code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


class RequestSizeGuard:
    """Reads each POST body up to `limit`; a bigger one is answered here, readably (module docstring)."""

    def __init__(self, app: ASGIApp, limit: int = limits.REQUEST_BODY_MAX_BYTES) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] | None = []
        peek = bytearray()
        total = 0
        try:
            declared = int(_header(scope, b"content-length") or -1)
        except ValueError:
            declared = -1
        oversize = declared > self.limit
        if declared > _DRAIN_MAX_BYTES:
            await _plain_413(send, self.limit)
            return
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away: nobody to answer
            body = message.get("body", b"")
            total += len(body)
            if not oversize and total > self.limit:
                oversize = True
                assert chunks is not None
                peek.extend(b"".join(chunks)[:_PEEK_BYTES])
                chunks = None
            if oversize:
                if len(peek) < _PEEK_BYTES:
                    peek.extend(body[: _PEEK_BYTES - len(peek)])
                if total > _DRAIN_MAX_BYTES:
                    await _plain_413(send, self.limit)
                    return
            else:
                assert chunks is not None
                chunks.append(body)
            if not message.get("more_body", False):
                break
        if oversize:
            await _answer_oversize(send, bytes(peek), total, self.limit)
            return
        assert chunks is not None
        replay: list[Message] = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replayed() -> Message:
            if replay:
                return replay.pop()
            return await receive()

        await self.app(scope, replayed, send)


def limit_text(limit: int) -> str:
    return f"{limit:,} bytes ({limit / limits.MIB:g} MiB)"


def oversize_error(size: int, limit: int) -> BridgeError:
    return BridgeError(
        ErrorCode.LIMIT_EXCEEDED,
        f"the request is {size:,} bytes, over the {limit_text(limit)} limit of one MCP request",
        hint="Send less in one call: split the text into several edits, or edit a range instead of the whole "
        "document.",
        data={"size": size, "limit": limit},
    )


async def _answer_oversize(send: Send, peek: bytes, size: int, limit: int) -> None:
    from deskbridge.mcp.server import error_result

    envelope = peek_envelope(peek)
    error = oversize_error(size, limit)
    request_id = envelope.get("id")
    if not isinstance(request_id, (int, str)) or isinstance(request_id, bool):
        body: dict[str, Any] = {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": error.message, "data": error.to_dict()},
        }
        await _json(send, 413, body)
        return
    if envelope.get("method") == "tools/call":
        result = error_result(error)
        await _json(send, 200, {"jsonrpc": "2.0", "id": request_id, "result": result})
        return
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": -32600, "message": error.message, "data": error.to_dict()},
    }
    await _json(send, 200, body)


async def _plain_413(send: Send, limit: int) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32600, "message": f"request body over the {limit_text(limit)} limit"},
    }
    await _json(send, 413, body, close=True)


async def _json(send: Send, status: int, payload: dict[str, Any], *, close: bool = False) -> None:
    raw = json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": raw})


def peek_envelope(prefix: bytes) -> dict[str, Any]:
    """The top-level `id` and `method`, and `params.name`, found in the first bytes of a JSON-RPC request.

    The body may be cut anywhere (only its start was kept), so this walks the text token by token instead of
    parsing it; it stops at the first thing it cannot read (e.g. a huge string cut off).
    """
    text = prefix.decode("utf-8", "ignore")
    decoder = json.JSONDecoder()
    found: dict[str, Any] = {}
    stack: list[tuple[str, str | None]] = []  # (opening bracket, key it is the value of)
    pending: str | None = None  # the key whose value comes next
    i, n = 0, len(text)

    def record(key: str, value: Any) -> None:
        keys = [k for _, k in stack[1:]]
        if len(stack) == 1 and key in ("id", "method"):
            found[key] = value
        elif keys == ["params"] and key == "name":
            found["toolName"] = value

    while i < n:
        c = text[i]
        if c in " \t\r\n,":
            i += 1
        elif c == '"':
            try:
                value, j = decoder.raw_decode(text, i)
            except ValueError:
                break
            k = j
            while k < n and text[k] in " \t\r\n":
                k += 1
            if pending is None and k < n and text[k] == ":" and stack and stack[-1][0] == "{":
                pending = value
                i = k + 1
                continue
            if pending is not None:
                record(pending, value)
                pending = None
            i = j
        elif c in "{[":
            stack.append((c, pending))
            pending = None
            i += 1
        elif c in "}]":
            if stack:
                stack.pop()
            i += 1
        else:  # a number, true, false or null
            try:
                value, j = decoder.raw_decode(text, i)
            except ValueError:
                break
            if pending is not None:
                record(pending, value)
                pending = None
            i = j
    return found
