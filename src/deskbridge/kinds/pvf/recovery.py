"""Crash recovery of unsaved PVF changes: the overlay is autosaved to a recovery file, offered on the next open.

The file (`<data>/pvf-recovery/<sha256 of the archive's real path>.json`, written with `core.files.atomic_write`)
holds the archive's content hash at open, the revision and every changed file exactly as the session holds it
(base64 of the payload; `null` for a deletion), the grown `stringtable.bin` of a classic archive among them, and
the strings an nkpi archive's name pools gained (`poolTail`): the payloads name strings by index or offset, and
the same base archive plus the same table or pool tail gives them the same meaning again. Copying bytes makes
the snapshot quick (5,000 changed files of classic-200k: ≈ 50 ms, where decompiling them to text took 3–5 s,
seconds in which a crash or a kill during a save lost everything since the last snapshot). It is written a
moment after each commit (`AUTOSAVE_DELAY_S`, so a burst of edits is one write), removed after a save that
leaves nothing unsaved and after a close that discarded the changes. On the next open of the same unchanged
archive `pvf_workspace_info` shows `recovery`, and `pvf_recovery_prepare` turns it into an edit plan (preview,
then apply — never a silent write) before anything else changed in that session; `pvf_recovery_discard` forgets
it. A recovery file for another version of the archive (its hash differs) is not offered: its changes were made
against different content. Files of version 1 (decompiled text, written by earlier releases) are still read.
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

AUTOSAVE_DELAY_S = 0.3
"""Seconds after a commit before the snapshot: a burst of commits becomes one write."""
RECOVERY_MAX_BYTES = 512 * 1024 * 1024


def recovery_path(data_dir: Path, archive: Path) -> Path:
    real = os.path.realpath(archive)
    return data_dir / "pvf-recovery" / (hashlib.sha256(real.encode("utf-8")).hexdigest()[:32] + ".json")


VERSION = 2


def taken(ws: Workspace) -> dict[str, Any]:
    """What a snapshot needs, taken under `Engine.lock` in one short hold: references to the overlay's payloads
    (immutable bytes) and names, the nkpi pool tail and the revision; `document` encodes it without the lock."""
    archive = getattr(ws.source, "archive", None)
    names = {}
    for key in ws.overlay:
        name = ws.names.get(key)
        if name is None and archive is not None:
            with contextlib.suppress(BridgeError):
                name = archive.file_info(key).path
        names[key] = name or key
    pools = getattr(archive, "pools", None) if archive is not None and archive.family == "nkpi" else None
    return {
        "archive": str(ws.source_path),
        "revision": ws.revision,
        "items": list(ws.overlay.items()),
        "names": names,
        "poolTail": pools.appended_raw() if pools is not None else None,
    }


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def document(state: dict[str, Any], base_sha256: str) -> bytes:
    files_ = [
        {"path": state["names"][key], "data": None if value is DELETED else _b64(value)}
        for key, value in state["items"]
    ]
    tail = state["poolTail"]
    doc = {
        "version": VERSION,
        "archive": state["archive"],
        "baseSha256": base_sha256,
        "revision": state["revision"],
        "time": time.time(),
        "files": files_,
        "poolTail": None if tail is None or not (tail[0] or tail[1]) else [_b64(tail[0]), _b64(tail[1])],
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
        """Write (or remove) the recovery file for the open workspace's current overlay. The engine lock is held
        only to take references (`taken`); encoding and writing happen without it, so no caller waits."""
        svc = self.svc
        with svc.engine.lock:
            ws = svc.engine.workspace
            if ws is None or ws.source_path is None or ws.source_identity is None:
                return
            path = ws.source_path
            state = taken(ws) if ws.overlay and ws.dirty else None
            base = ws.source_identity.sha256
        if state is None:
            remove(svc.data_dir, path)
            return
        target = recovery_path(svc.data_dir, path)
        target.parent.mkdir(parents=True, exist_ok=True)
        files.atomic_write(target, document(state, base), new_file_mode=0o600)


def plan_edits(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The recovery file's changes as raw edits for `PvfService.edit_prepare` (version 1: text where kept)."""
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


def restore_context(doc: dict[str, Any], ws: Workspace) -> None:
    """Before a version-2 recovery becomes a plan (under `Engine.lock`): its payloads name strings by the index
    or offset they had in the crashed session. The classic string table comes back among its files, and an
    nkpi archive's pools get the tail they had grown — unless this session grew strings of its own, which
    took those numbers for other strings (then the person recovers in a fresh session)."""
    if doc.get("version", 1) < 2:
        return
    archive = ws.source.archive  # type: ignore[attr-defined]
    tail = doc.get("poolTail")
    want = (base64.b64decode(tail[0]), base64.b64decode(tail[1])) if tail else (b"", b"")
    pools = getattr(archive, "pools", None) if archive.family == "nkpi" else None
    grown = pools.appended_raw() if pools is not None else (b"", b"")
    recovered_table = next((f for f in doc["files"] if f["path"].lower() == STRINGTABLE), None)
    own_table = ws.overlay.get(STRINGTABLE)
    table_taken = (
        recovered_table is not None
        and own_table is not None
        and (recovered_table.get("data") is None or base64.b64decode(recovered_table["data"]) != own_table)
    )
    pools_taken = (want[0] or want[1]) and (grown[0] or grown[1]) and grown != want
    if table_taken or pools_taken:
        raise BridgeError(
            ErrorCode.UNSAVED_CHANGES,
            "the recovered files name new strings as the crashed session numbered them, and this session has "
            "added strings of its own since the archive was opened",
            "Close the archive discarding this session's changes (pvf_archive_close with dirtyPolicy "
            "'discard'), open it again, and call pvf_recovery_prepare before adding strings.",
        )
    if pools is not None and (want[0] or want[1]) and grown != want:
        pools.adopt_tail(*want)
