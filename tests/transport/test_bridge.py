"""`deskbridge mcp --project PATH` as MCP clients launch it: real `serve` processes, the SDK's stdio client.

The bridge forwards to the live server of PATH when there is one (same session as the browser), else answers
in-process under the workspace lock, which a later `serve` takes over when nothing is unsaved.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client, MCPError, StdioServerParameters

from deskbridge.integrations import endpoints

pytestmark = pytest.mark.anyio


def bridge(project: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "deskbridge", "mcp", "--project", str(project), *extra],
        env=dict(os.environ),
    )


class Serve:
    """A `deskbridge serve` subprocess, started and waited for like a person would."""

    def __init__(self, path: Path, *extra: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "deskbridge", "serve", str(path), "--port", "0", "--no-browser", *extra],
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        self.lines: list[str] = []
        self.url = ""
        while not self.url:
            line = self.proc.stderr.readline()
            if not line:
                raise AssertionError("serve exited:\n" + "".join(self.lines))
            self.lines.append(line)
            if match := re.search(r"MCP endpoint: (http://\S+)/mcp", line):
                self.url = match.group(1)
        for _ in range(100):  # the endpoint file is written right before the server starts listening
            if endpoints.find_live(path) is not None:
                break
            time.sleep(0.05)

    def stop(self, sig: int = signal.SIGINT) -> str:
        self.proc.send_signal(sig)
        _, rest = self.proc.communicate(timeout=20)
        return "".join(self.lines) + rest


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello bridge", "utf-8")
    return ws


def own_endpoint_files() -> list[Path]:
    return sorted(endpoints.endpoints_dir().glob("*.json")) if endpoints.endpoints_dir().is_dir() else []


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_calls_go_to_the_live_server_with_progress_and_errors(folder: Path, mode: str) -> None:
    server = Serve(folder, "--kind", "probe")
    try:
        async with Client(bridge(folder, "--kind", "probe"), mode=mode) as client:
            echoed = await client.call_tool("probe_echo", {"text": "x"})
            # The caller id is the HTTP one: the call reached `serve`, it was not answered in the bridge.
            assert echoed.structured_content["caller"] != "mcp:stdio"
            steps: list[float] = []

            async def progress(done: float, total: float | None, message: str | None) -> None:
                steps.append(done)

            slow = await client.call_tool(
                "probe_slow", {"steps": 3, "delay_ms": 5}, progress_callback=progress
            )
            assert slow.structured_content == {"steps": 3} and steps == [1, 2, 3]
            failed = await client.call_tool("probe_read_file", {"path": "missing.txt"})
            assert failed.is_error and failed.structured_content["code"] == "NOT_FOUND"
    finally:
        server.stop()


async def test_serve_writes_its_endpoint_and_removes_only_its_own_on_ctrl_c(
    folder: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    first, second = Serve(folder, "--kind", "probe"), Serve(other, "--kind", "probe")
    files = {p.name for p in own_endpoint_files()}
    assert endpoints.endpoint_path(folder).name in files and endpoints.endpoint_path(other).name in files
    data = json.loads(endpoints.endpoint_path(folder).read_text())
    assert data["projectDir"] == str(folder.resolve()) and data["pid"] == first.proc.pid
    assert "token" not in data and data["tokenFile"].endswith("token")  # a reference, never the secret
    assert "Traceback" not in first.stop(signal.SIGINT)
    left = {p.name for p in own_endpoint_files()}
    assert endpoints.endpoint_path(folder).name not in left
    assert (
        endpoints.endpoint_path(other).name in left and "last.json" in left
    )  # the other server's files stay
    second.stop(signal.SIGTERM)
    assert own_endpoint_files() == []


def test_last_json_is_used_only_when_its_project_matches(folder: Path, tmp_path: Path) -> None:
    server = Serve(folder, "--kind", "probe")
    try:
        endpoints.endpoint_path(folder).unlink()  # only last.json is left
        assert endpoints.find_live(folder) is not None
        assert endpoints.find_live(folder / "sub") is not None  # a path inside the workspace is served too
        assert endpoints.find_live(tmp_path / "elsewhere") is None
        # An endpoint file that names another project's server is not believed: health says whose it is.
        stranger = tmp_path / "stranger"
        stranger.mkdir()
        data = json.loads((endpoints.endpoints_dir() / "last.json").read_text())
        (endpoints.endpoint_path(stranger)).write_text(json.dumps({**data, "projectDir": str(stranger)}))
        assert endpoints.find_live(stranger) is None
    finally:
        server.stop()


def test_an_endpoint_of_a_dead_process_is_ignored(folder: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    endpoints._write_json(
        endpoints.endpoint_path(folder),
        endpoints.Endpoint(
            url="http://127.0.0.1:9",
            token_file="/nonexistent",
            pid=int(dead.stdout),
            kind="probe",
            project_dir=str(folder.resolve()),
            started=0,
        ).to_json(),
    )
    started = time.monotonic()
    assert endpoints.find_live(folder) is None
    assert time.monotonic() - started < 0.5  # no health check is even tried


async def test_without_a_server_the_bridge_answers_in_process_and_serve_takes_over(folder: Path) -> None:
    async with Client(bridge(folder, "--kind", "probe"), mode="legacy") as client:
        local = await client.call_tool("probe_echo", {"text": "x"})
        assert local.structured_content["caller"] == "mcp:stdio"
        holder = endpoints.WorkspaceLock(folder, "test").holder()
        assert holder is not None and holder["owner"] == "mcp"
        # A later serve of the same folder asks the bridge to let go; nothing is unsaved, so it does.
        server = Serve(folder, "--kind", "probe")
        try:
            live = await client.call_tool("probe_echo", {"text": "y"})
            assert live.structured_content["caller"] != "mcp:stdio", "the server that appeared was not used"
            assert (await client.call_tool("probe_read_file", {"path": "a.txt"})).structured_content["text"]
        finally:
            server.stop()
        # The server went away: the bridge answers in-process again (after its 5 s memory of the failure).
        again = await client.call_tool("probe_echo", {"text": "z"})
        assert not again.is_error and again.structured_content["caller"] == "mcp:stdio"


async def test_serve_refuses_to_take_a_workspace_with_unsaved_changes(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n\nHello.\n", "utf-8")
    subprocess.run(
        [sys.executable, "-m", "deskbridge", "config", "set", "require_approval", "false"], check=True
    )
    async with Client(bridge(notes), mode="legacy") as client:
        doc = (await client.call_tool("md_get_current_document", {})).structured_content
        edit = await client.call_tool(
            "md_insert_text", {"text": "More.\n", "line": 3, "column": 1, "expectedRevision": doc["revision"]}
        )
        assert not edit.is_error, edit.structured_content
        proc = subprocess.run(
            [sys.executable, "-m", "deskbridge", "serve", str(notes), "--port", "0", "--no-browser"],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
        assert proc.returncode == 2, proc.stderr
        assert "unsaved changes" in proc.stderr and "help:" in proc.stderr
        # The bridge still has the document, edit included.
        assert (
            "More." in (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
        )


async def test_editor_tools_are_not_listed_in_process(tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n", "utf-8")
    async with Client(bridge(notes), mode="legacy") as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert "md_get_current_document" in names
        assert not [n for n in names if n.startswith("md_ui_")]
        refused = await client.call_tool("md_ui_get_state", {})
        assert refused.is_error and "deskbridge serve" in refused.structured_content["hint"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_elicitation_reaches_the_client_through_the_bridge(tmp_path: Path, mode: str) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")
    asked: list[str] = []

    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": True})

    server = Serve(notes)
    try:
        async with Client(bridge(notes), mode=mode, elicitation_callback=answer) as client:
            doc = (await client.call_tool("md_get_current_document", {})).structured_content
            result = await client.call_tool(
                "md_replace_text",
                {"oldText": "Hello world.", "newText": "Hello bridge.", "expectedRevision": doc["revision"]},
            )
            assert not result.is_error, result.structured_content
            text = (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
        assert asked and "Hello bridge." in text
    finally:
        server.stop(signal.SIGTERM)  # README.md is unsaved: a Ctrl+C would ask first


async def test_ctrl_c_with_unsaved_changes_names_them_and_a_second_one_stops(tmp_path: Path) -> None:
    """A Ctrl+C used to stop `serve` at once and drop the unsaved documents without a word."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    from deskbridge.settings import load_or_create_token

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")
    subprocess.run(
        [sys.executable, "-m", "deskbridge", "config", "set", "require_approval", "false"],
        check=True,
        capture_output=True,
        env=dict(os.environ),
    )
    server = Serve(notes)
    try:
        headers = {"Authorization": f"Bearer {load_or_create_token()}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(server.url + "/mcp", http_client=http)) as client,
        ):
            doc = (await client.call_tool("md_get_current_document", {})).structured_content
            edit = await client.call_tool(
                "md_replace_text",
                {"oldText": "Hello world.", "newText": "Unsaved.", "expectedRevision": doc["revision"]},
            )
            assert not edit.is_error, edit.structured_content
        server.proc.send_signal(signal.SIGINT)
        warning = ""
        while "unsaved changes in" not in warning:
            line = server.proc.stderr.readline()
            assert line, "serve exited on the first Ctrl+C: " + "".join(server.lines)
            warning += line
        assert "README.md" in warning and "Ctrl+C again" in warning
        time.sleep(0.5)
        assert server.proc.poll() is None, "serve stopped although it said it would wait"
        server.proc.send_signal(signal.SIGINT)
        server.proc.communicate(timeout=20)
        assert server.proc.returncode is not None
        assert (notes / "README.md").read_text("utf-8") == "# Notes\n\nHello world.\n"
    finally:
        if server.proc.poll() is None:
            server.stop(signal.SIGTERM)


async def test_a_reply_from_another_project_is_not_passed_on(tmp_path: Path) -> None:
    """Windows and projects never cross: the project header of every reply is checked again."""
    from types import SimpleNamespace
    from urllib.parse import quote

    from deskbridge.core.errors import BridgeError
    from deskbridge.mcp.bridge import LiveBackend

    mine, theirs = tmp_path / "mine", tmp_path / "theirs"
    endpoint = endpoints.Endpoint(
        url="http://127.0.0.1:9",
        token_file=str(tmp_path / "token"),
        pid=1,
        kind="probe",
        project_dir=str(mine),
        started=0,
    )
    backend = LiveBackend(SimpleNamespace(project=mine), endpoint)  # type: ignore[arg-type]
    try:
        backend._check_project(SimpleNamespace(headers={endpoints.PROJECT_HEADER: quote(str(mine))}))
        with pytest.raises(BridgeError) as crossed:
            backend._check_project(SimpleNamespace(headers={endpoints.PROJECT_HEADER: quote(str(theirs))}))
        assert crossed.value.code == "ACCESS_DENIED" and "deskbridge serve" in crossed.value.hint
        with pytest.raises(BridgeError):
            backend._check_project(SimpleNamespace(headers={}))
    finally:
        await backend.http.aclose()


@pytest.mark.security
async def test_a_server_that_went_away_must_prove_itself_again_before_the_token_is_sent(folder: Path) -> None:
    """`serve` died while the client kept its bridge; another local program bound the same port. The bridge's
    next request used to go there with `Authorization: Bearer <token>`; now the server must answer the token
    challenge again first, and the impostor gets nothing (the bridge answers in-process instead)."""
    import http.server
    import threading
    from urllib.parse import urlsplit

    seen: list[dict[str, str]] = []

    class Impostor(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            body = b'{"proof": "00"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            seen.append(dict(self.headers))
            self.send_response(500)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_DELETE = do_POST

        def log_message(self, *args: object) -> None:
            pass

    server = Serve(folder, "--kind", "probe")
    async with Client(bridge(folder, "--kind", "probe"), mode="legacy") as client:
        live = await client.call_tool("probe_echo", {"text": "x"})
        assert live.structured_content["caller"] != "mcp:stdio"
        port = urlsplit(server.url).port
        server.stop(signal.SIGTERM)
        impostor = http.server.ThreadingHTTPServer(("127.0.0.1", port), Impostor)
        threading.Thread(target=impostor.serve_forever, daemon=True).start()
        try:
            time.sleep(2.5)  # past the bridge's re-verification interval
            after = await client.call_tool("probe_echo", {"text": "y"})
        finally:
            impostor.shutdown()
            impostor.server_close()
    assert not after.is_error and after.structured_content["caller"] == "mcp:stdio"
    assert not any("authorization" in {k.lower() for k in h} for h in seen), seen


async def test_a_folder_holding_one_archive_opens_the_archive(tmp_path: Path) -> None:
    """The MCP bundle asks for a folder ("the folder holding the Script.pvf"): `mcp --project FOLDER` opened it
    as an empty Markdown workspace, so every pvf_* tool was unknown."""
    from deskbridge.kinds.pvf.synth import synth

    game = tmp_path / "game"
    game.mkdir()
    synth(game / "Script.pvf", family="classic", files=20, seed=3)
    (game / "readme.txt").write_text("the game's own readme\n", "utf-8")
    async with Client(bridge(game), mode="legacy") as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "pvf_workspace_info" in names and "md_get_app_status" not in names
        for _ in range(200):
            info = (await client.call_tool("pvf_workspace_info", {})).structured_content
            if info["open"]:
                break
            await anyio.sleep(0.05)
        assert info["sourcePath"] == str((game / "Script.pvf").resolve())
    # a folder of notes that also holds an archive stays a Markdown folder
    (game / "notes.md").write_text("# notes\n", "utf-8")
    async with Client(bridge(game), mode="legacy") as client:
        assert "md_get_app_status" in {t.name for t in (await client.list_tools()).tools}


def test_a_second_serve_of_the_same_folder_names_where_the_first_one_is(folder: Path) -> None:
    # "already served (pid N)" left the person to find that server's address themselves.
    first = Serve(folder, "--kind", "probe")
    try:
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "deskbridge",
                "serve",
                str(folder),
                "--kind",
                "probe",
                "--port",
                "0",
                "--no-browser",
            ],
            capture_output=True,
            text=True,
            env=dict(os.environ),
            timeout=60,
        )
    finally:
        first.stop(signal.SIGTERM)
    assert second.returncode != 0
    out = " ".join(second.stderr.split())  # rich wraps long lines
    assert "already served" in out and first.url in out and "deskbridge open" in out, second.stderr


@pytest.mark.parametrize("form", ["--project", "PATH"])
async def test_a_client_that_closes_before_saving_leaves_a_copy_of_the_unsaved_text(
    tmp_path: Path, deskbridge_home: Path, form: str
) -> None:
    """A host that quits just closes stdin: approved edits that no one saved vanished with the process."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")

    async def approve(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    params = bridge(notes)  # `deskbridge mcp --project PATH`, what setup writes; or `deskbridge mcp PATH`
    if form == "PATH":
        params = params.model_copy(update={"args": ["-m", "deskbridge", "mcp", str(notes)]})
    async with Client(params, mode="legacy", elicitation_callback=approve) as client:
        doc = (await client.call_tool("md_get_current_document", {})).structured_content
        edit = {"oldText": "Hello world.", "newText": "Hello, kept.", "expectedRevision": doc["revision"]}
        assert not (await client.call_tool("md_replace_text", edit)).is_error
    assert (notes / "README.md").read_text("utf-8") == "# Notes\n\nHello world.\n"  # never saved, as asked
    kept = list((deskbridge_home / "state" / "unsaved").iterdir())
    assert [p.read_text("utf-8") for p in kept] == ["# Notes\n\nHello, kept.\n"]
    assert kept[0].name.endswith("README.md") and kept[0].stat().st_mode & 0o777 == 0o600


async def test_a_second_client_on_the_same_folder_is_told_to_share_it_through_serve(tmp_path: Path) -> None:
    """Claude Desktop and Claude Code both set up on one folder: the second was told that a `serve` "did not
    answer in time" and to check that serve was running, when no serve existed and one was the fix; and its
    tools/list was empty, so the client showed a server without tools and the reason nowhere."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n", "utf-8")
    async with Client(bridge(notes)) as first:
        assert not (await first.call_tool("md_search", {"query": "Notes"})).is_error
        async with Client(bridge(notes)) as second:
            with pytest.raises(MCPError) as listing:  # not an empty list: the client shows why
                await second.list_tools()
            refused = await second.call_tool("md_search", {"query": "Notes"})
    assert "another MCP client" in str(listing.value)
    error = refused.structured_content
    assert refused.is_error and error["code"] == "NOT_READY"
    assert "another MCP client" in error["message"] and f"deskbridge serve {notes.resolve()}" in error["hint"]


@pytest.mark.parametrize("live", [False, True], ids=["in-process", "live-serve"])
def test_requests_sent_before_stdin_closes_are_all_answered(folder: Path, live: bool) -> None:
    """`echo '…' | deskbridge-mcp --project PATH` (a script, a quick check by hand) got no answer at all: the
    bridge stopped at end of input with the requests it had read still unanswered."""
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "script", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/call",
            "params": {"name": "probe_read_file", "arguments": {"path": "a.txt"}},
        },
    ]
    server = Serve(folder, "--kind", "probe") if live else None
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "deskbridge", "mcp", "--project", str(folder), "--kind", "probe"],
            input="".join(json.dumps(line) + "\n" for line in lines),
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
    finally:
        if server is not None:
            server.stop()
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())}
    assert sorted(answers) == [1, 2, 3], proc.stdout + proc.stderr
    assert answers[3]["result"]["structuredContent"]["text"] == "hello bridge"
