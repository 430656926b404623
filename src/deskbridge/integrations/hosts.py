"""The MCP hosts `deskbridge setup` knows: where each keeps its config and the shape of a server entry there.

Sources (research/mcp.md §4.5): Claude Desktop `claude_desktop_config.json` (`mcpServers`, stdio only); Claude
Code `~/.claude.json` and the project's `.mcp.json` (`mcpServers`); Cursor `~/.cursor/mcp.json` and
`.cursor/mcp.json` (`mcpServers`); VS Code's user-profile `mcp.json` and `.vscode/mcp.json` (`servers`, with
`type`; JSON with comments), the same for VS Code Insiders and VSCodium in their own user folders (`VSCODE_FOLDERS`);
Codex `~/.codex/config.toml` (`[mcp_servers.<name>]`, tokens only from the
environment). A bearer token is never written into a config file: HTTP entries name `DESKBRIDGE_TOKEN`.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

Scope = Literal["user", "project"]
Format = Literal["json", "jsonc", "toml"]

TOKEN_ENV: Final = "DESKBRIDGE_TOKEN"
HOSTS: Final = ("claude-desktop", "claude-code", "cursor", "vscode", "vscode-insiders", "vscodium", "codex")

VSCODE_FOLDERS: Final = {"vscode": "Code", "vscode-insiders": "Code - Insiders", "vscodium": "VSCodium"}
"""The user-data folder of each VS Code build, under Application Support (macOS), %APPDATA% (Windows) or
$XDG_CONFIG_HOME (Linux); its `User/mcp.json` holds the user's servers. VS Code documents `Code` ("Settings file
locations", https://code.visualstudio.com/docs/configure/settings), Insiders is the same with `Code - Insiders`,
and VSCodium documents `VSCodium` ("Migrating from Visual Studio Code to VSCodium", https://github.com/VSCodium/
vscodium/blob/master/docs/index.md). All three read a workspace's `.vscode/mcp.json`."""


def _home() -> Path:
    return Path(os.environ.get("HOME") or os.environ.get("USERPROFILE") or Path.home())


def _appdata() -> Path:
    return Path(os.environ.get("APPDATA") or _home() / "AppData" / "Roaming")


def _local_appdata() -> Path:
    return Path(os.environ.get("LOCALAPPDATA") or _home() / "AppData" / "Local")


def _xdg_config() -> Path:
    return Path(os.environ.get("XDG_CONFIG_HOME") or _home() / ".config")


def _platform_app_dir(name: str) -> Path:
    """Where a desktop app keeps its user settings: Application Support, %APPDATA% or $XDG_CONFIG_HOME."""
    if sys.platform == "darwin":
        return _home() / "Library" / "Application Support" / name
    if sys.platform == "win32":
        return _appdata() / name
    return _xdg_config() / name


CLAUDE_DESKTOP_CONFIG: Final = "claude_desktop_config.json"


def _claude_desktop_dir() -> Path:
    """The folder whose `claude_desktop_config.json` Claude Desktop reads.

    On Windows, Claude Desktop is an MSIX package (the Store's and the claude.ai installer's, since early 2026).
    Windows redirects a packaged app's %APPDATA% to `%LOCALAPPDATA%/Packages/Claude_<publisher id>/LocalCache/
    Roaming`, so an entry written to `%APPDATA%/Claude` is never read there and the server silently never appears
    (anthropics/claude-code issues #25579 and #26073). The classic folder stays right for an install that is not
    packaged, and for a packaged one without a config of its own while the classic file exists (the redirect
    falls back to it). Two packages (a beta beside the release): the one whose config was written last.
    """
    classic = _platform_app_dir("Claude")
    if sys.platform != "win32":
        return classic
    try:
        packages = [p for p in (_local_appdata() / "Packages").glob("Claude_*") if p.is_dir()]
    except OSError:
        packages = []
    folders = [p / "LocalCache" / "Roaming" / "Claude" for p in packages]
    with_config = [f for f in folders if (f / CLAUDE_DESKTOP_CONFIG).is_file()]
    if with_config:
        return max(with_config, key=lambda f: (f / CLAUDE_DESKTOP_CONFIG).stat().st_mtime_ns)
    if folders and not (classic / CLAUDE_DESKTOP_CONFIG).exists():
        return max(folders, key=lambda f: f.parents[2].stat().st_mtime_ns)
    return classic


@dataclass(frozen=True)
class Host:
    name: str
    title: str
    container: str
    """The key that holds servers: `mcpServers`, `servers` or (TOML) `mcp_servers`."""
    format: Format
    scopes: tuple[Scope, ...]
    http: bool
    """Whether the host can reach a running `serve` over HTTP from its config file."""
    restart: str
    """What the person does so the host reads the change."""

    def config_path(self, scope: Scope, project_dir: Path) -> Path:
        if scope not in self.scopes:
            raise ValueError(f"{self.title} has no {scope} configuration")
        if self.name == "claude-desktop":
            return _claude_desktop_dir() / CLAUDE_DESKTOP_CONFIG
        if self.name == "claude-code":
            return _home() / ".claude.json" if scope == "user" else project_dir / ".mcp.json"
        if self.name == "cursor":
            return (_home() if scope == "user" else project_dir) / ".cursor" / "mcp.json"
        if self.name in VSCODE_FOLDERS:
            return (
                _platform_app_dir(VSCODE_FOLDERS[self.name]) / "User" / "mcp.json"
                if scope == "user"
                else project_dir / ".vscode" / "mcp.json"
            )
        codex_home = Path(os.environ["CODEX_HOME"]) if os.environ.get("CODEX_HOME") else _home() / ".codex"
        return codex_home / "config.toml"

    def stdio_entry(self, launcher: Path, project: Path) -> dict[str, Any]:
        from deskbridge.integrations.launcher import client_command

        command, before, env = client_command(launcher)
        entry: dict[str, Any] = {"command": command, "args": [*before, "--project", str(project)]}
        if env:
            entry["env"] = env
        if self.name in VSCODE_FOLDERS or self.name == "claude-code":
            entry = {"type": "stdio", **entry}
        if self.name == "codex":
            entry["startup_timeout_sec"] = 20  # the first start may index; Codex's default is 10 s
        return entry

    def http_entry(self, url: str) -> dict[str, Any]:
        if not self.http:
            raise ValueError(f"{self.title} cannot reach an HTTP server from its config; use the stdio form")
        if self.name == "codex":
            return {"url": url, "bearer_token_env_var": TOKEN_ENV}
        ref = (
            f"${{{TOKEN_ENV}}}" if self.name == "claude-code" else f"${{env:{TOKEN_ENV}}}"
        )  # Cursor, VS Code
        return {"type": "http", "url": url, "headers": {"Authorization": f"Bearer {ref}"}}


HOST_TABLE: Final[dict[str, Host]] = {
    "claude-desktop": Host(
        "claude-desktop",
        "Claude Desktop",
        "mcpServers",
        "json",
        ("user",),
        False,
        "Quit Claude Desktop completely and open it again.",
    ),
    "claude-code": Host(
        "claude-code",
        "Claude Code",
        "mcpServers",
        "json",
        ("user", "project"),
        True,
        "Start a new `claude` session (`/mcp` lists the servers).",
    ),
    "cursor": Host(
        "cursor",
        "Cursor",
        "mcpServers",
        "json",
        ("user", "project"),
        True,
        "Open Cursor's MCP settings and switch the server on (or restart Cursor).",
    ),
    "vscode": Host(
        "vscode",
        "VS Code",
        "servers",
        "jsonc",
        ("user", "project"),
        True,
        "Run “MCP: List Servers” in VS Code and start deskbridge.",
    ),
    "vscode-insiders": Host(
        "vscode-insiders",
        "VS Code Insiders",
        "servers",
        "jsonc",
        ("user", "project"),
        True,
        "Run “MCP: List Servers” in VS Code Insiders and start deskbridge.",
    ),
    "vscodium": Host(
        "vscodium",
        "VSCodium",
        "servers",
        "jsonc",
        ("user", "project"),
        True,
        "Run “MCP: List Servers” in VSCodium and start deskbridge.",
    ),
    "codex": Host(
        "codex",
        "Codex",
        "mcp_servers",
        "toml",
        ("user",),
        True,
        "Start a new Codex session (`codex mcp list` shows the server).",
    ),
}


def host(name: str) -> Host:
    try:
        return HOST_TABLE[name]
    except KeyError:
        raise ValueError(f"unknown host {name!r}; use one of {', '.join(HOSTS)}") from None
