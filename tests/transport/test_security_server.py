"""REL-ATTACK, the server stays up: slowloris, session exhaustion and oversize requests, over real sockets (issue 8).

Every attack here is bounded in count and time and stays on loopback.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from deskbridge.core import limits
from deskbridge.testing import running_server
from deskbridge.web import server as web_server

pytestmark = [pytest.mark.anyio, pytest.mark.security]

IDLE_CONNECTIONS = 1000
ACCEPT = {"Accept": "application/json, text/event-stream"}


def init(n: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": n,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "abandoned", "version": "1"},
        },
    }


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "hello.txt").write_text("hello\n", "utf-8")
    return tmp_path


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")
    return tmp_path


@pytest.fixture
def enough_descriptors() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 2 * IDLE_CONNECTIONS + 512  # both ends live in this process
    if soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"needs {need} file descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    yield
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _open_idle(port: int, count: int, partial: bool) -> list[socket.socket]:
    socks = []
    for i in range(count):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        if partial and i % 2:  # half send the start of a request and never finish its headers
            s.sendall(f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode())
        socks.append(s)
    return socks


def _closed_by_server(sock: socket.socket, within_s: float, trickle: bool = False) -> float | None:
    """Seconds until the server closed `sock` (None if it did not within `within_s`)."""
    start = time.monotonic()
    sock.settimeout(0.25)
    while time.monotonic() - start < within_s:
        try:
            if trickle:
                sock.sendall(b"a")
            data = sock.recv(4096)
            if data == b"" or data.startswith(b"HTTP/1.1 4"):
                return time.monotonic() - start
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
    return None


async def test_a_thousand_idle_connections_do_not_lock_the_person_out(
    folder: Path, enough_descriptors
) -> None:
    async with running_server(folder, kind="probe") as srv:
        idle = await anyio.to_thread.run_sync(_open_idle, srv.port, IDLE_CONNECTIONS, True)
        try:
            started = time.monotonic()
            async with httpx2.AsyncClient(headers=srv.ui_headers(), timeout=30) as http:
                for path in ("/", "/static/platform.js", "/api/status", "/api/audit"):
                    r = await http.get(srv.base_url + path)
                    assert r.status_code == 200, (path, r.status_code)
            async with srv.client() as client:  # an MCP client too
                assert not (await client.call_tool("probe_echo", {"text": "still here"})).is_error
            assert time.monotonic() - started < 30  # generous: a loaded CI machine; typically well under 1 s
            held = sum(1 for p in srv.server.server_state.connections if not p.transport.is_closing())
            assert held <= limits.HTTP_CONNECTIONS_MAX + 2, held
        finally:
            for s in idle:
                s.close()


async def test_a_connection_that_never_finishes_its_headers_is_dropped(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv:
        silent, partial = await anyio.to_thread.run_sync(lambda: _open_idle(srv.port, 2, True))
        bound = limits.HTTP_HEADER_TIMEOUT_S + 10  # checked once a second; slack for a loaded machine
        waits = [await anyio.to_thread.run_sync(_closed_by_server, s, bound) for s in (silent, partial)]
        for s in (silent, partial):
            s.close()
        for waited in waits:
            assert waited is not None, "still open: a slowloris connection is held for ever"
            assert waited <= bound


async def test_a_header_sent_a_byte_at_a_time_is_dropped_too(folder: Path, monkeypatch) -> None:
    monkeypatch.setattr(web_server._Guard, "header_timeout_s", 1.0)
    async with running_server(folder, kind="probe") as srv:

        def trickle() -> float | None:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nX-Slow: ")
                return _closed_by_server(s, 15, trickle=True)

        waited = await anyio.to_thread.run_sync(trickle)
        assert waited is not None and waited < 12  # 1 s deadline, checked once a second


async def test_endless_headers_are_refused_with_431(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv:

        def flood() -> bytes:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
                line = b"X-Pad: " + b"a" * 1000 + b"\r\n"
                try:
                    for _ in range(limits.HTTP_HEADER_MAX_BYTES // len(line) + 10):
                        s.sendall(line)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                try:
                    return s.recv(4096)
                except ConnectionResetError:
                    return b"reset"

        answer = await anyio.to_thread.run_sync(flood)
        assert answer.startswith(b"HTTP/1.1 431") or answer in (b"", b"reset")


async def test_a_stalled_request_body_is_dropped(folder: Path, monkeypatch) -> None:
    monkeypatch.setattr(web_server._Guard, "body_idle_timeout_s", 1.0)
    async with running_server(folder, kind="probe") as srv:

        def stall() -> float | None:
            with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                s.sendall(
                    f"POST /api/settings HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nX-Deskbridge-UI: "
                    f"{srv.app.ui_secret}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
                    '{"port": '.encode()
                )
                return _closed_by_server(s, 15)

        waited = await anyio.to_thread.run_sync(stall)
        assert waited is not None and waited < 12  # 1 s deadline, checked once a second


async def _abandon_sessions(srv: Any, count: int) -> list[str]:
    ids = []
    async with httpx2.AsyncClient(headers={**srv.auth_headers(), **ACCEPT}, timeout=30) as http:
        for n in range(count):
            r = await http.post(srv.mcp_url, json=init(n))
            assert r.status_code == 200, r.text
            ids.append(r.headers["mcp-session-id"])
    return ids


async def test_abandoned_sessions_do_not_lock_out_a_new_client(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv:
        manager = srv.web.state.session_manager
        assert manager.max_sessions == limits.MCP_SESSIONS_MAX == 256
        assert manager.session_idle_timeout == limits.MCP_SESSION_IDLE_TIMEOUT_S == 600
        await _abandon_sessions(srv, 300)
        assert manager.open_sessions <= limits.MCP_SESSIONS_MAX
        async with srv.client(mode="legacy") as client:
            assert not (await client.call_tool("probe_echo", {"text": "let me in"})).is_error


async def test_the_least_recently_used_session_is_the_one_ended(folder: Path, monkeypatch) -> None:
    monkeypatch.setattr(limits, "MCP_SESSIONS_MAX", 8)  # read when the server is built
    async with running_server(folder, kind="probe") as srv:
        ids = await _abandon_sessions(srv, 8)
        headers = {**srv.auth_headers(), **ACCEPT, "Mcp-Protocol-Version": "2025-11-25"}
        ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            used = await http.post(srv.mcp_url, json=ping, headers={"Mcp-Session-Id": ids[0]})
            assert used.status_code == 200
            await _abandon_sessions(srv, 1)  # one more: the oldest *unused* session (ids[1]) makes room
            assert (
                await http.post(srv.mcp_url, json=ping, headers={"Mcp-Session-Id": ids[0]})
            ).status_code == 200
            assert (
                await http.post(srv.mcp_url, json=ping, headers={"Mcp-Session-Id": ids[1]})
            ).status_code == 404
        assert srv.web.state.session_manager.evicted == 1


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_an_oversize_tool_call_is_an_is_error_result_naming_the_limit(notes: Path, mode: str) -> None:
    async with running_server(notes) as srv, srv.client(mode=mode) as client:
        tools = (await client.list_tools()).tools
        lengths = [
            prop["maxLength"]
            for tool in tools
            for prop in tool.input_schema.get("properties", {}).values()
            if isinstance(prop, dict) and "maxLength" in prop
        ]
        # One limit: no schema promises more than the transport takes, and the largest is exactly that limit.
        assert max(lengths) == limits.REQUEST_BODY_MAX_BYTES
        huge = "x" * (limits.REQUEST_BODY_MAX_BYTES + 1024)
        result = await client.call_tool("md_replace_current_document", {"markdown": huge})
        assert result.is_error, result
        error = result.structured_content
        assert error["code"] == "LIMIT_EXCEEDED"
        assert f"{limits.REQUEST_BODY_MAX_BYTES:,}" in error["message"] and "8 MiB" in error["message"]
        assert error["data"]["limit"] == limits.REQUEST_BODY_MAX_BYTES
        # The session is still fine, and a call that fits goes through.
        doc = await client.call_tool("md_get_current_document", {})
        assert not doc.is_error and "Hello world." in doc.structured_content["markdown"]


async def test_an_oversize_ui_request_names_the_limit(notes: Path) -> None:
    async with running_server(notes) as srv, httpx2.AsyncClient(timeout=60) as http:
        body = json.dumps({"arguments": {"markdown": "x" * (limits.REQUEST_BODY_MAX_BYTES + 10)}})
        r = await http.post(
            srv.base_url + "/api/tools/md_replace_current_document",
            content=body,
            headers={**srv.ui_headers(), "Content-Type": "application/json"},
        )
        assert r.status_code == 413
        assert r.json()["error"]["code"] == "LIMIT_EXCEEDED"
        assert f"{limits.REQUEST_BODY_MAX_BYTES:,}" in r.json()["error"]["message"]


def test_envelope_is_found_at_the_start_of_a_cut_body() -> None:
    from deskbridge.web.mcp_transport import peek_envelope

    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "x", "arguments": {"t": "a" * 99}},
        }
    ).encode()
    assert peek_envelope(body[:80]) == {"id": 7, "method": "tools/call", "toolName": "x"}
    reordered = b'{"params": {"arguments": {"id": 1, "method": "no"}, "name": "t"}, "method": "tools/call", "id": "r"}'
    assert peek_envelope(reordered) == {"id": "r", "method": "tools/call", "toolName": "t"}


async def test_a_refused_request_without_a_session_id_opens_no_session(folder: Path, monkeypatch) -> None:
    """The SDK admitted a session for every request without a session id before looking at it: a `tools/list`
    refused with 400 was a session while it ran — at the cap it ended someone's idle session to make room —
    and its refusal named that session. Now only an initialize is admitted."""
    monkeypatch.setattr(limits, "MCP_SESSIONS_MAX", 8)  # read when the server is built
    async with running_server(folder, kind="probe") as srv:
        manager = srv.web.state.session_manager
        ids = await _abandon_sessions(srv, 8)  # at the cap
        admitted: list[Any] = []
        admit = manager._admit_session

        def counting(requestor: Any) -> Any:
            transport = admit(requestor)
            admitted.append(transport)
            return transport

        monkeypatch.setattr(manager, "_admit_session", counting)
        headers = {**srv.auth_headers(), **ACCEPT, "Mcp-Protocol-Version": "2025-11-25"}
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            refused = [
                await http.post(srv.mcp_url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                await http.post(srv.mcp_url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}),
                await http.post(
                    srv.mcp_url, content=b"{not json", headers={"Content-Type": "application/json"}
                ),
                await http.get(srv.mcp_url),
                await http.delete(srv.mcp_url),
            ]
            for r in refused:
                assert r.status_code == 400, r.text
                assert "mcp-session-id" not in r.headers
                assert r.json()["error"]["code"] in (-32600, -32700)
            assert refused[0].json()["error"]["message"] == "Bad Request: Missing session ID"
            assert admitted == [] and manager.evicted == 0 and manager.open_sessions == 8
            ping = {"jsonrpc": "2.0", "id": 99, "method": "ping"}
            for sid in ids:  # every session that was open is still there
                assert (
                    await http.post(srv.mcp_url, json=ping, headers={"Mcp-Session-Id": sid})
                ).status_code == 200
            # an initialize refused by the SDK (the client accepts no type it answers in) names no session and
            # ends no one's
            refused_init = await http.post(srv.mcp_url, json=init(), headers={"Accept": "text/html"})
            assert refused_init.status_code == 406 and "mcp-session-id" not in refused_init.headers
            assert manager.evicted == 0 and manager.open_sessions == 8
            # and a real initialize still opens one, the least recently used session making room
            opened = await http.post(srv.mcp_url, json=init())
            assert opened.status_code == 200 and opened.headers["mcp-session-id"] in manager._server_instances
            assert manager.evicted == 1 and manager.open_sessions == 8
