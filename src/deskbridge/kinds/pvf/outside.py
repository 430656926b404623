"""Noticing another program replacing or writing the open archive, on every request that touches the workspace.

Another tool saving a `Script.pvf` writes a new file and renames it over the old one (`os.replace`); the
workspace keeps reading the file it opened (its mapping holds the old inode), so without a check an agent
worked on stale content until its save was refused as `SOURCE_CHANGED`. `App.invoke` asks `notice(tool)`
before every tool call (the browser's calls come through it too): one stat against the identity the engine
recorded at open or save, hashing only when the stat changed and the size did not (`core.lifecycle.
outside_change`, the rule of the saves and of markdown's watcher). Then:

* nothing unsaved — the archive is opened again (the engine's own open: barrier, plans and tasks refused as
  for `pvf_archive_open`), and the answer says so and names the new workspaceId; the caller's handle is the
  old file's, so its call is refused as `STALE_WORKSPACE` rather than answered from the old content;
* unsaved changes (or a reload the engine refused) — nothing is thrown away: every answer carries
  `externalChange` naming the conflict and the ways out (save a copy, or reopen discarding), and
  `pvf_workspace_info` reports it, until the file is the one we know again or another archive is open.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError
from deskbridge.core.lifecycle import outside_change
from deskbridge.core.workspace import Workspace

LIFECYCLE_TOOLS = frozenset({"pvf_archive_open", "pvf_archive_close"})
"""Tools that replace or close the archive themselves: reloading first would make their workspaceId stale."""

Reopen = Callable[[Path, dict[str, Any], str], Awaitable[dict[str, Any]]]
"""`reopen(path, options, workspace_id)`: open `path` again in place of the workspace `workspace_id`."""


def _stat_key(path: Path) -> tuple[int, ...] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


class OutsideChanges:
    """The open archive's outside-change state (see the module docstring)."""

    def __init__(self, engine: Engine, reopen: Reopen) -> None:
        self.engine = engine
        self.reopen = reopen
        self._lock = asyncio.Lock()
        self._conflict: _Conflict | None = None
        """The unresolved change of the open workspace's file, if any."""
        self._reloaded: dict[str, dict[str, Any]] = {}
        """Old workspaceId → the notice of the reload that replaced it (for calls that waited for it)."""

    def current(self) -> dict[str, Any] | None:
        """The unresolved conflict of the open workspace, if any (what `pvf_workspace_info` reports)."""
        conflict = self._conflict
        if conflict is None or conflict.ws is not self.engine.workspace:
            return None
        return conflict.notice()

    async def notice(self, tool: str) -> dict[str, Any] | None:
        """Check the archive on disk for the call of `tool`; the notice its answer carries, or None."""
        eng = self.engine
        ws = eng.workspace
        if ws is None or ws.source_path is None or ws.source_identity is None:
            return None
        if eng.lifecycle_op is not None:  # our own save or open is writing or reading the file
            return self.current()
        path, known = ws.source_path, ws.source_identity
        seen_stat = _stat_key(path)
        if seen_stat == (known.device, known.inode, known.size, known.mtime_ns):
            self._conflict = None
            return None
        conflict = self._conflict
        known_changed = conflict is not None and conflict.ws is ws and conflict.stat == seen_stat
        if known_changed and ws.dirty:
            return conflict.notice()  # type: ignore[union-attr]  # the same outside file: no hashing again
        async with self._lock:
            if ws is not eng.workspace:  # reloaded while this call waited
                return self._reloaded.get(ws.id)
            if known_changed:
                gone = seen_stat is None
            else:
                seen = await asyncio.to_thread(outside_change, path, known)
                if eng.lifecycle_op is not None or ws is not eng.workspace or ws.source_identity is not known:
                    return self.current()  # a save or an open moved on meanwhile: its identity is the one
                if not seen.changed:
                    if seen.identity is not known:  # touched, same bytes: the file we know, with a new mtime
                        # under the engine lock, off the event loop (a long holder must not freeze it)
                        await asyncio.to_thread(self._record_identity, ws, known, seen.identity)
                    self._conflict = None
                    return None
                gone = seen.gone
            refused: BridgeError | None = None
            if not ws.dirty and tool not in LIFECYCLE_TOOLS:
                try:
                    reopened = await self.reopen(path, dict(getattr(ws.source, "options", {})), ws.id)
                except BridgeError as exc:
                    refused = exc
                else:
                    self._conflict = None
                    notice = _reloaded(path, gone, ws.id, reopened)
                    self._reloaded = {ws.id: notice}
                    return notice
            fresh = conflict is None or conflict.ws is not ws
            self._conflict = _Conflict(
                ws,
                seen_stat,
                gone,
                refused,
                time.time() if fresh else conflict.detected_at,  # type: ignore[union-attr]
            )
            notice = self._conflict.notice()
            if fresh:
                eng.bus.publish("workspace", {"event": "external-change", "workspaceId": ws.id, **notice})
            return notice

    def _record_identity(self, ws: Workspace, known: Any, identity: Any) -> None:
        with self.engine.lock:
            if ws.source_identity is known:
                ws.source_identity = identity


class _Conflict:
    """A change on disk the workspace could not take in (unsaved changes, or a refused reload)."""

    def __init__(
        self,
        ws: Workspace,
        stat: tuple[int, ...] | None,
        gone: bool,
        refused: BridgeError | None,
        detected_at: float,
    ) -> None:
        self.ws, self.stat, self.gone, self.refused, self.detected_at = ws, stat, gone, refused, detected_at

    def notice(self) -> dict[str, Any]:
        """The notice as of now (the count of unsaved files changes as the caller goes on editing)."""
        assert self.ws.source_path is not None
        return _conflict(self.ws.source_path, self.gone, self.ws, self.refused, self.detected_at)


def _what(path: Path, gone: bool) -> str:
    happened = "was renamed or deleted" if gone else "changed on disk"
    return f"'{path}' {happened} (another program replaced or wrote it) after it was opened"


def _reloaded(path: Path, gone: bool, old_id: str, opened: dict[str, Any]) -> dict[str, Any]:
    new_id = opened["workspaceId"]
    return {
        "path": str(path),
        "reloaded": True,
        "workspaceId": new_id,
        "previousWorkspaceId": old_id,
        "revision": opened.get("revision"),
        "detectedAt": time.time(),
        "message": f"{_what(path, gone)}; nothing here was unsaved, so it was reloaded from disk",
        "hint": f"Read it again with workspaceId {new_id!r} (revision {opened.get('revision')}): answers for "
        f"workspaceId {old_id!r} were of the file as it was.",
    }


def _conflict(
    path: Path, gone: bool, ws: Workspace, refused: BridgeError | None, detected_at: float
) -> dict[str, Any]:
    changed = len(ws.overlay)
    if ws.dirty:
        state = (
            f"the {changed} unsaved change(s) here are based on the old file, and saving them over it is "
            "refused (SOURCE_CHANGED)"
        )
    else:
        state = (
            f"it could not be reloaded: {refused.message}" if refused is not None else "it was not reloaded"
        )
    reopen = (
        f"pvf_archive_open with path {str(path)!r}, workspaceId {ws.id!r} and dirtyPolicy 'discard'"
        if ws.dirty
        else f"pvf_archive_open with path {str(path)!r} and workspaceId {ws.id!r}"
    )
    keep = "Keep this workspace's content: write it to a new file with pvf_archive_save_as. "
    if gone:
        take = "Or open the archive wherever it is now with pvf_archive_open."
    elif ws.dirty:
        take = f"Or take the file on disk, throwing the unsaved changes away: {reopen}."
    else:
        take = f"Or take the file on disk: {reopen} (first settle what refused the reload)."
    return {
        "path": str(path),
        "reloaded": False,
        "unsavedFiles": changed,
        "deleted": gone,
        "detectedAt": detected_at,
        "message": f"{_what(path, gone)}; {state}",
        "hint": keep + take,
    }
