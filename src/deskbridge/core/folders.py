"""Owner-only folders for what deskbridge keeps of a person's data (secrets, history, indexes, caches).

A module of its own, importing only the standard library (`core.errors` only to report a refusal), so the SAGE
index's fast start can use it without loading the settings' pydantic models.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir(path: Path) -> Path:
    """Create `path` (and missing parents) if needed and make sure it is ours alone: owner-only (0700), owned
    by this user. Refuses a directory owned by someone else (e.g. planted in advance) instead of using it."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    if os.name != "posix":
        return path
    st = path.stat()
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        from deskbridge.core.errors import BridgeError, ErrorCode
    if not stat.S_ISDIR(st.st_mode):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{str(path)!r} is not a folder")
    if st.st_uid != os.getuid():
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"the folder {str(path)!r} belongs to another user",
            hint="deskbridge keeps its secrets only in folders you own; remove it or set DESKBRIDGE_HOME.",
        )
    if stat.S_IMODE(st.st_mode) & 0o077:
        os.chmod(path, 0o700)
    return path
