"""REL-ATTACK, the endpoint files: `deskbridge mcp --project` must not hand the MCP token to whoever holds a port.

An endpoint file outlives a `serve` that was killed (SIGKILL, OOM, a crash, the machine's restart) and its pid then
names some other live process. Another local user can bind that loopback port. The bridge (and `doctor`) used to
send `Authorization: Bearer <token>` with its first health check to whatever answered there; now the server must
first answer a random challenge with an HMAC of the token, and only a server that does is sent the token.
"""

from __future__ import annotations

import http.server
import json
import os
import secrets
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import httpx2
import pytest

from deskbridge.integrations import endpoints
from deskbridge.settings import deskbridge_dirs, load_or_create_token
from deskbridge.testing import ServerThread
from deskbridge.web.security import HEALTH_CHALLENGE_HEADER, health_proof

pytestmark = pytest.mark.security


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n", "utf-8")
    return root


class Impostor(http.server.BaseHTTPRequestHandler):
    """Answers like a deskbridge server for any project and records every credential it is sent."""

    seen: ClassVar[list[dict[str, str]]] = []
    project = ""

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        body = json.dumps(
            {"ok": True, "projectDir": self.project, "proof": secrets.token_hex(32), "pid": 1}
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def impostor(folder: Path) -> Iterator[tuple[int, list[dict[str, str]]]]:
    seen: ClassVar[list[dict[str, str]]] = []
    handler = type("H", (Impostor,), {"seen": seen, "project": str(folder.resolve())})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], seen
    finally:
        server.shutdown()
        server.server_close()


def test_a_stale_endpoint_on_a_port_someone_else_holds_never_gets_the_token(
    folder: Path, impostor: tuple[int, list[dict[str, str]]]
) -> None:
    port, seen = impostor
    token = load_or_create_token()
    # What a killed `serve` leaves behind; its pid now belongs to a live process (here: this one).
    endpoints._write_json(
        endpoints.endpoint_path(folder),
        endpoints.Endpoint(
            url=f"http://127.0.0.1:{port}",
            token_file=str(deskbridge_dirs().token_file),
            pid=os.getpid(),
            kind="markdown",
            project_dir=str(folder.resolve()),
            started=0,
        ).to_json(),
    )
    assert endpoints.find_live(folder) is None
    assert seen, "the impostor was not even asked"
    sent = json.dumps(seen)
    assert token not in sent and not any("authorization" in {k.lower() for k in h} for h in seen)


def test_a_real_server_proves_itself_and_tells_a_stranger_nothing_else(folder: Path) -> None:
    with ServerThread(folder, kind="probe") as st:
        assert st.srv is not None
        url, token = st.srv.base_url, st.srv.app.token
        challenge = secrets.token_hex(32)
        answer = httpx2.get(url + endpoints.HEALTH_PATH, headers={HEALTH_CHALLENGE_HEADER: challenge})
        assert answer.status_code == 200 and answer.json() == {
            "proof": health_proof(token, challenge, st.srv.port)
        }
        # No challenge, no token: still 401; a malformed challenge is refused; the Host check still applies.
        assert httpx2.get(url + endpoints.HEALTH_PATH).status_code == 401
        bad = httpx2.get(url + endpoints.HEALTH_PATH, headers={HEALTH_CHALLENGE_HEADER: "x" * 40})
        assert bad.status_code == 400 and "proof" not in bad.text
        rebound = httpx2.get(
            url + endpoints.HEALTH_PATH, headers={HEALTH_CHALLENGE_HEADER: challenge, "Host": "evil.test"}
        )
        assert rebound.status_code == 421
        # The challenge opens nothing else under /mcp.
        assert httpx2.post(url + "/mcp", headers={HEALTH_CHALLENGE_HEADER: challenge}).status_code == 401
        # And the bridge's check accepts it.
        endpoints._write_json(
            endpoints.endpoint_path(folder),
            endpoints.Endpoint(
                url=url,
                token_file=str(deskbridge_dirs().token_file),
                pid=os.getpid(),
                kind="probe",
                project_dir=str(folder.resolve()),
                started=0,
            ).to_json(),
        )
        assert load_or_create_token() == token
        found = endpoints.find_live(folder)
        assert found is not None and found.url == url


def test_a_program_on_a_stale_port_cannot_pass_the_challenge_on_to_another_live_server(folder: Path) -> None:
    """Every `serve` of one user holds the same token. A program on the port of a killed one used to forward the
    challenge to another live `serve` (which answers it without credentials), return that proof, and then
    receive the bearer token."""
    seen: list[dict[str, str]] = []
    with ServerThread(folder, kind="probe") as live:
        assert live.srv is not None
        real = live.srv.base_url

        class Relay(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(dict(self.headers))
                challenge = self.headers.get(HEALTH_CHALLENGE_HEADER)
                if challenge is not None:
                    body = httpx2.get(
                        real + endpoints.HEALTH_PATH, headers={HEALTH_CHALLENGE_HEADER: challenge}
                    ).content
                else:
                    body = json.dumps({"ok": True, "projectDir": str(folder.resolve()), "pid": 1}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        relay = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Relay)
        thread = threading.Thread(target=relay.serve_forever, daemon=True)
        thread.start()
        try:
            stale = endpoints.Endpoint(
                url=f"http://127.0.0.1:{relay.server_address[1]}",
                token_file=str(deskbridge_dirs().token_file),
                pid=os.getpid(),
                kind="probe",
                project_dir=str(folder.resolve()),
                started=0,
            )
            endpoints._write_json(endpoints.endpoint_path(folder), stale.to_json())
            assert not endpoints.proves_token(stale)
            found = endpoints.find_live(folder)
            assert found is None or found.url == real
        finally:
            relay.shutdown()
            relay.server_close()
    assert seen, "the relay was not even asked"
    token = load_or_create_token()
    assert token not in json.dumps(seen) and not any("authorization" in {k.lower() for k in h} for h in seen)
