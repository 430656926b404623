"""Where deskbridge keeps its cache, data and config, and the `sage` part of the user config.

The same directories and file as `deskbridge.settings` (the shared settings module), read without pydantic:
the one-shot CLI and a warm start must not pay ~100 ms of imports for two keys.
"""

from __future__ import annotations

import os
from collections import namedtuple
from pathlib import Path

HOME_ENV = "DESKBRIDGE_HOME"
"""Environment variable that moves every deskbridge directory under one base (tests use a tmp_path)."""

SDK_ENV = "DESKBRIDGE_SAGE_SDK"
"""Environment variable naming the RA3 / C&C3 mod SDK folder."""


class DeskbridgeDirs(namedtuple("DeskbridgeDirs", "cache data config")):
    """The three per-user directories deskbridge writes to: `cache` (disposable data: per-file records,
    compiled schema model), `data` (data worth keeping: public snapshots) and `config` (the user's
    `config.json`). Immutable, as the frozen dataclass it replaced, without importing `dataclasses` on the
    warm path (see `_record`)."""

    __slots__ = ()
    cache: Path
    data: Path
    config: Path


def deskbridge_dirs() -> DeskbridgeDirs:
    """The platformdirs locations, or `$DESKBRIDGE_HOME/{cache,data,config}` when that variable is set."""
    home = os.environ.get(HOME_ENV)
    if home:
        base = Path(home).expanduser()
        return DeskbridgeDirs(cache=base / "cache", data=base / "data", config=base / "config")
    import platformdirs  # only here: with its tempfile/shutil imports it is ~10 % of a warm start

    return DeskbridgeDirs(
        cache=Path(platformdirs.user_cache_dir("deskbridge", appauthor=False)),
        data=Path(platformdirs.user_data_dir("deskbridge", appauthor=False)),
        config=Path(platformdirs.user_config_dir("deskbridge", appauthor=False)),
    )


class SageConfig(namedtuple("SageConfig", "sdk search_paths", defaults=(None, ()))):
    """The `"sage"` object of `config.json`: `{"sdk": "...", "searchPaths": ["..."]}` — `sdk`, the mod SDK
    folder (holds `Schemas/` and `SageXml/`), and `search_paths`, extra DATA: search folders tried after
    the SDK's own."""

    __slots__ = ()
    sdk: Path | None
    search_paths: tuple[Path, ...]


def read_sage_config() -> SageConfig:
    """Read the `sage` key of the user config; a missing or unreadable file means no configuration."""
    path = deskbridge_dirs().config / "config.json"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, ValueError):
        return SageConfig()
    import json  # only when there is a config file: most warm starts have none

    try:
        raw = json.loads(text)
    except ValueError:
        return SageConfig()
    sage = raw.get("sage") if isinstance(raw, dict) else None
    if not isinstance(sage, dict):
        return SageConfig()
    sdk = sage.get("sdk")
    paths = sage.get("searchPaths") or []
    return SageConfig(
        sdk=Path(sdk).expanduser() if isinstance(sdk, str) and sdk else None,
        search_paths=tuple(Path(p).expanduser() for p in paths if isinstance(p, str) and p),
    )
