"""One open workspace: its opaque identity, its revision, and the overlay of committed changes over the source.

* `workspaceId` — opaque, new on every open (also when the same path is reopened), so a handle to an
  old workspace can never act on a new one.
* `workspaceEpoch` — lives in the `Engine`, not here: it advances on every open *and* close, so a caller
  that saw "nothing open at epoch 4" can open race-free (seed "工作区一致性").
* `revision` — advances by exactly one on every committed change (an edit, an applied plan); reads
  return it and writes carry the revision they expect.
* the overlay — generic `key → new value | DELETED` over a read-only source the kind supplies (a PVF
  archive's files, a document's single text, a mod folder's files). The source is never mutated; saving
  serialises source + overlay, and `saved_revision` records what is on disk, so `dirty` is exact.

Thread-safety: a `Workspace` has no lock of its own; every mutation happens under `Engine.lock`.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import FileIdentity


class _Deleted:
    """Marker for "this key was deleted by a committed change"."""

    _instance: _Deleted | None = None

    def __new__(cls) -> _Deleted:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "DELETED"

    def __reduce__(self) -> str:
        return "DELETED"


DELETED: Any = _Deleted()
"""Overlay value meaning the key no longer exists."""


class Source(Protocol):
    """What a kind supplies as the read-only base of a workspace."""

    def get(self, key: str) -> Any:
        """The value of `key`; raise `KeyError` when the source has no such key."""
        ...

    def all_keys(self) -> Iterable[str]:
        """Every key the source holds, in its natural order."""
        ...


# Optional Source methods, looked up with getattr:
#   identity_of(key) -> FileIdentity | None
#       for a source that is a folder of files saved one key at a time (`Store.key_path`): the identity of
#       the key's file as it was read (None: no file yet), the base of the per-key SOURCE_CHANGED check.
#   normalize_key(key) -> str
#       the lookup form of a key, for kinds whose keys are case-insensitive (PVF archive paths: `\\` → `/`,
#       no leading `/`, lower case). The overlay is keyed by it, so `Equipment/A.equ` and `equipment/a.equ`
#       are one key; the spelling a caller first used for a new key is kept for display (`Workspace.name`).


class MappingSource:
    """A `Source` over a plain mapping (tests, small documents)."""

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        self._data = dict(data or {})

    def get(self, key: str) -> Any:
        return self._data[key]

    def all_keys(self) -> Iterable[str]:
        return list(self._data)


def new_workspace_id() -> str:
    return "ws-" + secrets.token_hex(8)


@dataclass
class Workspace:
    """The state of one open workspace. Create it through `Engine.open`, not directly."""

    source: Source
    source_path: Path | None = None
    source_identity: FileIdentity | None = None
    """Identity of the source file when opened or last saved; a different one on disk is `SOURCE_CHANGED`."""
    id: str = field(default_factory=new_workspace_id)
    revision: int = 1
    saved_revision: int = 1
    """The revision that the source file holds (after open or the last successful save)."""
    overlay: dict[str, Any] = field(default_factory=dict)
    """Committed changes, keyed by `key_of(key)`."""
    last_changed: dict[str, int] = field(default_factory=dict)
    """Revision at which each overlay key was last committed (for "what changed since" queries)."""
    names: dict[str, str] = field(default_factory=dict)
    """Display spelling of overlay keys (as first committed), when the source normalises keys."""
    key_saved: dict[str, int] = field(default_factory=dict)
    """Revision at which each key was last written by a per-key save (`Lifecycle.save(keys=…)`): a folder of
    documents saves one document at a time, so "what is on disk" is known per key, not only as a whole."""
    key_identities: dict[str, FileIdentity | None] = field(default_factory=dict)
    """The one record of each key's own file: its identity when read (a kind that adds keys as it reads
    their files sets it then) or last written by a per-key save; before either, the source's
    `identity_of(key)`. A different file on disk is `SOURCE_CHANGED` (`key_identity`)."""

    def __post_init__(self) -> None:
        norm = getattr(self.source, "normalize_key", None)
        self._norm = norm if callable(norm) else None

    def key_of(self, key: str) -> str:
        """The overlay/lookup form of `key` (the source's `normalize_key`, else the key itself)."""
        return key if self._norm is None else self._norm(key)

    def name(self, key: str) -> str:
        """How to show an overlay key: its first committed spelling."""
        return self.names.get(key, key)

    @property
    def dirty(self) -> bool:
        """True when committed changes are not in the source file yet."""
        return self.revision != self.saved_revision

    def key_dirty(self, key: str) -> bool:
        """True when `key` has a committed change that is not in its file yet (whole or per-key save)."""
        k = self.key_of(key)
        changed = self.last_changed.get(k)
        return changed is not None and changed > max(self.saved_revision, self.key_saved.get(k, 0))

    def dirty_keys(self) -> list[str]:
        """The keys with changes not on disk yet, in the order they were first committed."""
        return [self.name(k) for k in self.last_changed if self.key_dirty(k)]

    def key_identity(self, key: str) -> FileIdentity | None:
        """The identity of `key`'s file as we last read or wrote it (None: no file yet)."""
        k = self.key_of(key)
        if k in self.key_identities:
            return self.key_identities[k]
        known_of = getattr(self.source, "identity_of", None)
        return known_of(k) if callable(known_of) else None

    def note_changed(self, keys: Iterable[str]) -> int:
        """Record that `keys` changed in a source with its own authority (no overlay value): the revision
        advances by exactly one and the keys become dirty, like a commit. Returns the new revision."""
        self.revision += 1
        for raw in keys:
            key = self.key_of(raw)
            self.last_changed[key] = self.revision
        return self.revision

    def forget_key(self, key: str) -> None:
        """Drop a key's bookkeeping when its source no longer has it (a closed document)."""
        k = self.key_of(key)
        for book in (self.overlay, self.last_changed, self.names, self.key_saved, self.key_identities):
            book.pop(k, None)
        if self.revision != self.saved_revision and not self.dirty_keys():
            self.saved_revision = self.revision

    def mark_keys_saved(self, keys: Iterable[str], revision: int) -> None:
        """After a per-key save wrote `keys` as they were at `revision` (called under `Engine.lock`).

        When no key is left dirty the whole workspace is on disk, so `saved_revision` catches up and
        `dirty` (which the dirty policies of open/close read) is exact again.
        """
        for key in keys:
            self.key_saved[self.key_of(key)] = revision
        if revision == self.revision and not self.dirty_keys():
            self.saved_revision = revision

    # -- reads ----------------------------------------------------------------------------------------

    def read(self, key: str) -> Any:
        """The current committed value of `key`; `NOT_FOUND` when it does not exist."""
        key = self.key_of(key)
        if key in self.overlay:
            value = self.overlay[key]
            if value is DELETED:
                raise BridgeError(ErrorCode.NOT_FOUND, f"{key!r} was deleted in this workspace")
            return value
        try:
            return self.source.get(key)
        except KeyError:
            raise BridgeError(ErrorCode.NOT_FOUND, f"{key!r} does not exist in the workspace") from None

    def exists(self, key: str) -> bool:
        key = self.key_of(key)
        if key in self.overlay:
            return self.overlay[key] is not DELETED
        try:
            self.source.get(key)
        except KeyError:
            return False
        return True

    def all_keys(self) -> Iterator[str]:
        """Every current key: the source's, minus deleted ones, plus added ones (source order first)."""
        if not self.overlay:
            yield from self.source.all_keys()
            return
        seen = set()
        for k in self.source.all_keys():
            nk = self.key_of(k)
            seen.add(nk)
            if self.overlay.get(nk, None) is not DELETED:
                yield k
        for k, v in self.overlay.items():
            if k not in seen and v is not DELETED:
                yield self.name(k)

    def changed_keys(self) -> list[str]:
        return list(self.overlay)

    # -- writes (called by the Engine under its lock) ------------------------------------------------

    def commit(self, changes: Mapping[str, Any]) -> int:
        """Put `changes` into the overlay and advance the revision by exactly one; returns it."""
        self.revision += 1
        for raw, value in changes.items():
            key = self.key_of(raw)
            self.overlay[key] = value
            self.last_changed[key] = self.revision
            if key != raw:
                self.names.setdefault(key, raw)
        return self.revision

    def rebase(self, source: Source) -> None:
        """After a save wrote source + overlay to disk: the written file is the new source, the overlay empties.

        Called by the lifecycle (under `Engine.lock`) when the kind's store re-binds to the saved file; the
        revision and `last_changed` stay, so nothing a caller holds becomes stale.
        """
        self.source = source
        norm = getattr(source, "normalize_key", None)
        self._norm = norm if callable(norm) else None
        self.overlay = {}
        self.names = {}

    def identity(self) -> dict[str, Any]:
        return {"workspaceId": self.id, "revision": self.revision}


def stale_workspace(message: str, current: dict[str, Any]) -> BridgeError:
    """`STALE_WORKSPACE` carrying the current id/epoch/revision so the caller can re-read and retry."""
    return BridgeError(ErrorCode.STALE_WORKSPACE, message, data=current)
