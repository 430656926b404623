"""Persisted settings and the per-user directories (config, data, cache), with a test override.

Settings live in `<config dir>/config.json`; the MCP bearer token lives beside it in `token` (owner-only).
`DESKBRIDGE_HOME` moves every directory under one folder (tests, portable installs).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import platformdirs
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from deskbridge.core.errors import BridgeError, ErrorCode

APP_NAME: Final = "deskbridge"
DEFAULT_PORT: Final = 17891
TOKEN_BYTES: Final = 32
"""Random bytes in the MCP bearer token (shown as 64 hex characters)."""


@dataclass(frozen=True)
class Dirs:
    """Where deskbridge keeps its files; every directory is created on first use."""

    config: Path
    data: Path
    cache: Path

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
        return Dirs(config=base / "config", data=base / "data", cache=base / "cache")
    return Dirs(
        config=Path(platformdirs.user_config_dir(APP_NAME, appauthor=False)),
        data=Path(platformdirs.user_data_dir(APP_NAME, appauthor=False)),
        cache=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
    )


class SageSettings(BaseModel):
    """Settings of the sage kind."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    sdk: str | None = None
    """Path of the SAGE SDK (folder with `SageXml/` and `Schemas/`)."""
    search_paths: list[str] = Field(default_factory=list, alias="searchPaths")
    """Extra DATA search roots, searched after the mod's own `Data/`."""


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
    audit_log: bool = False
    """Also append audit records to a JSON-lines file in the data directory."""
    sage: SageSettings = Field(default_factory=SageSettings)


def load_settings(dirs: Dirs | None = None) -> Settings:
    """Read the settings file; a missing file means defaults, a broken one is a clear error."""
    dirs = dirs or deskbridge_dirs()
    path = dirs.settings_file
    if not path.exists():
        return Settings()
    try:
        return Settings.model_validate(json.loads(path.read_text("utf-8")))
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
    dirs.config.mkdir(parents=True, exist_ok=True)
    text = json.dumps(settings.model_dump(by_alias=True), indent=2, ensure_ascii=False) + "\n"
    atomic_write(dirs.settings_file, text.encode("utf-8"), new_file_mode=0o600)
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
    """The MCP bearer token: created on first use (or on rotate) with owner-only permissions."""
    dirs = dirs or deskbridge_dirs()
    path = dirs.token_file
    if not rotate and path.exists():
        token = path.read_text("ascii").strip()
        if len(token) >= 32:
            return token
    from deskbridge.core.files import atomic_write

    dirs.config.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(TOKEN_BYTES)
    atomic_write(path, (token + "\n").encode("ascii"), new_file_mode=0o600)
    return token
