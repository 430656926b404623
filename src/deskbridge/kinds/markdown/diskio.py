"""Watching Markdown files for outside changes, content-aware: a document counts as changed on disk only when
its *content* differs (a `touch` or a backup tool re-writing the same bytes is not a conflict).

Writing is the core lifecycle's (store.py): its per-key save applies the same content-aware rule
(`core.lifecycle.same_content_identity`, over the same
`core.lifecycle.outside_change` the watcher asks) and passes the exact identity to `core.files`, so a change
that lands between the check and the rename is still `SOURCE_CHANGED`.
"""

from __future__ import annotations

from pathlib import Path

from deskbridge.core import files
from deskbridge.core.files import FileIdentity
from deskbridge.core.lifecycle import outside_change

__all__ = ["FileIdentity", "identity_of", "outside_change"]


def identity_of(path: Path) -> FileIdentity | None:
    """The identity of `path` now (None when nothing is there)."""
    return files.current_identity(path)
