"""Atomic file replacement for the sage cache and snapshots, through the core `files` module."""

from __future__ import annotations

from pathlib import Path


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write `data` to `path` so readers see either the old file or the new one, never a torn write.

    `durable=False` for the caches (records, compiled schema): they are rebuilt when lost, and their readers
    ignore a file that is empty or torn, so they are not fsynced (see `core.files.atomic_write`)."""
    # Imported on first write: a warm start that writes nothing should not pay for ctypes and friends.
    from deskbridge.core.files import atomic_write as core_atomic_write

    path.parent.mkdir(parents=True, exist_ok=True)
    core_atomic_write(path, data, durable=durable)
