"""Client configuration snippets for the MCP hosts people use, for HTTP (a running `serve`) and stdio.

Shapes follow each host's documented config file (research/mcp.md §4.5): `mcpServers` for Claude Desktop,
Claude Code and Cursor; `servers` with `type` for VS Code; TOML `[mcp_servers.<name>]` for Codex.
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Final

CLIENTS: Final = ("claude-desktop", "claude-code", "cursor", "vscode", "codex")
SERVER_NAME: Final = "deskbridge"


def launcher() -> str:
    """An absolute command for stdio hosts: they start servers with a minimal PATH and their own cwd."""
    return shutil.which("deskbridge") or f"{sys.executable} -m deskbridge"


def http_snippet(client: str, url: str, token: str) -> str:
    """How to point `client` at a running `deskbridge serve`."""
    auth = f"Bearer {token}"
    if client in ("claude-desktop", "claude-code", "cursor"):
        body = {"mcpServers": {SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": auth}}}}
        return json.dumps(body, indent=2)
    if client == "vscode":
        body = {"servers": {SERVER_NAME: {"type": "http", "url": url, "headers": {"Authorization": auth}}}}
        return json.dumps(body, indent=2)
    if client == "codex":
        # Codex refuses inline bearer tokens; it reads the token from an environment variable instead.
        return (
            f'[mcp_servers.{SERVER_NAME}]\nurl = "{url}"\nbearer_token_env_var = "DESKBRIDGE_TOKEN"\n'
            f"# then: export DESKBRIDGE_TOKEN={token}"
        )
    raise ValueError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")


def stdio_snippet(client: str, path: str) -> str:
    """How to let `client` start `deskbridge mcp PATH` itself (no server, no token needed)."""
    command = launcher()
    parts = command.split(" ")
    cmd, args = parts[0], [*parts[1:], "mcp", path]
    if client in ("claude-desktop", "claude-code", "cursor"):
        return json.dumps({"mcpServers": {SERVER_NAME: {"command": cmd, "args": args}}}, indent=2)
    if client == "vscode":
        return json.dumps(
            {"servers": {SERVER_NAME: {"type": "stdio", "command": cmd, "args": args}}}, indent=2
        )
    if client == "codex":
        return f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(cmd)}\nargs = {json.dumps(args)}\n"
    raise ValueError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")
