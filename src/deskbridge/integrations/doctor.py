"""`deskbridge doctor`: the checks behind "my client does not see deskbridge", each with what to do about it."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from deskbridge import __version__

Status = Literal["ok", "warn", "fix"]


@dataclass
class Check:
    name: str
    status: Status
    detail: str
    help: str = ""


def run_checks(host_name: str | None, project: Path | None) -> list[Check]:
    """Every check. Without `project`, the round trip checks the workspace the host's entry names (the README's
    `deskbridge doctor claude-code` after `setup claude-code --project ~/notes`), else the current folder."""
    from deskbridge.settings import deskbridge_dirs

    dirs = deskbridge_dirs()
    checks = [_install(), _launcher(dirs), _token(dirs), _port(dirs)]
    configured = _configured_project(host_name)
    target = project or configured or Path.cwd().resolve()
    checks += _hosts(host_name, target)
    http_url = _configured_http_url(host_name)
    if http_url is not None:
        checks.append(_http_entry(http_url, project))
    else:
        checks.append(_round_trip(target, dirs))
    return checks


def _entries(host_name: str | None) -> list[dict[str, object]]:
    from deskbridge.integrations.hosts import host
    from deskbridge.integrations.setup import current_entry, setups

    if host_name is None:
        return []
    try:
        h = host(host_name)
    except ValueError:
        return []
    out = []
    for record in setups():
        if record.get("host") != h.name:
            continue
        with contextlib.suppress(Exception):  # the entry as it is in the file now, else as we wrote it
            text = Path(record["file"]).read_text("utf-8")
            record = {**record, "entry": current_entry(h, text, record["name"]) or record["entry"]}
        out.append(record)
    return out


def _configured_project(host_name: str | None) -> Path | None:
    """The one workspace the host's stdio entries name (`args: ["--project", PATH]`), if there is exactly one."""
    from deskbridge.integrations.setup import entry_project

    found = set()
    for record in _entries(host_name):
        workspace = entry_project(record.get("entry"))
        if workspace is not None:
            found.add(workspace)
    return Path(found.pop()) if len(found) == 1 else None


def _configured_http_url(host_name: str | None) -> str | None:
    urls = {
        str(entry["url"])
        for record in _entries(host_name)
        if isinstance(entry := record.get("entry"), dict) and entry.get("url")
    }
    return urls.pop() if len(urls) == 1 else None


def _http_entry(url: str, project: Path | None) -> Check:
    """An HTTP entry reaches only a running `serve`: say whether one answers at its URL (and proves it is ours)."""
    from deskbridge.integrations.endpoints import Endpoint, health
    from deskbridge.settings import deskbridge_dirs

    base = url.removesuffix("/mcp")
    probe = Endpoint(
        url=base, token_file=str(deskbridge_dirs().token_file), pid=0, kind="", project_dir="", started=0
    )
    answer = health(probe)
    if answer is None:
        return Check(
            "round trip",
            "fix",
            f"the client's entry points at {url}, where no deskbridge serve answers",
            f"Start it: `deskbridge serve {project or 'PATH'}` (an HTTP entry needs a running server), or use "
            "the stdio form: `deskbridge setup HOST` without --http.",
        )
    token_env = os.environ.get("DESKBRIDGE_TOKEN")
    if not token_env:
        return Check(
            "round trip",
            "warn",
            f"{url}: deskbridge serve of {answer.get('projectDir')}; DESKBRIDGE_TOKEN is not set in this shell",
            "The client reads the token from DESKBRIDGE_TOKEN: `export DESKBRIDGE_TOKEN=$(deskbridge token show)` "
            "before starting it.",
        )
    if token_env.strip() != (probe.token() or ""):
        return Check(
            "round trip",
            "fix",
            f"{url}: DESKBRIDGE_TOKEN in this shell is not the server's token (rotated?)",
            "`export DESKBRIDGE_TOKEN=$(deskbridge token show)`, then restart the client.",
        )
    return Check("round trip", "ok", f"{url}: deskbridge serve of {answer.get('projectDir')}, token matches")


def _install() -> Check:
    missing = [m for m in ("playwright", "pypandoc") if importlib.util.find_spec(m) is None]
    detail = f"deskbridge {__version__} on {sys.executable}"
    if missing:
        return Check(
            "install",
            "warn",
            detail + " (without the export extra: Markdown PDF/PNG/Word export is off)",
            "`pip install 'deskbridge[export]'` (pipx: `pipx inject deskbridge playwright pypandoc-binary`); "
            "PDF and PNG also need Chromium (`apt-get install chromium`).",
        )
    return Check("install", "ok", detail)


def _launcher(dirs: object) -> Check:
    from deskbridge.integrations.launcher import launcher_problem, write_launcher

    try:
        path = write_launcher()
    except OSError as exc:
        return Check(
            "launcher", "fix", f"cannot write the launcher: {exc}", "Check the config folder's permissions."
        )
    problem = launcher_problem()
    if problem:
        return Check("launcher", "fix", problem, "Run `deskbridge setup HOST` again.")
    return Check("launcher", "ok", f"{path} (refreshed: points at this installation)")


def _token(dirs: object) -> Check:
    from deskbridge.settings import deskbridge_dirs

    path = deskbridge_dirs().token_file
    if not path.exists():
        return Check(
            "token", "warn", f"no token yet at {path}", "It is made on first use: `deskbridge token show`."
        )
    try:
        token = path.read_text("ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        return Check(
            "token", "fix", f"{path} cannot be read: {exc}", "`deskbridge token rotate` writes a new one."
        )
    if len(token) < 32:
        return Check(
            "token", "fix", f"{path} holds no valid token", "`deskbridge token rotate` writes a new one."
        )
    if os.name == "posix" and path.stat().st_mode & 0o077:
        return Check(
            "token",
            "fix",
            f"{path} is readable by others",
            f"`chmod 600 {path}`, then `deskbridge token rotate`.",
        )
    return Check("token", "ok", f"{path} (owner-only)")


def _port(dirs: object) -> Check:
    from deskbridge.integrations.endpoints import endpoints_dir, pid_alive
    from deskbridge.settings import load_settings

    try:
        port = load_settings().port
    except Exception as exc:
        return Check(
            "port",
            "fix",
            f"the settings cannot be read: {exc}",
            "`deskbridge config show` says where they are.",
        )
    served = []
    with contextlib.suppress(OSError):
        for file in endpoints_dir().glob("*.json"):
            with contextlib.suppress(Exception):
                data = json.loads(file.read_text("utf-8"))
                if str(data.get("url", "")).endswith(f":{port}") and pid_alive(int(data.get("pid", 0))):
                    served.append(data)
    if served:
        data = served[0]
        return Check(
            "port", "ok", f"{port}: deskbridge serve (pid {data['pid']}) for {data.get('projectDir')}"
        )
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return Check(
                "port",
                "fix",
                f"{port} is used by another program",
                f"`deskbridge config set port {port + 1}` (or stop that program).",
            )
    return Check("port", "ok", f"{port} is free (`deskbridge serve` will listen there)")


def _setup_again(record: dict[str, object], project: Path) -> str:
    """The `deskbridge setup` command that writes this recorded entry again: its workspace, scope, form and name.

    A bare `deskbridge setup HOST` (the old advice) sets up the folder the shell is in, and under the default name.
    """
    import shlex

    from deskbridge.integrations.setup import DEFAULT_NAME, entry_project

    entry = record.get("entry")
    entry = entry if isinstance(entry, dict) else {}
    project = Path(entry_project(entry) or project)
    words = ["deskbridge", "setup", str(record["host"]), "--project", str(project)]
    if record.get("scope") == "project":
        words += ["--scope", "project"]
    if entry.get("url"):
        words.append("--http")
    if record.get("name", DEFAULT_NAME) != DEFAULT_NAME:
        words += ["--name", str(record["name"])]
    return f"`{shlex.join(words)}`."


def _hosts(host_name: str | None, project: Path) -> list[Check]:
    from deskbridge.integrations.hosts import HOSTS, host
    from deskbridge.integrations.setup import entry_problem, project_folder, setups

    out = []
    records = setups()
    if host_name is not None:
        try:
            h = host(host_name)
        except ValueError as exc:
            return [Check("host", "fix", str(exc), f"Use one of {', '.join(HOSTS)}.")]
        mine = [r for r in records if r["host"] == h.name] or [
            {
                "host": h.name,
                "scope": scope,
                "file": str(h.config_path(scope, project_folder(project))),
                "name": "deskbridge",
            }
            for scope in h.scopes
        ]
        for r in mine:
            file, name = Path(r["file"]), r["name"]
            problem = entry_problem(file, name, h)
            if problem:
                out.append(Check(h.name, "fix", problem, _setup_again(r, project)))
            else:
                out.append(Check(h.name, "ok", f"{name!r} in {file}; {h.restart}"))
        return out
    if not records:
        return [
            Check(
                "clients",
                "warn",
                "no client was set up with `deskbridge setup`",
                "`deskbridge setup claude-code` (or cursor, vscode, codex, claude-desktop).",
            )
        ]
    for r in records:
        h = host(r["host"])
        problem = entry_problem(Path(r["file"]), r["name"], h)
        out.append(
            Check(
                h.name,
                "fix" if problem else "ok",
                problem or f"{r['name']!r} in {r['file']}",
                _setup_again(r, project) if problem else "",
            )
        )
    return out


def _round_trip(project: Path, dirs: object) -> Check:
    """One tools/list: over HTTP to the live server of `project`, else over stdio through the launcher."""
    import anyio

    from deskbridge.integrations.endpoints import find_live

    endpoint = find_live(project)

    async def over_http() -> int:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        assert endpoint is not None
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {endpoint.token()}"}, timeout=10) as http,
            Client(streamable_http_client(endpoint.url + "/mcp", http_client=http)) as client,
        ):
            return len((await client.list_tools()).tools)

    async def over_stdio() -> int:
        from mcp import Client, StdioServerParameters

        from deskbridge.integrations.launcher import client_command, launcher_path

        command, before, env = client_command(launcher_path())  # what the client's entry runs
        params = StdioServerParameters(
            command=command, args=[*before, "--project", str(project)], env={**os.environ, **env}
        )
        with anyio.fail_after(30):
            async with Client(params) as client:
                return len((await client.list_tools()).tools)

    started = time.perf_counter()
    try:
        count = anyio.run(over_http if endpoint is not None else over_stdio)
    except Exception as exc:
        where = f"{endpoint.url}/mcp" if endpoint is not None else "the launcher over stdio"
        return Check(
            "round trip",
            "fix",
            f"tools/list through {where} failed: {type(exc).__name__}: {exc}",
            "Run `deskbridge mcp --project PATH` by hand to see its error, or `deskbridge serve PATH`.",
        )
    ms = (time.perf_counter() - started) * 1000
    via = (
        f"the live server {endpoint.url} (pid {endpoint.pid})"
        if endpoint is not None
        else "the launcher over stdio (no server is running for it)"
    )
    return Check("round trip", "ok", f"tools/list for {project}: {count} tools via {via} in {ms:.0f} ms")
