"""Crash recovery of unsaved PVF changes: the overlay is autosaved to a recovery file, offered on the next open.

The file (`<data>/pvf-recovery/<sha256 of the archive's real path>.json`, written with `core.files.atomic_write`)
holds the archive's content hash at open, the revision and every changed file (base64; `null` for a deletion).
It is written a moment after each commit (`AUTOSAVE_DELAY_S`, so a burst of edits is one write), removed after
a save that leaves nothing unsaved and after a close that discarded the changes. On the next open of the same
unchanged archive `pvf_workspace_info` shows `recovery`, and `pvf_recovery_prepare` turns it into an edit plan
(preview, then apply — never a silent write); `pvf_recovery_discard` forgets it. A recovery file for another
version of the archive (its hash differs) is not offered: its changes were made against different content.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import DELETED, Workspace
from deskbridge.kinds.pvf.store import STRINGTABLE

AUTOSAVE_DELAY_S = 1.0
RECOVERY_MAX_BYTES = 512 * 1024 * 1024


def recovery_path(data_dir: Path, archive: Path) -> Path:
    real = os.path.realpath(archive)
    return data_dir / "pvf-recovery" / (hashlib.sha256(real.encode("utf-8")).hexdigest()[:32] + ".json")


SNAPSHOT_BATCH = 128
"""Files turned into recovery entries per hold of the engine lock (see `Autosaver.flush`)."""


def snapshot(ws: Workspace, base_sha256: str) -> bytes:
    """The recovery file's bytes for the current overlay (call under `Engine.lock`)."""
    return document(ws, [entry(ws, key, value) for key, value in ws.overlay.items()], base_sha256)


def entry(ws: Workspace, key: str, value: Any) -> dict[str, Any] | None:
    """One changed file's recovery entry (None: not kept), under `Engine.lock`."""
    name = ws.names.get(key) or key
    src = ws.source
    archive = getattr(src, "archive", None)
    if archive is not None and key not in ws.names:
        with contextlib.suppress(BridgeError):
            name = archive.file_info(key).path
    if value is DELETED:
        return {"path": name, "data": None}
    if name.lower() == STRINGTABLE:
        return None  # derived: the recovered scripts compile their new strings into the table again
    # Text where the file has one: payloads refer to string-table / pool entries that exist only in the
    # session that made them, so the text is what survives a restart (compiled again on recovery).
    text = None
    if archive is not None:
        with contextlib.suppress(BridgeError):
            text = archive.read_text(name)
    if text is not None:
        return {"path": name, "text": text}
    return {"path": name, "data": base64.b64encode(value).decode()}


def document(ws: Workspace, entries: list[dict[str, Any] | None], base_sha256: str) -> bytes:
    doc = {
        "version": 1,
        "archive": str(ws.source_path),
        "baseSha256": base_sha256,
        "revision": ws.revision,
        "time": time.time(),
        "files": [e for e in entries if e is not None],
    }
    return json.dumps(doc).encode("utf-8")


def load(data_dir: Path, archive: Path, base_sha256: str) -> dict[str, Any] | None:
    """The recovery offered for this archive (None when there is none, or it was made on other content)."""
    path = recovery_path(data_dir, archive)
    if not path.exists():
        return None
    try:
        doc = json.loads(files.read_regular_file(path, max_bytes=RECOVERY_MAX_BYTES, shown_as=path.name))
    except (BridgeError, ValueError):
        return None
    if doc.get("baseSha256") != base_sha256 or not doc.get("files"):
        return None
    return doc


def summary(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    if doc is None:
        return None
    return {"available": True, "files": len(doc["files"]), "time": doc["time"], "revision": doc["revision"]}


def remove(data_dir: Path, archive: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        recovery_path(data_dir, archive).unlink()


class Autosaver:
    """Follows the engine's `workspace` events and keeps the recovery file in step with the overlay."""

    def __init__(self, svc: Any) -> None:
        self.svc = svc
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await asyncio.to_thread(self.flush)

    async def _run(self) -> None:
        pending: asyncio.Task[None] | None = None

        async def later() -> None:
            await asyncio.sleep(AUTOSAVE_DELAY_S)  # a burst of commits becomes one write
            await asyncio.to_thread(self.flush)

        with contextlib.closing(self.svc.bus.subscribe("workspace")) as sub:
            async for event in sub:
                kind = event.data.get("event")
                if kind == "committed" and (pending is None or pending.done()):
                    pending = asyncio.ensure_future(later())
                elif kind == "saved":
                    await asyncio.to_thread(self.flush)

    def flush(self) -> None:
        """Write (or remove) the recovery file for the open workspace's current overlay.

        The entries are decompiled `SNAPSHOT_BATCH` files per hold of the engine lock, not all in one: after
        applying a big plan (12,081 files of classic-200k, 13,147 of nkpi-1m) the one hold took 8.6 s / ≈ 21 s,
        and every other call that needs the lock — pvf_workspace_info, a save's admission on the event loop,
        the UI — waited that long. A commit in between starts the snapshot again (its entries may predate it);
        after a few such restarts it is taken in one hold, as before.
        """
        svc = self.svc
        lock = svc.engine.lock
        for attempt in range(4):
            with lock:
                ws = svc.engine.workspace
                if ws is None or ws.source_path is None or ws.source_identity is None:
                    return
                path = ws.source_path
                if not ws.overlay or not ws.dirty:
                    data = None
                    break
                if attempt == 3:
                    data = snapshot(ws, ws.source_identity.sha256)
                    break
                revision = ws.revision
                items = list(ws.overlay.items())
            entries: list[dict[str, Any] | None] = []
            for at in range(0, len(items), SNAPSHOT_BATCH):
                if at:
                    time.sleep(0.002)  # a caller waiting for the lock gets it now (the lock is not fair)
                with lock:
                    if svc.engine.workspace is not ws or ws.revision != revision:
                        break
                    entries += [entry(ws, key, value) for key, value in items[at : at + SNAPSHOT_BATCH]]
            with lock:
                if len(entries) == len(items) and svc.engine.workspace is ws and ws.revision == revision:
                    assert ws.source_identity is not None
                    data = document(ws, entries, ws.source_identity.sha256)
                    break
        target = recovery_path(svc.data_dir, path)
        if data is None:
            remove(svc.data_dir, path)
            return
        target.parent.mkdir(parents=True, exist_ok=True)
        files.atomic_write(target, data, new_file_mode=0o600)


def plan_edits(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The recovery file's changes as raw edits for `PvfService.edit_prepare`."""
    edits = []
    for f in doc["files"]:
        if f.get("text") is not None:
            edits.append({"path": f["path"], "text": f["text"]})
        elif f.get("data") is None:
            edits.append({"path": f["path"], "delete": True})
        else:
            edits.append({"path": f["path"], "base64": f["data"]})
    if not edits:
        raise BridgeError(ErrorCode.NOT_FOUND, "the recovery file holds no changes")
    return edits
