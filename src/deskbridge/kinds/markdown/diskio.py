"""Watching Markdown files for outside changes, content-aware: a document counts as changed on disk only when
its *content* differs (a `touch` or a backup tool re-writing the same bytes is not a conflict).

Writing is the core lifecycle's (store.py): its per-key save applies the same content-aware rule
(`core.lifecycle.same_content_identity`) and passes the exact identity to `core.files`, so a change that lands
between the check and the rename is still `SOURCE_CHANGED`.
"""

from __future__ import annotations

from pathlib import Path

from deskbridge.core import files
from deskbridge.core.files import FileIdentity

__all__ = ["FileIdentity", "identity_of", "quick_unchanged", "same_content"]


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
