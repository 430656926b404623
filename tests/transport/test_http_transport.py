"""MCP over Streamable HTTP, end to end: a real server on loopback, the SDK client, both protocol eras."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import httpx2
import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "hello.txt").write_text("hello, world\n", "utf-8")
    return tmp_path


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_client_lists_and_calls_tools_in_both_eras(folder: Path, mode: str) -> None:
    async with running_server(folder, kind="probe") as srv, srv.client(mode=mode) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"probe_echo", "probe_read_file", "probe_slow", "probe_fail"} <= set(tools)
        echo = tools["probe_echo"]
        assert echo.annotations.read_only_hint is True
        assert echo.annotations.open_world_hint is False
        assert echo.input_schema["type"] == "object" and "text" in echo.input_schema["properties"]
        result = await client.call_tool("probe_read_file", {"path": "hello.txt"})
        assert not result.is_error
        assert result.structured_content["text"] == "hello, world\n"
        expected = "2026-07-28" if mode == "auto" else "2025-11-25"
        assert client.protocol_version == expected


async def test_business_errors_are_is_error_results_with_code_and_hint(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, srv.client() as client:
        result = await client.call_tool("probe_fail", {"code": "STALE_WORKSPACE"})
        assert result.is_error
        assert result.structured_content["code"] == "STALE_WORKSPACE"
        # the default hint names the kind's own read tool as the next call
        assert "call probe_read_file for the current revision" in result.structured_content["hint"]


async def test_bad_arguments_are_invalid_argument_not_a_protocol_error(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, srv.client() as client:
        result = await client.call_tool("probe_echo", {"text": "x", "surprise": 1})
        assert result.is_error and result.structured_content["code"] == "INVALID_ARGUMENT"
        assert "surprise" in result.structured_content["message"]


async def test_unknown_tool_says_to_list_tools(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, srv.client() as client:
        result = await client.call_tool("probe_nope", {})
        assert result.is_error and result.structured_content["code"] == "NOT_FOUND"
        assert "tools/list" in result.structured_content["hint"]


async def test_path_escape_is_refused(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, srv.client() as client:
        result = await client.call_tool("probe_read_file", {"path": "../../etc/passwd"})
        assert result.is_error and result.structured_content["code"] == "ACCESS_DENIED"


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_progress_notifications_reach_the_client(folder: Path, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with running_server(folder, kind="probe") as srv, srv.client(mode=mode) as client:
        result = await client.call_tool(
            "probe_slow", {"steps": 3, "delay_ms": 1}, progress_callback=on_progress
        )
        assert not result.is_error
    assert [p for p, _, _ in seen] == [1, 2, 3]
    assert seen[-1][1] == 3 and seen[-1][2] == "step 3 of 3"


async def test_calls_are_audited_without_argument_values(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv:
        async with srv.client() as client:
            await client.call_tool("probe_echo", {"text": "secret-value-123"})
        records = [r.to_dict() for r in srv.app.audit.recent()]
    echo = [r for r in records if r["tool"] == "probe_echo"]
    assert echo and echo[-1]["outcome"] == "ok" and echo[-1]["args"] == ["text"]
    assert "secret-value-123" not in repr(records)


# -- HTTP security: every refusal a person or a browser page could run into ------------------------------------

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "curl", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_mcp_without_token_is_401(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.post(srv.mcp_url, json=INIT, headers=ACCEPT)
        assert r.status_code == 401
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert "deskbridge token show" in r.json()["error"]["hint"]
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, "Authorization": "Bearer wrong"})
        assert r.status_code == 401


async def test_mcp_with_token_is_accepted(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, **srv.auth_headers()})
        assert r.status_code == 200


@pytest.mark.parametrize("path", ["/mcp", "/api/status", "/"])
async def test_bad_host_is_421_on_every_route(folder: Path, path: str) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.post(
            srv.base_url + path,
            json=INIT,
            headers={**ACCEPT, **srv.auth_headers(), **srv.ui_headers(), "Host": "evil.example.com"},
        )
        assert r.status_code == 421


@pytest.mark.parametrize("path", ["/mcp", "/api/status"])
async def test_bad_origin_is_403_on_every_route(folder: Path, path: str) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.post(
            srv.base_url + path,
            json=INIT,
            headers={**ACCEPT, **srv.auth_headers(), **srv.ui_headers(), "Origin": "http://evil.example.com"},
        )
        assert r.status_code == 403


async def test_own_origin_is_accepted(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.get(srv.base_url + "/api/status", headers={**srv.ui_headers(), "Origin": srv.base_url})
        assert r.status_code == 200


async def test_ui_api_needs_the_launch_secret_not_the_mcp_token(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        assert (await http.get(srv.base_url + "/api/status")).status_code == 401
        assert (await http.get(srv.base_url + "/api/status", headers=srv.auth_headers())).status_code == 401
        assert (await http.get(srv.base_url + "/api/status", headers=srv.ui_headers())).status_code == 200


async def test_login_link_sets_a_strict_cookie_and_drops_the_code(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.get(srv.login_url())
        assert r.status_code == 303 and r.headers["location"] == "/"
        cookie = r.headers["set-cookie"]
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        assert (await http.get(srv.base_url + "/api/status")).status_code == 200


async def test_rotated_token_takes_effect_at_once(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        old = srv.app.token
        r = await http.post(srv.base_url + "/api/token/rotate", headers=srv.ui_headers())
        assert r.status_code == 200 and r.json() == {
            "rotated": True
        }  # showing it is a separate, confirmed step
        assert srv.app.token != old
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, "Authorization": f"Bearer {old}"})
        assert r.status_code == 401
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, **srv.auth_headers()})
        assert r.status_code == 200


async def test_settings_api_validates_and_applies_in_place(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        live = srv.app.settings
        bad = await http.post(srv.base_url + "/api/settings", json={"port": 0}, headers=srv.ui_headers())
        assert bad.status_code == 400 and bad.json()["error"]["code"] == "INVALID_ARGUMENT"
        good = await http.post(
            srv.base_url + "/api/settings", json={"require_approval": False}, headers=srv.ui_headers()
        )
        assert good.status_code == 200 and good.json()["require_approval"] is False
        assert live.require_approval is False  # the object every kind holds, not a copy


async def test_an_audit_limit_that_is_not_a_count_is_400_saying_what_is(folder: Path) -> None:
    # `?limit=abc`, a negative count and a number too long to read were a 500 with no explanation.
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        for limit in ("abc", "-5", "0", "1.5", "9" * 5000, "1001", "100000"):
            r = await http.get(srv.base_url + "/api/audit", params={"limit": limit}, headers=srv.ui_headers())
            assert r.status_code == 400, (limit, r.status_code)
            error = r.json()["error"]
            assert error["code"] == "INVALID_ARGUMENT" and "from 1 to 1,000" in error["message"], limit
            assert len(error["message"]) < 200  # a 5,000-digit value is not echoed whole
        for limit, kept in (("1", 1), ("1000", 1000)):
            r = await http.get(srv.base_url + "/api/audit", params={"limit": limit}, headers=srv.ui_headers())
            assert r.status_code == 200 and len(r.json()["records"]) <= kept
        for default in ({}, {"limit": ""}):  # no limit: the newest 100
            r = await http.get(srv.base_url + "/api/audit", params=default, headers=srv.ui_headers())
            assert r.status_code == 200, default


async def test_the_browser_calls_the_same_tools_as_caller_ui(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        r = await http.post(
            srv.base_url + "/api/tools/probe_echo",
            json={"arguments": {"text": "hi"}},
            headers=srv.ui_headers(),
        )
        assert r.status_code == 200 and r.json() == {"text": "hi", "caller": "ui"}
        r = await http.post(
            srv.base_url + "/api/tools/probe_fail",
            json={"arguments": {"code": "NOT_FOUND"}},
            headers=srv.ui_headers(),
        )
        assert r.status_code == 404 and r.json()["error"]["code"] == "NOT_FOUND"


async def test_mcp_switched_off_in_settings_answers_503_with_the_way_back(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        srv.app.update_settings({"mcp_enabled": False})
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, **srv.auth_headers()})
        assert r.status_code == 503 and "mcp_enabled true" in r.json()["error"]["hint"]
        srv.app.update_settings({"mcp_enabled": True})
        r = await http.post(srv.mcp_url, json=INIT, headers={**ACCEPT, **srv.auth_headers()})
        assert r.status_code == 200


async def test_header_values_with_surrounding_spaces_mean_the_same(folder: Path) -> None:
    """RFC 9110: optional whitespace around a field value is not part of it, whatever HTTP parser runs.
    (Sent over a raw socket: HTTP client libraries refuse to send such values at all.)"""
    import asyncio
    import json

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "probe_echo", "arguments": {"text": "x"}, "_meta": meta},
        }
    ).encode()
    async with running_server(folder, kind="probe") as srv:
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{srv.port}\r\nAuthorization: Bearer {srv.app.token}\r\n"
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
            "MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call  \r\nMcp-Name: probe_echo  \r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode()
        reader, writer = await asyncio.open_connection("127.0.0.1", srv.port)
        writer.write(head + body)
        await writer.drain()
        response = await reader.read()
        writer.close()
    assert response.startswith(b"HTTP/1.1 200"), response[:300]


async def test_audit_log_file_gets_one_line_per_call_without_values(
    folder: Path, deskbridge_home: Path
) -> None:
    import json

    from deskbridge.app import App
    from deskbridge.settings import Settings, deskbridge_dirs

    app = App.create(settings=Settings(audit_log=True))
    async with running_server(folder, kind="probe", app=app) as srv, srv.client() as client:
        await client.call_tool("probe_echo", {"text": "private words"})
    lines = (deskbridge_dirs().data / "audit.jsonl").read_text("utf-8").splitlines()
    record = json.loads(lines[-1])
    assert record["tool"] == "probe_echo" and record["outcome"] == "ok" and record["args"] == ["text"]
    assert "private words" not in "\n".join(lines)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_text_content_is_the_structured_content_as_compact_json(folder: Path, mode: str) -> None:
    (folder / "unicode.txt").write_text("naïve “quotes” ファイル\n", "utf-8")
    async with running_server(folder, kind="probe") as srv, srv.client(mode=mode) as client:
        for name, args in (
            ("probe_read_file", {"path": "unicode.txt"}),
            ("probe_fail", {"code": "NOT_FOUND"}),
        ):
            result = await client.call_tool(name, args)
            [text] = result.content
            assert text.type == "text"
            # Older clients read the text: the very JSON of the structured content, non-ASCII as it is, no spaces.
            expected = json.dumps(result.structured_content, ensure_ascii=False, separators=(",", ":"))
            assert text.text == expected, name
            if name == "probe_read_file":
                assert "ファイル" in text.text and result.structured_content["text"].startswith("naïve")


async def test_a_result_over_the_response_cap_is_limit_exceeded_naming_the_cap(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import deskbridge.app

    (folder / "big.txt").write_text("x" * 400, "utf-8")
    monkeypatch.setattr(deskbridge.app, "RESPONSE_MAX_BYTES", 300)
    async with running_server(folder, kind="probe") as srv, srv.client() as client:
        result = await client.call_tool("probe_read_file", {"path": "big.txt"})
        assert result.is_error and result.structured_content["code"] == "LIMIT_EXCEEDED"
        assert "300-byte cap" in result.structured_content["message"]
        assert "probe_read_file" in result.structured_content["hint"]
        # The size is that of the JSON that would have been sent: {"path":"big.txt","text":"xxx…"}.
        sent = len(json.dumps({"path": "big.txt", "text": "x" * 400}, separators=(",", ":")))
        assert f"is {sent} bytes" in result.structured_content["message"]
        small = await client.call_tool("probe_read_file", {"path": "hello.txt"})
        assert not small.is_error


async def test_a_session_cannot_replay_another_sessions_events_by_counting_ids(folder: Path) -> None:
    """One event store serves every session and the SDK replays whatever stream an id names: with ids 1, 2, 3 …
    any client could GET another client's tool results back with `Last-Event-ID`. Its own id still resumes."""
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient(timeout=10) as http:
        headers = {**srv.auth_headers(), "Accept": "application/json, text/event-stream"}

        async def session() -> dict[str, str]:
            init = {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            }
            r = await http.post(
                srv.mcp_url,
                headers=headers,
                json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init},
            )
            h = {
                **headers,
                "mcp-session-id": r.headers["mcp-session-id"],
                "mcp-protocol-version": "2025-11-25",
            }
            await http.post(
                srv.mcp_url, headers=h, json={"jsonrpc": "2.0", "method": "notifications/initialized"}
            )
            return h

        async def replay(h: dict[str, str], last_id: str) -> str:
            seen = ""
            with anyio.move_on_after(2):
                async with http.stream("GET", srv.mcp_url, headers={**h, "Last-Event-ID": last_id}) as stream:
                    async for line in stream.aiter_lines():
                        seen += line + "\n"
                        if "secret text" in seen:
                            break
            return seen

        a, b = await session(), await session()
        call = {"name": "probe_echo", "arguments": {"text": "secret text"}}
        r = await http.post(
            srv.mcp_url, headers=a, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}
        )
        ids = [line[3:].strip() for line in r.text.splitlines() if line.startswith("id:")]
        assert ids and "secret text" in r.text
        number = ids[0].split("-")[0]
        for guess in {str(int(number) + k) for k in range(-3, 1) if int(number) + k > 0} | {number}:
            assert "secret text" not in await replay(b, guess), guess
        assert "secret text" in await replay(a, ids[0])  # resuming with the id it was given still works
