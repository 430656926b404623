"""The collaboration authority for one open document: the ordered update log every editor and MCP edit joins.

It follows the `@codemirror/collab` central-authority model (research/markdown.md §4.5): the server keeps the
ordered list of updates `{clientID, changes}`; a client may push only when its version equals the current
version (otherwise it pulls, rebases its local changes over what it missed, and pushes again); clients pull the
updates after a version. `changes` is CodeMirror's `ChangeSet.toJSON()` shape: a list whose numbers are
retained lengths and whose lists `[deletedLength, ...insertedLines]` replace a span — all lengths in UTF-16
code units. MCP edits enter the same log as updates from client `mcp:<caller>`, so the browser rebases over them
exactly as over another person's typing and can undo them one by one.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.offsets import OffsetMap

UPDATE_LOG_MAX: Final = 20_000
"""Updates kept per document; a client older than the kept window must reload the document (`resync`)."""

PUSH_MAX_UPDATES: Final = 1_000
"""Updates accepted in one push."""

PULL_TIMEOUT_MAX_S: Final = 25.0
"""Seconds a pull waits for news at most (the web contract's long-poll limit)."""

INSERT_MAX_CHARS: Final = 16 * 1024 * 1024
"""Characters one update may insert; bigger documents are not a collaborative edit but a replace."""


@dataclass(frozen=True)
class Edit:
    """One replacement in code points of the text it applies to: text[start:end] becomes `insert`."""

    start: int
    end: int
    insert: str


@dataclass(frozen=True)
class Update:
    """One accepted update: who made it, CodeMirror's change JSON (UTF-16) and the same edits in code points."""

    client_id: str
    changes: list[Any]
    edits: tuple[Edit, ...]

    def to_wire(self) -> dict[str, Any]:
        return {"clientID": self.client_id, "changes": self.changes}


def _bad(message: str, **data: Any) -> BridgeError:
    return BridgeError(ErrorCode.INVALID_ARGUMENT, f"change set rejected: {message}", data=data or None)


def _check_inserted(line: Any) -> str:
    if not isinstance(line, str):
        raise _bad("inserted lines must be strings")
    if "\n" in line or "\r" in line:
        raise _bad("an inserted line contains a line break; lines are separate array items")
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad("inserted text contains a lone surrogate (half of a UTF-16 pair)") from None
    return line


def changes_to_edits(changes: Any, text: str | None, offsets: OffsetMap | None = None) -> list[Edit]:
    """Validate a CodeMirror ChangeSet JSON against `text` and return its edits in code points, in order.

    Raises INVALID_ARGUMENT when the JSON is malformed, does not cover the document exactly, splits a
    surrogate pair, or inserts more than `INSERT_MAX_CHARS`.
    """
    if not isinstance(changes, list):
        raise _bad("changes must be a list")
    om = offsets if offsets is not None else OffsetMap(text)
    total = om.length_utf16
    pos16 = 0
    inserted = 0
    edits: list[Edit] = []
    for part in changes:
        if isinstance(part, bool):
            raise _bad("booleans are not lengths")
        if isinstance(part, int):
            if part < 0:
                raise _bad("a retained length is negative", value=part)
            pos16 += part
            if pos16 > total:
                raise _bad("the change set is longer than the document", docLength=total)
            continue
        if (
            not isinstance(part, list)
            or not part
            or isinstance(part[0], bool)
            or not isinstance(part[0], int)
        ):
            raise _bad("each part must be a length or [deletedLength, ...insertedLines]")
        deleted = part[0]
        if deleted < 0 or pos16 + deleted > total:
            raise _bad("a deletion runs past the end of the document", docLength=total)
        lines = [_check_inserted(line) for line in part[1:]]
        insert = "\n".join(lines)
        inserted += len(insert)
        if inserted > INSERT_MAX_CHARS:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"an update inserts more than {INSERT_MAX_CHARS} characters"
            )
        start = om.utf16_to_cp(pos16)
        end = om.utf16_to_cp(pos16 + deleted)
        if deleted or insert:
            edits.append(Edit(start, end, insert))
        pos16 += deleted
    if pos16 != total:
        raise _bad(
            f"the change set covers {pos16} UTF-16 units but the document has {total}", docLength=total
        )
    return edits


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """Apply edits given in ascending, non-overlapping code-point positions of `text`."""
    if not edits:
        return text
    pieces: list[str] = []
    last = 0
    for e in edits:
        pieces.append(text[last : e.start])
        pieces.append(e.insert)
        last = e.end
    pieces.append(text[last:])
    return "".join(pieces)


def edits_to_changes(edits: Sequence[Edit], text: str | None, offsets: OffsetMap | None = None) -> list[Any]:
    """Express code-point edits on `text` as a CodeMirror ChangeSet JSON (UTF-16 lengths)."""
    om = offsets if offsets is not None else OffsetMap(text)
    length = om.length_cp
    out: list[Any] = []
    pos16 = 0
    last_cp = 0
    for e in edits:
        if e.start < last_cp or e.end < e.start or e.end > length:
            raise _bad("edits must be ascending, non-overlapping and inside the document")
        start16 = om.cp_to_utf16(e.start)
        end16 = om.cp_to_utf16(e.end)
        if start16 > pos16:
            out.append(start16 - pos16)
        out.append([end16 - start16, *e.insert.split("\n")] if e.insert else [end16 - start16])
        pos16 = end16
        last_cp = e.end
    total = om.length_utf16
    if total > pos16:
        out.append(total - pos16)
    return out


def map_position(pos: int, edits: Sequence[Edit], *, assoc: int = -1) -> int | None:
    """Where code-point position `pos` moves after `edits`; None when a deletion swallowed it.

    `assoc` < 0 keeps a position at an insertion point before the inserted text, > 0 after it.
    """
    delta = 0
    for e in edits:
        if e.end < pos:
            delta += len(e.insert) - (e.end - e.start)
            continue
        if e.start > pos:
            break
        if e.start < pos < e.end:
            return None
        if e.start == e.end:  # a pure insertion exactly at pos
            if assoc < 0:
                break
            delta += len(e.insert)
            continue
        if pos == e.start:  # a replaced span starts here: pos stays before it
            break
        delta += len(e.insert) - (e.end - e.start)  # pos == e.end: after the replacement
    return pos + delta


def range_touched(start: int, end: int, edits: Sequence[Edit]) -> bool:
    """True when an edit deletes any character of [start, end), inserts strictly inside it, or (for an
    empty range) deletes around the point."""
    for e in edits:
        if e.start == e.end:
            if start < e.start < end:
                return True
        elif (e.start < end and e.end > start) or (start == end and e.start < start < e.end):
            return True
    return False


def map_range(start: int, end: int, edits: Sequence[Edit]) -> tuple[int, int] | None:
    """Where the untouched range [start, end) is after `edits`; None when an edit touched it."""
    if range_touched(start, end, edits):
        return None
    new_start = map_position(start, edits, assoc=1)
    new_end = map_position(end, edits, assoc=-1 if end > start else 1)
    if new_start is None or new_end is None:
        return None
    return new_start, new_end


class CollabDocument:
    """The authoritative text of one document and its update log (thread-safe; pulls wait asynchronously).

    Accepting an update does not copy the text: edits are queued and the text is rebuilt when someone
    reads it (a 10 MB document with astral characters is a 40 MB Python string, and a copy per keystroke
    would dominate the edit → event latency). Lengths and UTF-16 conversion never need the text.
    """

    def __init__(self, text: str, *, log_max: int = UPDATE_LOG_MAX) -> None:
        self._text = text
        self._pending: list[Sequence[Edit]] = []
        self._offsets = OffsetMap(text)
        self._updates: list[Update] = []
        self._base = 0  # version of the first kept update
        self._log_max = log_max
        self._lock = threading.RLock()
        self.on_update: Callable[[str, int], None] | None = None
        """Called under the lock with `(clientID, new version)` after each accepted update (the markdown
        store notes it in the engine, so every version has its revision before anyone can read it)."""
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    # --- reads -----------------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        with self._lock:
            return self._materialize()

    def _materialize(self) -> str:
        with self._lock:
            if self._pending:
                text = self._text
                for edits in self._pending:
                    text = apply_edits(text, edits)
                self._text, self._pending = text, []
            return self._text

    def _text_of_version(self, version: int) -> str:
        with self._lock:
            if version != self._base + len(self._updates):
                raise RuntimeError("an offset map of an older version asked for its text")
            return self._materialize()

    @property
    def length(self) -> int:
        """Code points of the current text (no rebuild needed)."""
        return self._offsets.length_cp

    @property
    def version(self) -> int:
        with self._lock:
            return self._base + len(self._updates)

    @property
    def offsets(self) -> OffsetMap:
        """Offset map of the current text."""
        with self._lock:
            return self._offsets

    def snapshot(self) -> tuple[str, int]:
        """The current text and version, taken together."""
        with self._lock:
            return self._materialize(), self._base + len(self._updates)

    def snapshot_with_offsets(self) -> tuple[str, int, OffsetMap]:
        """The current text, version and offset map, taken together."""
        with self._lock:
            return self._materialize(), self._base + len(self._updates), self._offsets

    def updates_since(self, version: int) -> list[Update]:
        """Updates after `version` (empty when current); STALE_WORKSPACE with `resync` when too old or ahead."""
        with self._lock:
            current = self._base + len(self._updates)
            if version < self._base or version > current:
                raise BridgeError(
                    ErrorCode.STALE_WORKSPACE,
                    f"version {version} is not in this document's update log "
                    f"(kept: {self._base}..{current}); load the document again",
                    data={"version": current, "resync": True},
                )
            return self._updates[version - self._base :]

    def edits_since(self, version: int) -> list[list[Edit]]:
        """The code-point edits of every update after `version`, one list per update, in order."""
        return [list(u.edits) for u in self.updates_since(version)]

    # --- writes ----------------------------------------------------------------------------------------

    def push(self, version: int, updates: Sequence[dict[str, Any]]) -> bool:
        """Accept a client's updates made on top of `version`; False (nothing applied) when it is behind.

        Each update is `{clientID, changes}`. All updates are validated before any is applied, so a bad
        update in the middle leaves the document untouched.
        """
        if len(updates) > PUSH_MAX_UPDATES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"a push may carry at most {PUSH_MAX_UPDATES} updates"
            )
        with self._lock:
            if version != self._base + len(self._updates):
                return False
            offsets = self._offsets
            offsets.ensure_tables()  # computed once; later maps derive them
            staged: list[Update] = []
            for raw in updates:
                if not isinstance(raw, dict):
                    raise _bad("an update must be an object {clientID, changes}")
                client_id = raw.get("clientID")
                if not isinstance(client_id, str) or not client_id or len(client_id) > 200:
                    raise _bad("clientID must be a non-empty string")
                if client_id.startswith("mcp:"):
                    raise BridgeError(
                        ErrorCode.ACCESS_DENIED, "browser updates cannot use an 'mcp:' clientID"
                    )
                edits = changes_to_edits(raw.get("changes"), None, offsets)
                staged.append(Update(client_id, raw["changes"], tuple(edits)))
                offsets = offsets.after_edits(edits, self._no_text)
            for u in staged:
                self._commit(u)
        if staged:
            self._wake()
        return True

    @staticmethod
    def _no_text() -> str:
        raise RuntimeError("an intermediate offset map of a push asked for its text")

    def apply(self, client_id: str, edits: Sequence[Edit]) -> Update:
        """Apply code-point edits on the current text as one update by `client_id` (e.g. `mcp:claude`)."""
        with self._lock:
            offsets = self._offsets
            offsets.ensure_tables()
            changes = edits_to_changes(edits, None, offsets)
            update = Update(client_id, changes, tuple(edits))
            self._commit(update)
        self._wake()
        return update

    @property
    def lock(self) -> threading.RLock:
        """The document's lock (re-entrant): hold it to read a version and what belongs to it together."""
        return self._lock

    def _commit(self, update: Update) -> None:
        """Queue the update's edits, derive the offset map, append it to the log (lock held)."""
        self._pending.append(update.edits)
        self._append(update)
        version = self._base + len(self._updates)
        self._offsets = self._offsets.after_edits(update.edits, lambda v=version: self._text_of_version(v))
        if self.on_update is not None:
            self.on_update(update.client_id, version)

    def _append(self, update: Update) -> None:
        self._updates.append(update)
        if len(self._updates) > self._log_max:
            drop = len(self._updates) - self._log_max
            del self._updates[:drop]
            self._base += drop

    # --- long-poll -------------------------------------------------------------------------------------

    async def pull(self, version: int, timeout: float = PULL_TIMEOUT_MAX_S) -> list[Update]:
        """Updates after `version`, waiting up to `timeout` seconds for the first one when there are none."""
        timeout = max(0.0, min(timeout, PULL_TIMEOUT_MAX_S))
        loop = asyncio.get_running_loop()
        with self._lock:
            found = self.updates_since(version)
            if found or timeout == 0:
                return found
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            pass
        finally:
            with self._lock:
                self._waiters = [(lp, f) for lp, f in self._waiters if f is not fut]
        return self.updates_since(version)

    def _wake(self) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
