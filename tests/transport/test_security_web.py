"""REL-ATTACK, the web layer: the UI secret and the MCP token, performed over a real HTTP server (issue 8).

* the UI secret never reaches a command line: `serve` opens the browser on an owner-only file that holds a
  one-time login code, and the printed link carries another one-time code;
* the cookie is no way to read the MCP token silently; a stray `/?k=…` never replaces a session;
* the token file and the folders stay owner-only; non-ASCII credentials are a 401, never a 500;
* every response forbids framing (clickjacking; the browser side is tests/e2e/security_browser_test.py).
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from deskbridge.testing import running_server

pytestmark = [pytest.mark.anyio, pytest.mark.security]

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}

FAKE_BROWSER = """\
import json, sys
with open(sys.argv[1], "w") as out:
    cmdline = open("/proc/self/cmdline", "rb").read().decode("utf-8", "replace").split("\\0")
    json.dump({"argv": sys.argv[2:], "cmdline": cmdline}, out)
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "hello.txt").write_text("hello\n", "utf-8")
    return root


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc like `ps` does")
def test_serve_never_puts_the_ui_secret_on_a_command_line(
    folder: Path, tmp_path: Path, deskbridge_home: Path
) -> None:
    seen = tmp_path / "browser.json"
    browser = tmp_path / "fake-browser.py"
    browser.write_text(FAKE_BROWSER, "utf-8")
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} {seen} %s"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "deskbridge", "serve", str(folder), "--kind", "probe", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        lines: list[str] = []
        printed = None
        while printed is None:
            line = proc.stderr.readline()
            assert line, "".join(lines)
            lines.append(line)
            printed = re.search(
                r"one-time link \(valid (\d+) s\): (http://127\.0\.0\.1:(\d+))/\?k=(\S+)", line
            )
        ttl, base, port, printed_code = int(printed[1]), printed[2], int(printed[3]), printed[4]
        assert ttl <= 60
        deadline = time.monotonic() + 20
        while not seen.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        opened = json.loads(seen.read_text("utf-8"))
        run = deskbridge_home / "run"
        record = json.loads((run / f"server-{port}.json").read_text("utf-8"))
        secret = record["uiSecret"]
        # What any local user sees with `ps`: the browser's and the server's command lines.
        server_cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode()
        for shown in (" ".join(opened["argv"]), " ".join(opened["cmdline"]), server_cmdline):
            assert secret not in shown and "?k=" not in shown and printed_code not in shown
        (target,) = opened["argv"]
        assert target.startswith("file://")
        page = Path(target.removeprefix("file://"))
        assert page.parent == run
        assert _mode(page) == 0o600 and _mode(run) == 0o700 and _mode(run / f"server-{port}.json") == 0o600
        page_code = re.search(r"\?k=([A-Za-z0-9_-]+)", page.read_text("utf-8"))[1]
        assert secret not in page.read_text("utf-8")

        for code in (page_code, printed_code):  # each opens exactly one session
            first = httpx2.get(f"{base}/?k={code}")
            assert first.status_code == 303 and "deskbridge_ui=" in first.headers["set-cookie"]
            assert httpx2.get(base + "/api/status", cookies=dict(first.cookies)).status_code == 200
            again = httpx2.get(f"{base}/?k={code}")
            assert again.status_code == 403 and "set-cookie" not in again.headers
            assert "deskbridge open" in again.text

        # Later, a person re-opens the UI with `deskbridge open` (it asks the running server for a new code).
        reopened = subprocess.run(
            [sys.executable, "-m", "deskbridge", "open", "--print"], capture_output=True, text=True, env=env
        )
        assert reopened.returncode == 0, reopened.stderr
        link = reopened.stdout.strip()
        assert link.startswith(f"{base}/?k=") and secret not in link
        assert httpx2.get(link).status_code == 303
        assert httpx2.get(link).status_code == 403
    finally:
        proc.terminate()
        proc.communicate(timeout=15)
    assert not (deskbridge_home / "run" / f"server-{port}.json").exists()  # removed when the server stops


async def test_a_login_code_expires_within_a_minute(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        codes = srv.app.security_policy.login_codes
        assert codes.ttl_s <= 60
        now = [1000.0]
        codes.clock = lambda: now[0]
        link = srv.login_url()
        now[0] += codes.ttl_s + 1
        expired = await http.get(link)
        assert expired.status_code == 403 and "set-cookie" not in expired.headers


async def test_a_stray_login_parameter_never_replaces_the_session(folder: Path) -> None:
    # A document's <img src="/?k=x"> used to overwrite the cookie: the person was logged out mid-approval.
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        login = await http.get(srv.login_url())
        assert login.status_code == 303
        for bogus in ("x", srv.app.token, "", "é", "a" * 5000):
            r = await http.get(srv.base_url + "/", params={"k": bogus})
            assert "set-cookie" not in r.headers, bogus
            assert r.status_code == 303  # already signed in: back to the UI, session unchanged
        assert (await http.get(srv.base_url + "/api/status")).status_code == 200
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as fresh:
        r = await fresh.get(srv.base_url + "/?k=x")
        assert r.status_code == 403 and "set-cookie" not in r.headers
        assert (await fresh.get(srv.base_url + "/api/status")).status_code == 401


async def test_a_same_site_page_cannot_use_the_cookie_even_for_a_get(folder: Path) -> None:
    """A page on another loopback port is same-site, so the strict cookie rides along with its `<img
    src=".../api/events?editor=x">` (no Origin on such a GET): the broker then believed a person was watching and
    sent the agent's approvals to no one, and the draft barrier had an editor to ask before every save.
    The headers are the ones Chromium sent for such an <img>, <script>, <audio> and no-cors fetch (captured:
    `Sec-Fetch-Site: same-site`, `Sec-Fetch-Mode: no-cors`, the cookie, no Origin); Chromium's opaque-response
    blocking then drops the stream, other browsers and a page that fires requests in a loop keep it attached."""
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())  # the person's browser session
        for site in ("same-site", "cross-site"):
            for path in ("/api/events?editor=evil", "/api/status", "/api/approvals"):
                r = await http.get(
                    srv.base_url + path, headers={"Sec-Fetch-Site": site, "Sec-Fetch-Mode": "no-cors"}
                )
                assert r.status_code == 403 and r.json()["error"]["code"] == "CROSS_SITE", (site, path)
        assert not srv.app.approvals.ui_attached
        # the page's own requests (same-origin) and clients that send no Fetch Metadata still work
        own = {"Sec-Fetch-Site": "same-origin", "Sec-Fetch-Mode": "cors", "Sec-Fetch-Dest": "empty"}
        ok = await http.get(srv.base_url + "/api/status", headers=own)
        assert ok.status_code == 200
        assert (await http.get(srv.base_url + "/api/status")).status_code == 200


async def test_the_ui_cookie_cannot_read_the_mcp_token_silently(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        await http.get(srv.login_url())  # a browser session (the cookie), as a stolen cookie would be
        old = await http.get(srv.base_url + "/api/token")
        assert old.status_code in (404, 405) and srv.app.token not in old.text
        rotated = await http.post(srv.base_url + "/api/token/rotate")
        assert rotated.status_code == 200 and srv.app.token not in rotated.text
        # A reveal needs a fresh request, then an explicit confirmation of that very request.
        unconfirmed = await http.post(srv.base_url + "/api/token/reveal/made-up", json={"confirmed": True})
        assert unconfirmed.status_code == 404 and srv.app.token not in unconfirmed.text
        ask = (await http.post(srv.base_url + "/api/token/reveal")).json()
        assert srv.app.token not in json.dumps(ask)
        no = await http.post(srv.base_url + f"/api/token/reveal/{ask['requestId']}", json={})
        assert no.status_code == 400 and srv.app.token not in no.text
        yes = await http.post(
            srv.base_url + f"/api/token/reveal/{ask['requestId']}", json={"confirmed": True}
        )
        assert yes.status_code == 200 and yes.json()["token"] == srv.app.token
        replay = await http.post(
            srv.base_url + f"/api/token/reveal/{ask['requestId']}", json={"confirmed": True}
        )
        assert replay.status_code == 404  # single use
        tools = [r.tool for r in srv.app.audit.recent()]
        assert tools.count("token.reveal") == 1 and "token.rotate" in tools  # never silent


def test_the_token_file_is_rewritten_owner_only_even_after_a_chmod(deskbridge_home: Path) -> None:
    if os.name != "posix":
        pytest.skip("POSIX permissions")
    from deskbridge.settings import deskbridge_dirs, load_or_create_token

    dirs = deskbridge_dirs()
    token = load_or_create_token(dirs)
    os.chmod(dirs.token_file, 0o644)
    os.chmod(dirs.config, 0o755)
    assert load_or_create_token(dirs) == token  # reading puts it back to 0600
    assert _mode(dirs.token_file) == 0o600 and _mode(dirs.config) == 0o700
    os.chmod(dirs.token_file, 0o644)
    rotated = load_or_create_token(dirs, rotate=True)  # `deskbridge token rotate`
    assert rotated != token and _mode(dirs.token_file) == 0o600
    subprocess.run([sys.executable, "-m", "deskbridge", "token", "rotate"], check=True, capture_output=True)
    assert _mode(dirs.token_file) == 0o600
    from deskbridge.app import App
    from deskbridge.settings import Settings

    App.create(dirs=dirs, settings=Settings(audit_log=True))
    assert _mode(dirs.data) == 0o700


async def test_rotating_from_the_ui_keeps_the_token_file_owner_only(
    folder: Path, deskbridge_home: Path
) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        os.chmod(srv.app.dirs.token_file, 0o644)
        assert (
            await http.post(srv.base_url + "/api/token/rotate", headers=srv.ui_headers())
        ).status_code == 200
        assert _mode(srv.app.dirs.token_file) == 0o600


def _raw(port: int, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


async def test_non_ascii_credentials_are_401_without_a_traceback(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import anyio

    async with running_server(folder, kind="probe") as srv:
        host = f"Host: 127.0.0.1:{srv.port}\r\n".encode()
        body = json.dumps(INIT).encode()
        requests = [
            b"GET /api/status HTTP/1.1\r\n" + host + b"X-Deskbridge-UI: \xe9\xff\xfe-secret\r\n\r\n",
            b"GET /api/status HTTP/1.1\r\n" + host + b"Cookie: deskbridge_ui=\xe9\xe9\r\n\r\n",
            b"POST /mcp HTTP/1.1\r\n"
            + host
            + b"Authorization: Bearer \xe9\xe9\xe9\r\nContent-Type: application/json\r\n"
            + b"Accept: application/json, text/event-stream\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body,
        ]
        with caplog.at_level(logging.ERROR):
            for request in requests:
                answer = await anyio.to_thread.run_sync(_raw, srv.port, request)
                assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text
    assert "Traceback" not in caplog.text


async def test_every_response_forbids_framing(folder: Path) -> None:
    async with running_server(folder, kind="probe") as srv, httpx2.AsyncClient() as http:
        base = srv.base_url
        ui = srv.ui_headers()
        responses = {
            "index": await http.get(base + "/"),
            "static": await http.get(base + "/static/platform.js"),
            "api": await http.get(base + "/api/status", headers=ui),
            "api 401": await http.get(base + "/api/status"),
            "404": await http.get(base + "/nowhere", headers=ui),
            "421": await http.get(base + "/", headers={"Host": "evil.example:1"}),
            "403 origin": await http.get(
                base + "/api/status", headers={**ui, "Origin": "http://127.0.0.1:1"}
            ),
            "login used": await http.get(base + "/?k=nothing"),
            "mcp 401": await http.post(base + "/mcp", json=INIT, headers=ACCEPT),
            "mcp": await http.post(base + "/mcp", json=INIT, headers={**ACCEPT, **srv.auth_headers()}),
            "login": await http.get(srv.login_url()),
        }
        async with http.stream("GET", base + "/api/events", headers=ui) as events:
            responses["event stream"] = events
    for name, r in responses.items():
        assert "frame-ancestors 'none'" in r.headers.get("content-security-policy", ""), name
        assert r.headers.get("x-frame-options") == "DENY", name
        assert r.headers.get("x-content-type-options") == "nosniff", name
