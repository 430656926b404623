"""Persisted settings and the per-user directories (config, data, cache), with a test override.

Settings live in `<config dir>/config.json`; the MCP bearer token lives beside it in `token`. Both files are
written owner-only (0600) every time, whatever mode an existing file had, and the config, data and runtime
directories are kept owner-only (0700). The runtime directory holds the per-run files of `serve`: the login page
it opens in the browser and the server record `deskbridge open` reads. `DESKBRIDGE_HOME` moves every directory
under one folder (tests, portable installs).
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.folders import private_dir  # re-exported: callers import it from here too

APP_NAME: Final = "deskbridge"
DEFAULT_PORT: Final = 17891
TOKEN_BYTES: Final = 32
"""Random bytes in the MCP bearer token (shown as 64 hex characters)."""

SMALL_FILE_MAX_BYTES: Final = 1024 * 1024
"""Bytes of the settings or token file at most (they are a few hundred bytes)."""


@dataclass(frozen=True)
class Dirs:
    """Where deskbridge keeps its files; every directory is created on first use."""

    config: Path
    data: Path
    cache: Path
    runtime: Path | None = None
    """Per-run files (login page, server record); None means `<data>/run`."""

    @property
    def run(self) -> Path:
        return self.runtime if self.runtime is not None else self.data / "run"

    @property
    def settings_file(self) -> Path:
        return self.config / "config.json"

    @property
    def token_file(self) -> Path:
        return self.config / "token"


def deskbridge_dirs() -> Dirs:
    """The platform directories (platformdirs), or all under `$DESKBRIDGE_HOME` when it is set."""
    home = os.environ.get("DESKBRIDGE_HOME")
    if home:
        base = Path(home).expanduser()
        return Dirs(config=base / "config", data=base / "data", cache=base / "cache", runtime=base / "run")
    return Dirs(
        config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        runtime=_runtime_dir(),
    )


def _runtime_dir() -> Path:
    """`$XDG_RUNTIME_DIR/deskbridge` (a per-user tmpfs) on Linux, else the state directory; on other systems the
    platform's per-user runtime directory. Never a shared /tmp folder another user could have created first."""
    if sys.platform.startswith("linux") or sys.platform.startswith("freebsd"):
        xdg = os.environ.get("XDG_RUNTIME_DIR")
        if xdg and os.path.isabs(xdg) and os.path.isdir(xdg):
            return Path(xdg) / APP_NAME
        return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)) / "run"
    return Path(platformdirs.user_runtime_dir(APP_NAME, appauthor=False))


def read_small_file(path: Path) -> str | None:
    """The text of one of our own small files (settings, token), or None when it does not exist.

    Read with `core.files.read_regular_file`: a FIFO or a device planted under that name cannot hang or flood us.
    """
    from deskbridge.core.files import read_regular_file

    try:
        return read_regular_file(path, max_bytes=SMALL_FILE_MAX_BYTES).decode("utf-8")
    except BridgeError as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            return None
        raise
    except UnicodeDecodeError as exc:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{str(path)!r} is not UTF-8 text") from exc


class SageSettings(BaseModel):
    """Settings of the sage kind."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    sdk: str | None = None
    """Path of the SAGE SDK (folder with `SageXml/` and `Schemas/`)."""
    search_paths: list[str] = Field(default_factory=list, alias="searchPaths")
    """Extra DATA search roots, searched after the mod's own `Data/`."""


RESTART_SETTINGS = ("port", "audit_log", "sage")
"""Top-level settings a running `deskbridge serve` reads only when it starts (the port it is bound to, the audit
file it opened, the options the sage workspace was opened with); every other setting is applied live."""


class Settings(BaseModel):
    """Everything `deskbridge config set` can change. Unknown keys are refused, not ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, validate_assignment=True)

    port: int = Field(DEFAULT_PORT, ge=1, le=65535)
    """TCP port of `deskbridge serve` (loopback)."""
    mcp_enabled: bool = True
    """Serve MCP at /mcp. When false only the web UI runs."""
    access_scope: Literal["current_document", "current_folder", "custom_folder"] = "current_folder"
    """What MCP callers may reach: the open document, its folder, or the custom roots below."""
    custom_roots: list[str] = Field(default_factory=list)
    """Allowed roots when access_scope is custom_folder."""
    require_approval: bool = True
    """Ask the person before risky operations (edits, overwrite, opening outside the workspace…)."""
    approval_rules: dict[str, bool] = Field(default_factory=dict)
    """Per-operation override of whether approval is needed, e.g. {"edit": false}."""
    approvals_via_client: bool = True
    """With no deskbridge page open, ask for approvals through the calling MCP client (its host shows the question
    to its person: MCP elicitation). False = approvals need the browser; with no page open a change needing
    approval is declined. A scripted client can answer elicitation itself, so turn this off if you do not trust
    the clients you connect."""
    audit_log: bool = False
    """Also append audit records to a JSON-lines file in the data directory."""
    sage: SageSettings = Field(default_factory=SageSettings)


def load_settings(dirs: Dirs | None = None) -> Settings:
    """Read the settings file; a missing file means defaults, a broken one is a clear error."""
    dirs = dirs or deskbridge_dirs()
    path = dirs.settings_file
    text = read_small_file(path)
    if text is None:
        return Settings()
    try:
        return Settings.model_validate(json.loads(text))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"the settings file {str(path)!r} is not valid: {exc}",
            hint="Fix or delete the file; `deskbridge config show` prints the defaults.",
        ) from exc


def save_settings(settings: Settings, dirs: Dirs | None = None) -> Path:
    """Write the settings atomically (owner-only, since they may name private folders)."""
    from deskbridge.core.files import atomic_write

    dirs = dirs or deskbridge_dirs()
    private_dir(dirs.config)
    text = json.dumps(settings.model_dump(by_alias=True), indent=2, ensure_ascii=False) + "\n"
    atomic_write(dirs.settings_file, text.encode("utf-8"), mode=0o600)
    return dirs.settings_file


def set_setting(settings: Settings, key: str, raw: str) -> Settings:
    """Set a dotted key (`port`, `require_approval`, `sage.sdk`, `approval_rules.edit`) from CLI text."""
    data: dict[str, Any] = settings.model_dump(by_alias=False)
    parts = key.split(".")
    target = data
    for part in parts[:-1]:
        if not isinstance(target.get(part), dict):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"unknown setting {key!r}",
                hint=f"Known settings: {', '.join(sorted(Settings.model_fields))}.",
            )
        target = target[part]
    leaf = parts[-1]
    if leaf not in target and not (len(parts) > 1 and parts[0] == "approval_rules"):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"unknown setting {key!r}",
            hint=f"Known settings: {', '.join(sorted(Settings.model_fields))}.",
        )
    try:
        value: Any = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    target[leaf] = value
    try:
        return Settings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"invalid value {raw!r} for {key!r}: {first['msg']}"
        ) from exc


def load_or_create_token(dirs: Dirs | None = None, *, rotate: bool = False) -> str:
    """The MCP bearer token: created on first use (or on rotate), always owner-only (0600).

    A token file someone made readable to others (chmod 644) is put back to 0600 when it is read, and a rotation
    writes the new token 0600 whatever the old file's mode was.
    """
    from deskbridge.core.files import atomic_write

    dirs = dirs or deskbridge_dirs()
    path = dirs.token_file
    if not rotate:
        text = read_small_file(path)
        token = (text or "").strip()
        if len(token) >= 32 and token.isascii():
            private_dir(dirs.config)
            if os.name == "posix" and stat.S_IMODE(path.stat().st_mode) != 0o600:
                os.chmod(path, 0o600)
            return token
    private_dir(dirs.config)
    token = secrets.token_hex(TOKEN_BYTES)
    atomic_write(path, (token + "\n").encode("ascii"), mode=0o600)
    return token
