"""`deskbridge mcp --project PATH`: what MCP clients launch over stdio. One workspace, whoever has it open.

When a `deskbridge serve` of PATH is live (endpoint file found, pid alive, health within 1.5 s naming the same
projectDir) every message is forwarded to it over Streamable HTTP as it is — requests, notifications, progress,
the server's elicitation requests and the client's answers — so the agent shares the session the person sees in
the browser. Every reply's `X-Deskbridge-Project` header is checked again: a reply from another project is never
passed on. When no server is live the bridge answers itself: sage from the latest snapshot (read-only, every
answer says `source: snapshot`), the other kinds in-process under the workspace lock, which a later `serve`
takes over once nothing is unsaved. A failed live attempt is remembered for 5 s; a server that appears later
is picked up by the next request.

A legacy client's `initialize` is kept, so a backend used for the first time mid-session (the server went away,
or appeared) is initialised with the client's own parameters before it sees the client's next request.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

import anyio
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.shared.inbound import NAME_BEARING_METHODS, encode_header_value
from mcp.shared.message import SessionMessage

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.terminal import printable
from deskbridge.integrations.endpoints import (
    PROJECT_HEADER,
    Endpoint,
    LockHeld,
    WorkspaceLock,
    covers,
    find_live,
    normalise,
    private_state_dir,
    proves_token,
    state_dir,
)

logger = logging.getLogger(__name__)

REVERIFY_S: Final = 2.0
"""A live server that has not answered for this long proves again that it holds the token before the next
request carries it (seconds; one loopback round trip)."""
LIVE_RETRY_S: Final = 5.0
"""After a failed live attempt, answer locally for this long before looking for a server again (seconds)."""
TAKEOVER_POLL_S: Final = 0.5
EOF_GRACE_S: Final = 10.0
"""How long requests already received still run after the client closes stdin, so their answers go out
(seconds). A client that sends and closes (`echo '…' | deskbridge-mcp`, a script) got no answer at all; a host
that quits sends SIGTERM after its own grace period anyway (MCP spec 2025-11-25, lifecycle: shutdown)."""
PROTOCOL_VERSION_META: Final = "io.modelcontextprotocol/protocolVersion"
BRIDGE_ID_PREFIX: Final = "deskbridge-bridge-"
"""Ids of the requests the bridge sends on its own (the replayed initialize); their replies are not passed on."""

Message = dict[str, Any]


def _is_request(msg: Message) -> bool:
    return "method" in msg and "id" in msg


def _is_notification(msg: Message) -> bool:
    return "method" in msg and "id" not in msg


def _modern_version(msg: Message) -> str | None:
    meta = (msg.get("params") or {}).get("_meta") if isinstance(msg.get("params"), dict) else None
    version = meta.get(PROTOCOL_VERSION_META) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def error_reply(request: Message, error: BridgeError) -> Message:
    """The answer to a request the bridge could not pass on: an `isError` tool result for tools/call (so the
    model reads the hint), a JSON-RPC error otherwise."""
    if request.get("method") == "tools/call":
        payload = error.to_dict()
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False)}],
            "structuredContent": payload,
            "isError": True,
        }
        if _modern_version(request):
            result["resultType"] = "complete"
        return {"jsonrpc": "2.0", "id": request["id"], "result": result}
    return {
        "jsonrpc": "2.0",
        "id": request["id"],
        "error": {
            "code": -32603,
            "message": error.message,
            "data": {"code": str(error.code), "hint": error.hint},
        },
    }


class BackendGone(Exception):
    """The backend could not be reached before anything was sent: the request may go elsewhere."""


class Bridge:
    """Routes one stdio client's messages to the live server or to the local fallback."""

    def __init__(
        self,
        project: Path,
        *,
        kind: str | None,
        options: dict[str, Any],
        to_client: Any,
        tg: TaskGroup,
    ) -> None:
        self.project = normalise(project)
        self.kind = kind
        self.options = options
        self.to_client = to_client
        self.tg = tg
        self.live: LiveBackend | None = None
        self.local: LocalBackend | None = None
        self.live_failed_at = -1e9
        self.init_request: Message | None = None
        self.initialized_sent = False
        self.in_flight: dict[Any, tuple[Any, anyio.CancelScope]] = {}
        """Client request id → (backend, cancel scope) while it runs."""
        self.server_requests: dict[Any, Any] = {}
        """Id of a request a backend sent the client (elicitation) → that backend, for the client's answer."""
        self.running = 0
        """Client requests received and not yet handed to a backend."""

    def busy(self) -> bool:
        """Whether a client request is still on its way or not yet answered."""
        local = self.local
        return self.running > 0 or bool(local is not None and getattr(local, "_pending", None))

    # -- choosing a backend ---------------------------------------------------------------------------------
    async def pick(self) -> LiveBackend | LocalBackend:
        if self.live is not None:
            return self.live
        if self.local is not None and self.local.holds_workspace:
            return self.local  # an in-process workspace stays here until a `serve` takes it over
        if time.monotonic() - self.live_failed_at >= LIVE_RETRY_S:
            endpoint = await anyio.to_thread.run_sync(find_live, self.project)
            if endpoint is not None:
                self.live = LiveBackend(self, endpoint)
                if self.local is not None:
                    await self.local.close()
                    self.local = None
                return self.live
            self.live_failed_at = time.monotonic()
        if self.local is None:
            self.local = LocalBackend(self)
        return self.local

    def live_failed(self, backend: LiveBackend) -> None:
        if self.live is backend:
            self.live = None
            self.tg.start_soon(backend.close)
        self.live_failed_at = time.monotonic()

    # -- messages from the client ---------------------------------------------------------------------------
    async def from_client(self, msg: Message) -> None:
        if _is_request(msg):
            if msg["method"] == "initialize":
                self.init_request = msg
            self.running += 1
            self.tg.start_soon(self._run_request, msg)
        elif _is_notification(msg):
            await self._notification(msg)
        elif "id" in msg:  # the client's answer to a backend's request (elicitation)
            backend = self.server_requests.pop(msg["id"], None)
            if backend is not None:
                await backend.respond(msg)

    async def _notification(self, msg: Message) -> None:
        method = msg["method"]
        if method == "notifications/initialized":
            self.initialized_sent = True
            backend = self.live or self.local
            if backend is not None:
                await backend.notify(msg)
            return
        if method == "notifications/cancelled":
            request_id = (msg.get("params") or {}).get("requestId")
            entry = self.in_flight.get(request_id)
            if entry is not None:
                await entry[0].cancel(msg, entry[1])
            elif self.local is not None:  # the in-process server runs it; it takes the notification itself
                await self.local.notify(msg)
            return
        backend = self.live or self.local
        if backend is not None:
            await backend.notify(msg)

    async def _run_request(self, msg: Message) -> None:
        try:
            await self._route_request(msg)
        finally:
            self.running -= 1

    async def _route_request(self, msg: Message) -> None:
        with anyio.CancelScope() as scope:
            for _attempt in range(2):
                backend = await self.pick()
                self.in_flight[msg["id"]] = (backend, scope)
                try:
                    await backend.request(msg)
                    break
                except BackendGone:
                    if isinstance(backend, LiveBackend):
                        self.live_failed(backend)
                        continue  # nothing reached the server: answer locally instead
                    raise
                except BridgeError as error:
                    await self.send(error_reply(msg, error))
                    break
            self.in_flight.pop(msg["id"], None)

    async def send(self, msg: Message | SessionMessage) -> None:
        if not isinstance(msg, SessionMessage):
            msg = SessionMessage(types.jsonrpc_message_adapter.validate_python(msg))
        await self.to_client.send(msg)

    async def close(self) -> None:
        for backend in (self.live, self.local):
            if backend is not None:
                await backend.close()


class LiveBackend:
    """A running `deskbridge serve`, spoken to over Streamable HTTP."""

    def __init__(self, bridge: Bridge, endpoint: Endpoint) -> None:
        import httpx2

        self.bridge = bridge
        self.endpoint = endpoint
        self.url = endpoint.url + "/mcp"
        token = endpoint.token() or ""
        self.http = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx2.Timeout(None, connect=1.5),
        )
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.initialized = False
        self.verified_at = time.monotonic()
        """When the server last proved it holds the token (`find_live` just did)."""
        self._init_lock = anyio.Lock()
        self._ids = itertools.count(1)

    def _headers(self, msg: Message) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        modern = _modern_version(msg)
        if modern is not None:
            headers["MCP-Protocol-Version"] = modern
            method = msg.get("method")
            if isinstance(method, str):
                headers["Mcp-Method"] = method
                key = NAME_BEARING_METHODS.get(method)
                name = (msg.get("params") or {}).get(key) if key else None
                if isinstance(name, str):
                    headers["Mcp-Name"] = encode_header_value(name)
        else:
            if self.session_id:
                headers["Mcp-Session-Id"] = self.session_id
            if self.protocol_version:
                headers["MCP-Protocol-Version"] = self.protocol_version
        return headers

    async def _check_still_ours(self) -> None:
        """Before sending the token after a quiet spell, have the server prove again that it holds it: if
        `serve` died meanwhile, another local user's program may have bound its port (`proves_token`)."""
        if time.monotonic() - self.verified_at < REVERIFY_S:
            return
        if not await anyio.to_thread.run_sync(proves_token, self.endpoint):
            raise BackendGone(f"the server at {self.endpoint.url} no longer proves it holds the token")
        self.verified_at = time.monotonic()

    def _check_project(self, response: Any) -> None:
        served = response.headers.get(PROJECT_HEADER)
        if served is None or not covers(unquote(served), self.bridge.project):
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"the deskbridge server at {self.endpoint.url} now serves "
                f"{unquote(served) if served else 'no workspace'!r}, not {str(self.bridge.project)!r}; "
                "its reply was not passed on",
                hint=f"Run `deskbridge serve {self.bridge.project}` (or open it in that server), then retry.",
            )

    async def _post(self, msg: Message) -> Any:
        import httpx2

        await self._check_still_ours()
        request = self.http.build_request("POST", self.url, json=msg, headers=self._headers(msg))
        try:
            return await self.http.send(request, stream=True)
        except (httpx2.ConnectError, httpx2.ConnectTimeout) as exc:
            raise BackendGone(str(exc)) from exc

    async def ensure_initialized(self, msg: Message) -> None:
        """Replay the client's initialize when this server has not seen it (legacy clients only)."""
        if self.initialized or _modern_version(msg) is not None or msg.get("method") == "initialize":
            return
        init = self.bridge.init_request
        if init is None:
            return
        async with self._init_lock:
            if self.initialized:
                return
            replay = {**init, "id": f"{BRIDGE_ID_PREFIX}init-{next(self._ids)}"}
            reply = await self._exchange(replay, forward=False)
            self._adopt_init(reply)
            if self.bridge.initialized_sent:
                await self.notify({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _adopt_init(self, reply: Message | None) -> None:
        result = (reply or {}).get("result")
        if isinstance(result, dict) and isinstance(result.get("protocolVersion"), str):
            self.protocol_version = result["protocolVersion"]
        self.initialized = True

    async def request(self, msg: Message) -> None:
        await self.ensure_initialized(msg)
        reply = await self._exchange(msg, forward=True)
        if msg.get("method") == "initialize":
            self._adopt_init(reply)

    async def _exchange(self, msg: Message, *, forward: bool) -> Message | None:
        """POST one request; pass on what comes back (the server's own requests and notifications always; the
        reply itself when `forward`). Returns the reply."""
        response = await self._post(msg)
        try:
            if response.status_code == 404 and self.session_id and _modern_version(msg) is None:
                # The server lost our session (it restarted): initialise again and send the request once more.
                await response.aclose()
                self.session_id, self.initialized = None, False
                await self.ensure_initialized({"method": "_"})
                response = await self._post(msg)
            if response.status_code == 401:  # the token was rotated while we ran: read it again, once
                await response.aclose()
                self.http.headers["Authorization"] = f"Bearer {self.endpoint.token() or ''}"
                response = await self._post(msg)
            if response.status_code < 400 or response.headers.get(PROJECT_HEADER) is not None:
                self._check_project(
                    response
                )  # refusals before MCP (token, MCP switched off) carry no project
            session = response.headers.get("mcp-session-id")
            if session:
                self.session_id = session
            kind = response.headers.get("content-type", "")
            if response.status_code >= 400 and not kind.startswith(("application/json", "text/event-stream")):
                body = (await response.aread()).decode("utf-8", "replace")[:300]
                raise BridgeError(
                    ErrorCode.NOT_READY,
                    f"the deskbridge server answered HTTP {response.status_code}: {body}",
                    hint="Check the server's terminal, then retry.",
                )
            if kind.startswith("text/event-stream"):
                return await self._read_events(response, msg, forward)
            body = await response.aread()
            if not body:
                return None
            reply = json.loads(body)
            if isinstance(reply, dict) and reply.get("error") and not reply.get("jsonrpc"):
                error = reply["error"]  # deskbridge's own refusal (MCP turned off, shutting down)
                raise BridgeError(
                    ErrorCode.NOT_READY,
                    str(error.get("message", "refused")),
                    hint=str(error.get("hint", "Retry in a moment.")),
                )
            if isinstance(reply, dict) and "id" in msg and reply.get("id") is None and "error" in reply:
                reply["id"] = msg["id"]  # a transport-level error carries no id; it answers this request
            if forward:
                await self.bridge.send(reply)
            return reply
        finally:
            await response.aclose()

    async def _read_events(self, response: Any, msg: Message, forward: bool) -> Message | None:
        """Pass on the events of one POST's SSE stream until the reply; a stream the server closed early (SSE
        polling) is resumed with Last-Event-ID."""
        reply: Message | None = None
        last_id: str | None = None
        for _resume in range(20):
            data: list[str] = []
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].lstrip(" "))
                    continue
                if line.startswith("id:"):
                    last_id = line[3:].strip() or last_id
                    continue
                if line or not data:
                    continue
                text, data = "\n".join(data), []
                if not text.strip():
                    continue  # the priming event: an id and no message
                event = json.loads(text)
                if "method" in event and "id" in event:
                    self.bridge.server_requests[event["id"]] = self
                elif "method" not in event and event.get("id") == msg.get("id"):
                    reply = event
                    if not forward:
                        continue
                await self.bridge.send(event)
            if reply is not None or last_id is None or self.session_id is None:
                return reply
            await response.aclose()
            headers = {
                "Accept": "text/event-stream",
                "Last-Event-ID": last_id,
                "Mcp-Session-Id": self.session_id,
            }
            if self.protocol_version:
                headers["MCP-Protocol-Version"] = self.protocol_version
            response = await self.http.send(
                self.http.build_request("GET", self.url, headers=headers), stream=True
            )
            if response.status_code != 200:
                break
        await response.aclose()
        return reply

    async def notify(self, msg: Message) -> None:
        if _modern_version(msg) is not None:
            return  # the 2026 HTTP wire has no client notifications
        with contextlib.suppress(BackendGone):
            response = await self._post(msg)
            await response.aclose()

    async def respond(self, msg: Message) -> None:
        with contextlib.suppress(BackendGone):
            response = await self._post(msg)
            await response.aclose()

    async def cancel(self, msg: Message, scope: anyio.CancelScope) -> None:
        if self.session_id is not None:
            await self.notify(msg)
        else:
            scope.cancel()  # 2026-07-28 over HTTP: closing the request's stream is the cancellation

    async def close(self) -> None:
        if self.session_id is not None:
            with contextlib.suppress(Exception):
                await self._check_still_ours()
                await self.http.delete(self.url, headers={"Mcp-Session-Id": self.session_id}, timeout=2)
        await self.http.aclose()


class LocalBackend:
    """The bridge answering itself: an in-process App with the same MCP server code as `serve`."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.started = False
        self.initialized = False
        self.lock: WorkspaceLock | None = None
        self.app: Any = None
        self.error: BridgeError | None = None
        self._start_lock = anyio.Lock()
        self._to_server: Any = None
        self._scope: anyio.CancelScope | None = None
        self._init_waiters: dict[str, anyio.Event] = {}
        self._ids = itertools.count(1)
        self._pending: set[str] = set()
        """Ids of client requests the in-process server has not answered yet."""
        self.closed = False

    @property
    def holds_workspace(self) -> bool:
        return self.lock is not None and self.lock.held

    async def _start(self) -> None:
        """Build the in-process App and its MCP server once; open the workspace (again, if it failed before)."""
        async with self._start_lock:
            if not self.started:
                from deskbridge.app import App
                from deskbridge.mcp.server import build_mcp_server

                self.app = App.create()
                server = build_mcp_server(self.app, editor=False)
                to_server, from_bridge = anyio.create_memory_object_stream[SessionMessage | Exception](16)
                to_bridge, from_server = anyio.create_memory_object_stream[SessionMessage](16)
                self._to_server = to_server

                async def run() -> None:
                    with anyio.CancelScope() as scope:
                        self._scope = scope
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(
                                server.run, from_bridge, to_bridge, server.create_initialization_options()
                            )
                            tg.start_soon(self._pump, from_server)

                self.bridge.tg.start_soon(run)
                self.started = True
            if self.app.workspace is None:
                await self._open()

    async def _open(self) -> None:
        from deskbridge.kinds.base import find_kind

        project = self.bridge.project
        try:
            entry = find_kind(project, self.bridge.kind)
            if entry.name == "sage":
                from deskbridge.kinds.sage.offline import SnapshotWorkspace

                self.app.adopt(SnapshotWorkspace(project, self.app.kind_services(self.bridge.options)))
            else:
                lock = WorkspaceLock(project, "mcp")
                try:
                    lock.acquire()
                except LockHeld as held:
                    self.bridge.live_failed_at = (
                        -1e9
                    )  # a server holds it: look for it again on the next request
                    pid = held.holder.get("pid")
                    if held.holder.get("owner") == "mcp":
                        # Another client's bridge (Claude Desktop and Claude Code both set up on one folder):
                        # one process edits a workspace at a time, so clients share it through one `serve`.
                        raise BridgeError(
                            ErrorCode.NOT_READY,
                            f"{str(project)!r} is open in another MCP client's deskbridge (pid {pid}); two "
                            "clients share a workspace only through `deskbridge serve`",
                            hint=f"Ask the person to run `deskbridge serve {project}` (the other client hands the "
                            "workspace over once nothing is unsaved), then call this tool again; or to close "
                            "the other client.",
                        ) from None
                    raise BridgeError(
                        ErrorCode.NOT_READY,
                        f"{str(project)!r} is open in deskbridge (pid {pid}), which did not answer in time",
                        hint="Retry in a few seconds; if it keeps failing, check that `deskbridge serve` is "
                        "running with MCP switched on (`deskbridge doctor`).",
                    ) from None
                try:
                    self.app.open(project, kind=entry.name, options=self.bridge.options)
                except BaseException:
                    lock.release()
                    raise
                self.lock = lock
                self.bridge.tg.start_soon(self._watch_takeover)
            await self.app.start()
            self.error = None
        except BridgeError as error:
            self.error = error

    async def _pump(self, from_server: Any) -> None:
        async for session_message in from_server:
            message = session_message.message
            if isinstance(message, types.JSONRPCRequest):
                self.bridge.server_requests[message.id] = self
            elif isinstance(message, (types.JSONRPCResponse, types.JSONRPCError)):
                waiter = self._init_waiters.pop(str(message.id), None)
                if waiter is not None:
                    waiter.set()
                    continue
                self._pending.discard(str(message.id))
            await self.bridge.send(session_message)

    async def _watch_takeover(self) -> None:
        """Hand the workspace to a `serve` that asks for it, unless something is unsaved."""
        assert self.lock is not None
        while not self.closed:
            await anyio.sleep(TAKEOVER_POLL_S)
            if not self.lock.takeover_requested():
                continue
            unsaved = unsaved_documents(self.app.workspace)
            if unsaved:
                self.lock.refuse_takeover(f"unsaved changes in {', '.join(unsaved[:3])}")
                continue
            with anyio.move_on_after(5):  # let calls under way finish first
                while self._pending:
                    await anyio.sleep(0.05)
            await self.close()
            if self.bridge.local is self:
                self.bridge.local = None
            self.bridge.live_failed_at = -1e9  # look for the new server on the next request
            return

    async def _put(self, msg: Message) -> None:
        await self._to_server.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(msg)))

    async def ensure_initialized(self, msg: Message) -> None:
        if self.initialized or _modern_version(msg) is not None:
            return
        self.initialized = True
        if msg.get("method") == "initialize" or self.bridge.init_request is None:
            return
        replay_id = f"{BRIDGE_ID_PREFIX}init-{next(self._ids)}"
        done = self._init_waiters[replay_id] = anyio.Event()
        await self._put({**self.bridge.init_request, "id": replay_id})
        with anyio.move_on_after(10):
            await done.wait()
        if self.bridge.initialized_sent:
            await self._put({"jsonrpc": "2.0", "method": "notifications/initialized"})

    async def request(self, msg: Message) -> None:
        await self._start()
        if self.error is not None and msg.get("method") in ("tools/call", "tools/list"):
            # Say why there is no workspace, rather than "unknown tool", or an empty tools/list that the client
            # shows as a server without tools (and never lists again), the reason nowhere.
            raise self.error
        await self.ensure_initialized(msg)
        self._pending.add(str(msg["id"]))
        await self._put(msg)

    async def notify(self, msg: Message) -> None:
        if self._to_server is not None and not self.closed:
            await self._put(msg)

    async def respond(self, msg: Message) -> None:
        await self.notify(msg)

    async def cancel(self, msg: Message, scope: anyio.CancelScope) -> None:
        await self.notify(msg)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self._to_server is not None:
            await self._to_server.aclose()
        if self.app is not None:
            try:
                keep_unsaved(self.app.workspace)
            except Exception:
                logger.exception("unsaved changes could not be kept")
            with contextlib.suppress(Exception):
                await self.app.stop()
        if self._scope is not None:
            self._scope.cancel()
        if self.lock is not None:
            self.lock.release()


def _dirty_documents(service: Any) -> list[dict[str, Any]]:
    """The rows of `service.list_open()` (a document kind's service) with unsaved changes; none without one."""
    list_open = getattr(service, "list_open", None)
    if not callable(list_open):
        return []
    rows = (doc if isinstance(doc, dict) else getattr(doc, "__dict__", {}) for doc in list_open())
    return [row for row in rows if row.get("dirty")]


def unsaved_documents(workspace: Any) -> list[str]:
    """Names of documents with unsaved changes in an in-process workspace (empty when none, or unknown)."""
    if workspace is None:
        return []
    names: list[str] = []
    with contextlib.suppress(Exception):
        for row in _dirty_documents(getattr(workspace, "service", None)):
            names.append(str(row.get("path") or row.get("docId") or "a document"))
    with contextlib.suppress(Exception):
        if workspace.status().get("dirty"):
            names.append(str(workspace.path))
    return names


def keep_unsaved(workspace: Any) -> list[Path]:
    """Copies of the documents with unsaved changes, when the client that made them closes the session.

    Over stdio no one is there to ask, as `serve` asks on Ctrl+C: a host that quits (or restarts the server)
    simply closes stdin, and edits the person may have approved, but no one saved, vanished with the process.
    They are kept owner-only under `<state dir>/unsaved/` and named on stderr, which hosts keep in their MCP log.
    """
    from deskbridge.core.files import publish_new

    service = getattr(workspace, "service", None)
    if not callable(getattr(service, "read", None)):
        return []
    kept: list[Path] = []
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for row in _dirty_documents(service):
        doc = service.read(row["docId"])
        name = Path(str(row.get("fileName") or "untitled.md")).name
        target = state_dir() / "unsaved" / f"{stamp}-{os.getpid()}-{row['docId']}-{name}"
        private_state_dir(target.parent)
        publish_new(target, str(doc["text"]).encode("utf-8"), mode=0o600)
        kept.append(target)
        logger.warning(  # on stderr, maybe a terminal: a document's name may hold anything
            "the client closed the session before %s was saved: its unsaved text is kept in %s",
            printable(str(row.get("absolutePath") or name)),
            printable(str(target)),
        )
    return kept


def run_bridge(project: Path, *, kind: str | None = None, options: dict[str, Any] | None = None) -> None:
    """Serve one stdio client until it closes stdin."""

    async def main() -> None:
        from deskbridge.mcp.stdio import fast_stdio

        async with fast_stdio() as (from_client, to_client), anyio.create_task_group() as tg:
            bridge = Bridge(project, kind=kind, options=dict(options or {}), to_client=to_client, tg=tg)
            try:
                # Only messages come out: fast_stdio answers a line that is none itself (JSON-RPC §5.1).
                async for item in from_client:
                    msg = item.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
                    await bridge.from_client(msg)
                with anyio.move_on_after(EOF_GRACE_S):  # stdin closed: answer what was asked first
                    while bridge.busy():
                        await anyio.sleep(0.02)
            finally:
                with anyio.CancelScope(shield=True):
                    await bridge.close()
                tg.cancel_scope.cancel()

    anyio.run(main)
