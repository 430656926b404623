"""Saving a small file the person edits in more than one place (a UI tab, an MCP client) only if it is still
the version the saver read, compared by SHA-256: the saved-script library and the user annotation rules.

The reader is handed the file's `sha256` with its text; the save carries it back as `expected_sha256`. A file
another tab or client saved meanwhile is refused as `TARGET_CHANGED` with its `currentSha256`, never
overwritten silently.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import atomic_write, read_regular_file

ABSENT_SHA256 = ""
"""The `expected_sha256` of a file that does not exist yet (a save that must create it)."""


@dataclass(frozen=True)
class GuardedSave:
    sha256: str
    """The SHA-256 (hex) of what was written: the `expected_sha256` of the next save."""
    created: bool
    """No file was there before."""


def save_if_unchanged(
    path: Path,
    raw: bytes,
    expected_sha256: str | None,
    *,
    max_bytes: int,
    shown_as: str,
    changed: str,
    hint: str,
    backup: bool = False,
) -> GuardedSave:
    """Write `raw` to `path` (`atomic_write`, creating its folder) if the file's SHA-256 is still
    `expected_sha256` (`ABSENT_SHA256`: it must not exist; None: no check). Else `TARGET_CHANGED` with the
    message `changed`, the `hint` and `data.currentSha256`, and nothing is written. `backup` keeps the
    previous content as `<name>.bak`; the current file is read with `read_regular_file` (at most
    `max_bytes`, named `shown_as` in errors)."""
    old = read_regular_file(path, max_bytes=max_bytes, shown_as=shown_as) if path.exists() else None
    old_sha = ABSENT_SHA256 if old is None else hashlib.sha256(old).hexdigest()
    if expected_sha256 is not None and expected_sha256 != old_sha:
        raise BridgeError(ErrorCode.TARGET_CHANGED, changed, hint, data={"currentSha256": old_sha})
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, raw, backup=backup)
    return GuardedSave(hashlib.sha256(raw).hexdigest(), created=old is None)
