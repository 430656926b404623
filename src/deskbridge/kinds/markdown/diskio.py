"""Reading and writing Markdown files through the core's file primitives, with content-based change checks.

`core.files` gives atomic replace, no-overwrite publish and file identity (inode, size, mtime, SHA-256). A
document counts as changed on disk only when its *content* differs (a `touch` or a backup tool re-writing
the same bytes is not a conflict); the final write still passes the exact identity seen just before, so a
change that lands between our check and the rename is caught by the core (`SOURCE_CHANGED`).
"""

from __future__ import annotations

from pathlib import Path

from deskbridge.core import files
from deskbridge.core.errors import ErrorCode
from deskbridge.core.files import FileIdentity

__all__ = ["FileIdentity", "atomic_write", "identity_of", "publish_new", "quick_unchanged", "same_content"]


def identity_of(path: Path) -> FileIdentity | None:
    """The identity of `path` now (None when nothing is there)."""
    return files.current_identity(path)


def same_content(a: FileIdentity | None, b: FileIdentity | None) -> bool:
    """True when both identities describe the same bytes."""
    if a is None or b is None:
        return a is b
    return a.size == b.size and a.sha256 == b.sha256


def quick_unchanged(path: Path, known: FileIdentity | None) -> bool:
    """Cheap check (one stat, no hashing) that the file still has the identity we know."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return known is None
    return known is not None and (st.st_size, st.st_mtime_ns, st.st_ino) == (
        known.size,
        known.mtime_ns,
        known.inode,
    )


def atomic_write(
    path: Path, data: bytes, expected: FileIdentity | None, *, target_changed: bool = False
) -> FileIdentity:
    """Replace `path` atomically, only if it is still exactly `expected` (None: no check). Returns the new identity."""
    code = ErrorCode.TARGET_CHANGED if target_changed else ErrorCode.SOURCE_CHANGED
    return files.atomic_write(path, data, expected_identity=expected, changed_code=code).identity


def publish_new(path: Path, data: bytes) -> FileIdentity:
    """Create `path`; TARGET_EXISTS when something is already there (no check-then-rename race)."""
    return files.publish_new(path, data).identity
