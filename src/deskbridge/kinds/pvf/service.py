"""The PVF workspace service: one `core.engine.Engine` over `PvfStore`, and every operation the tools offer.

Everything a caller can do goes through the engine, so the UI, every MCP client and the CLI share one
workspace slot, one lock, one set of plans and tasks (ARCHITECTURE.md principle 1). This module adds only
what is PVF: paths, text, search, string links, registries. Long operations (open, close, save, save-as,
index build) are `core.tasks` tasks whose progress reaches MCP progress notifications and the UI's event
stream (topic `task`).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import re
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from deskbridge.core import limits
from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.paging import decode_cursor, encode_cursor, offset_of
from deskbridge.core.plans import Change, PlanKind, PlanWarning, make_change, text_diff
from deskbridge.core.tasks import Task, TaskHandle
from deskbridge.core.tools import CallContext
from deskbridge.core.workspace import DELETED, Workspace
from deskbridge.kinds.pvf import recovery
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.history import Journal
from deskbridge.kinds.pvf.outside import OutsideChanges
from deskbridge.kinds.pvf.search import (
    SHORT_QUERY_SCAN_MAX,
    ContentIndex,
    DiskText,
    PathList,
    in_scope,
    matching_lines,
)
from deskbridge.kinds.pvf.store import (
    Compiler,
    PvfSource,
    PvfStore,
    VerifiedIdentities,
    add_side_changes,
    mirror_on_apply,
    text_of,
)

CAPABILITIES_VERSION = "pvf-1"
READ_PAGE_MAX_CHARS = 32_000
"""Characters of text one pvf_read_file page returns by default (≈ 10 k tokens)."""
SEARCH_PAGE_MAX_BYTES = 128 * 1024
EDIT_MAX_FILES = 100
PLAN_PENDING_HINT = (
    "Another write plan is waiting (its planId is in data): apply or discard it (pvf_plan_apply / "
    "pvf_plan_discard), then prepare again."
)
SCAN_BUDGET = 5000
"""Index candidates one content-search page confirms at most (then it returns with nextCursor)."""
_LINK_RE = re.compile(r"^<\s*(\d+)\s*::\s*([^<>]+?)\s*>$")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class PvfService:
    """See the module docstring."""

    def __init__(
        self,
        bus: EventBus,
        cache_dir: Path,
        data_dir: Path | None = None,
        *,
        barrier_timeout_s: float | None = None,
    ) -> None:
        self.index_root = cache_dir / "pvf-index"
        self.store = PvfStore(VerifiedIdentities(self.index_root / "identities.json"))
        kwargs = {} if barrier_timeout_s is None else {"barrier_timeout_s": barrier_timeout_s}
        self.engine = Engine(self.store, bus, **kwargs)
        self.bus = bus
        self.index: ContentIndex | None = None
        self._index_ws: str | None = None
        self._unindexed: dict[str, tuple[int, str | None]] = {}
        """Files a save changed that the content index does not hold yet (key → (save number, display path,
        None when deleted)): the refresh reads their texts after the save has answered; search reads them
        directly until then."""
        self._saves = 0
        self._refresh_lock = threading.Lock()
        self._paths_cache: tuple[int, PathList] | None = None
        self.store.after_save_hooks.append(self._after_save)
        self.first_save_done = False
        self.data_dir = data_dir or cache_dir
        self.protected_dirs: list[Path] = []
        """Folders an import never reads (deskbridge's config folder with the MCP token; set by the workspace)."""
        self.recovery: dict[str, Any] | None = None
        """The recovery file offered for the open archive (kinds/pvf/recovery.py), if any."""
        self._spills: dict[str, Any] = {}
        self._apply_holders: dict[str, dict[str, Any]] = {}
        self.caller = "ui"
        """The caller of the running lifecycle operation (they are exclusive), for history records."""
        self.outside = OutsideChanges(self.engine, self._reopen)
        """Another program replacing the open archive, noticed on every tool call (kinds/pvf/outside.py)."""

    # ------------------------------------------------------------------------------------------- helpers

    def _ws(self, workspace_id: str, expected_revision: int | None = None) -> Workspace:
        ws = self.engine.current(workspace_id, expected_revision)
        if not isinstance(ws.source, PvfSource):
            raise BridgeError(
                ErrorCode.NO_WORKSPACE,
                "no archive is open in this workspace",
                "Open one with pvf_archive_open (pvf_workspace_info gives the workspaceEpoch to pass).",
                data=self.engine.identity_data(),
            )
        return ws

    def info(self) -> dict[str, Any]:
        st = self.engine.status()
        with self.engine.lock:
            ws = self.engine.workspace
            src = ws.source if ws is not None else None
            archive = src.info() if isinstance(src, PvfSource) else None
            changed = len(ws.overlay) if ws is not None else 0
            unindexed = len(self._unindexed)
        running = [t for t in self.engine.tasks.list() if t["state"] in ("queued", "running")]
        hint = None
        if archive is None:
            # workspaceId is null until an archive is open; say whether one is on its way (serve and mcp open the
            # archive they were given in a task, so the first call of a fast client can come before it ends).
            opening = next((t for t in running if t.get("label") == "pvf_archive_open"), None)
            hint = (
                f"The archive is still opening: follow pvf_task_status with taskId {opening['taskId']!r}, "
                "then call pvf_workspace_info again."
                if opening is not None
                else "No archive is open: call pvf_archive_open with the path of a .pvf file and "
                f"expectedWorkspaceEpoch {st.get('workspaceEpoch')}."
            )
        return {
            **st,
            **({"hint": hint} if hint else {}),
            "open": archive is not None,
            "archive": archive,
            "changedFiles": changed,
            # unindexedFiles: saved files the index takes in after the save (search reads them meanwhile)
            "index": {**self.index.status(), "unindexedFiles": unindexed}
            if self.index is not None and archive is not None
            else None,
            "recovery": recovery.summary(self.recovery) if archive is not None else None,
            # another program changed the archive on disk and the unsaved changes here are based on the old one
            "externalChange": self.outside.current() if archive is not None else None,
            "runningTasks": running,
            "capabilitiesVersion": CAPABILITIES_VERSION,
        }

    # ------------------------------------------------------------------------------------------- tasks

    async def run_task(
        self,
        call: CallContext,
        label: str,
        body: Callable[[Callable[[int, int], None]], Awaitable[dict[str, Any]]],
        wait_s: float,
    ) -> dict[str, Any]:
        """Run a lifecycle operation as an uncancellable task; wait up to `wait_s` for it, reporting progress."""

        async def work(handle: TaskHandle) -> dict[str, Any]:
            return await body(lambda done, total: handle.progress(done, total))

        task = self.engine.start_task(work, owner=call.caller, label=label, write=False, cancellable=False)
        return await self.wait_task(call, task, wait_s)

    async def wait_task(self, call: CallContext, task: Task, wait_s: float) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_s)
        seen: tuple[float, float | None] | None = None
        assert task.done_event is not None
        while not task.done_event.is_set():
            now = (task.done, task.total)
            if now != seen:
                seen = now
                with contextlib.suppress(Exception):
                    await call.progress(task.done, task.total, task.message or task.label)
            left = deadline - loop.time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(task.done_event.wait(), min(left, 0.1))
        status = self.engine.tasks.status(task.id)
        if status["state"] == "failed":
            err = status.get("error") or {}
            code = err.get("code", "INTERNAL")
            raise BridgeError(
                code if code in ErrorCode.__members__ else ErrorCode.INTERNAL,
                err.get("message", "the task failed"),
                err.get("hint"),
                data={**(err.get("data") or {}), "taskId": task.id},
            )
        out = {"taskId": task.id, "state": status["state"], "progress": status["progress"]}
        if status["state"] == "succeeded":
            out["result"] = status.get("result")
        return out

    def task_status(self, task_id: str, log_cursor: str | None) -> dict[str, Any]:
        return self.engine.tasks.status(task_id, log_cursor)

    # ------------------------------------------------------------------------------------------- lifecycle

    def precheck(
        self, operation: str, *, epoch: int | None, workspace_id: str | None, revision: int | None
    ) -> None:
        """The lifecycle's admission and identity checks, answered before a task is started (the task
        repeats them when it takes the lifecycle flag)."""
        with self.engine.lock:
            self.engine.admit_lifecycle(operation, refuse_export_plan=operation in ("open", "close"))
            if operation == "open":
                ws = self.engine.workspace
                empty = ws is None or not isinstance(ws.source, PvfSource)
                if empty and workspace_id is None and epoch is None:
                    raise BridgeError(
                        ErrorCode.INVALID_ARGUMENT,
                        "opening into the empty workspace needs expectedWorkspaceEpoch",
                        "Call pvf_workspace_info and pass its workspaceEpoch as expectedWorkspaceEpoch.",
                        data=self.engine.identity_data(),
                    )
                if not empty or workspace_id is not None:
                    self.engine.check_lifecycle_identity(epoch, workspace_id, revision)
            else:
                self.engine.check_lifecycle_identity(None, workspace_id, revision)

    async def open_archive(
        self,
        path: Path,
        *,
        caller: str,
        options: dict[str, Any],
        epoch: int | None = None,
        workspace_id: str | None = None,
        revision: int | None = None,
        dirty_policy: str = "reject",
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        eng = self.engine
        with eng.lock:
            ws = eng.workspace
            if ws is not None and not isinstance(ws.source, PvfSource) and workspace_id is None:
                workspace_id = ws.id  # the empty placeholder workspace: the epoch is the caller's guard
        self.caller = caller
        try:
            info = await eng.open(
                path,
                expected_epoch=epoch,
                workspace_id=workspace_id,
                expected_revision=revision,
                dirty_policy=dirty_policy,
                caller=caller,
                options=options,
                progress=progress,
            )
        except BridgeError as exc:
            if exc.code is ErrorCode.KEY_REQUIRED:
                raise BridgeError(
                    ErrorCode.KEY_REQUIRED,
                    exc.message,
                    "This paged archive needs the client's key material: call pvf_archive_open again with "
                    "keyFile (a key file), or skDat with rsaModulus, rsaPrivateExponent and metadataKey.",
                    data={
                        **exc.data,
                        "options": ["keyFile", "skDat", "rsaModulus", "rsaPrivateExponent", "metadataKey"],
                    },
                ) from exc
            raise
        self._on_opened(info["workspaceId"])
        info.update(self._opened_view())
        return info

    async def _reopen(self, path: Path, options: dict[str, Any], workspace_id: str) -> dict[str, Any]:
        """Open `path` again over the clean workspace `workspace_id` (the archive changed on disk)."""
        return await self.open_archive(
            path, caller="system", options=options, workspace_id=workspace_id, dirty_policy="reject"
        )

    def _opened_view(self) -> dict[str, Any]:
        with self.engine.lock:
            ws = self.engine.workspace
            src = ws.source if ws is not None else None
            archive = src.info() if isinstance(src, PvfSource) else None
        return {
            "archive": archive,
            "indexStatus": None if self.index is None else self.index.status(),
            "versionStatus": {"state": "ready"},
        }

    def _on_opened(self, workspace_id: str) -> None:
        self._unindexed = {}
        self.first_save_done = False
        self.engine.lifecycle.backup_on_save = True
        self._paths_cache = None
        if self.index is not None:
            self.index.close()
            self.index = None
        with self.engine.lock:
            ws = self.engine.workspace
            ident = ws.source_identity if ws is not None else None
            src = ws.source if ws is not None else None
        self.recovery = None
        if ident is None or not isinstance(src, PvfSource) or src.path is None:
            return
        # The folder index (≈ 2 s per million paths) is built by the first listing (`list_dir`), not here:
        # a reopen that searches or reads never decodes every path, nor holds the GIL while the index loads.
        self.recovery = recovery.load(self.data_dir, src.path, ident.sha256)
        self.index = ContentIndex(self.index_root, ident.sha256)
        self.index.reader = reader = DiskText(src.archive, self.engine.lock)
        threading.Thread(target=reader.warm, name="pvf-index-warm", daemon=True).start()
        self._index_ws = workspace_id
        if self.index.state != "ready":
            self._start_index_build(workspace_id, src)

    def _start_index_build(self, workspace_id: str, src: PvfSource) -> None:
        index = self.index
        assert index is not None
        archive_path = src.path
        options = {k: v for k, v in src.options.items() if v is not None}

        def work(handle: TaskHandle) -> dict[str, Any]:
            index.build(
                archive_path,
                options,
                progress=lambda d, t: handle.progress(d, t, "indexing file text"),
                cancelled=lambda: handle.cancelled or self._index_ws != workspace_id,
            )
            return index.status()

        with contextlib.suppress(RuntimeError):
            task = self.engine.tasks.start(
                work, owner="system", label="pvf-index", write=False, workspace_id=workspace_id
            )
            index.task_id = task.id

    async def close_archive(
        self, *, caller: str, workspace_id: str, revision: int | None, dirty_policy: str, progress: Any
    ) -> dict[str, Any]:
        self.caller = caller
        with self.engine.lock:
            ws = self.engine.workspace
            closed_path = ws.source_path if ws is not None and ws.id == workspace_id else None
        index = self.index
        if index is not None:
            # A save's refresh still running would be cut short by the close, and the next open of the saved
            # file would build its index again (34 s for 200,000 files): finish it first.
            await asyncio.to_thread(self._refresh_pending, workspace_id, index)
        info = await self.engine.close(
            workspace_id=workspace_id,
            expected_revision=revision,
            dirty_policy=dirty_policy,
            caller=caller,
            progress=progress,
        )
        self._index_ws = None
        self._unindexed = {}
        if self.index is not None:
            self.index.close()
            self.index = None
        self._paths_cache = None
        if dirty_policy == "discard" and closed_path is not None:
            recovery.remove(self.data_dir, closed_path)  # the person chose to drop these changes
        self.recovery = None
        return info

    async def save(
        self, *, caller: str, workspace_id: str, revision: int | None, progress: Any
    ) -> dict[str, Any]:
        self.caller = caller
        return await self.engine.save(
            workspace_id=workspace_id, expected_revision=revision, caller=caller, progress=progress
        )

    async def save_as(
        self,
        *,
        caller: str,
        workspace_id: str,
        revision: int | None,
        path: str,
        overwrite: bool,
        identity: dict[str, Any] | None,
        progress: Any,
    ) -> dict[str, Any]:
        return await self.engine.save_copy(
            path,
            workspace_id=workspace_id,
            expected_revision=revision,
            overwrite=overwrite,
            observed_identity=identity,
            caller=caller,
            progress=progress,
        )

    def _after_save(self, ws: Workspace, path: Path) -> None:
        """Maintenance after a save landed: `.bak` only on a session's first save; the index re-keyed."""
        self.engine.lifecycle.backup_on_save = False
        self.first_save_done = True
        self._paths_cache = None
        changes = self.store.last_serialised
        self.store.last_serialised = {}
        errors = []
        if changes:
            try:
                Journal(self.data_dir, path).record(
                    {
                        k: (name, before, None if v is DELETED else v)
                        for k, (name, v, before) in changes.items()
                    },
                    caller=self.caller,
                    revision=ws.saved_revision,
                )
            except Exception as exc:  # the save landed; say so, and still refresh the index
                errors.append(f"history not recorded: {type(exc).__name__}: {exc}")
        self._refresh_index(ws, changes)
        if errors:
            raise RuntimeError("; ".join(errors))

    def _refresh_index(self, ws: Workspace, changes: dict[str, Any]) -> None:
        index = self.index
        ident = ws.source_identity
        if index is None or ident is None:
            return
        if index.state != "ready":
            # A build of the old file is running: start over on the saved file (which holds every change).
            self._unindexed = {}
            self._index_ws = None
            self.index = ContentIndex(self.index_root, ident.sha256)
            if isinstance(ws.source, PvfSource):
                self.index.reader = DiskText(ws.source.archive, self.engine.lock)
            self._index_ws = ws.id
            if self.index.state != "ready" and isinstance(ws.source, PvfSource):
                # after the save has ended: while it runs, every task is refused (NOT_READY)
                source = ws.source
                self.engine.after_lifecycle(lambda: self._start_index_build(ws.id, source))
            return
        # Reading the changed texts back (≈ 0.5 ms a file: 6.6 s after a 13,000-file apply) waits until the
        # save has answered; until then search reads these files directly (`_search_content`).
        with self.engine.lock:
            self._saves += 1
            for key, (name, value, _before) in changes.items():
                self._unindexed[key] = (self._saves, None if value is DELETED else name)
        self.engine.after_lifecycle(lambda: self._start_index_refresh(ws.id, index))

    def _start_index_refresh(self, workspace_id: str, index: ContentIndex) -> None:
        """Put the saved files of `_unindexed` into `index` in a system task (so its progress shows)."""

        def work(handle: TaskHandle) -> dict[str, Any]:
            done = self._refresh_pending(
                workspace_id,
                index,
                progress=lambda d, t: handle.progress(d, t, "indexing saved files"),
                cancelled=lambda: handle.cancelled,
            )
            return {"refreshed": done}

        # RuntimeError: the task runner is shutting down; the files stay unindexed, the next open rebuilds.
        with contextlib.suppress(RuntimeError):
            self.engine.tasks.start(
                work, owner="system", label="pvf-index-refresh", write=False, workspace_id=workspace_id
            )

    def _refresh_pending(
        self,
        workspace_id: str,
        index: ContentIndex,
        *,
        progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> int:
        """Read the texts of `_unindexed` from the file as saved last and put them into `index`, re-keyed to
        that file; how many files it refreshed. One at a time; one that finds nothing left does nothing."""
        with self._refresh_lock:
            with self.engine.lock:
                pending = dict(self._unindexed)
                ws = self.engine.workspace
            if not pending or ws is None or ws.id != workspace_id or self.index is not index:
                return 0
            src = ws.source
            rows: dict[str, tuple[str | None, str | None]] = {}
            for i, (key, (_n, name)) in enumerate(pending.items()):
                if cancelled() or self._index_ws != workspace_id:
                    return 0
                text = None
                if name is not None and isinstance(src, PvfSource):
                    with self.engine.lock, contextlib.suppress(BridgeError):
                        text = src.archive.read_text(name)
                rows[key] = (name, text)
                if progress is not None and i % 256 == 0:
                    progress(i, len(pending))
            with self.engine.lock:
                ident = ws.source_identity
            if ident is None or self.index is not index:
                return 0
            index.refresh(rows, ident.sha256)  # type: ignore[arg-type]
            with self.engine.lock:
                # Only now may search trust the index for these files. One that a later save changed again
                # (a newer save number) may have been read before that save: it stays listed for the
                # refresh that save scheduled.
                for key in rows:
                    if self._unindexed.get(key) == pending[key]:
                        del self._unindexed[key]
            return len(rows)

    def unindexed_count(self) -> int:
        """Saved files the content index does not hold yet (the refresh after a save is running)."""
        with self.engine.lock:
            return len(self._unindexed)

    # ------------------------------------------------------------------------------------------- reading

    def list_dir(self, workspace_id: str, path: str, cursor: str | None, limit: int) -> dict[str, Any]:
        ws = self._ws(workspace_id)
        src: PvfSource = ws.source  # type: ignore[assignment]
        dirs = src.dirs()  # built outside the lock (≈1 s for a million paths, once)
        key = norm_path(path).rstrip("/")
        with self.engine.lock:
            ws = self._ws(workspace_id)
            revision = ws.revision
            overlay = {k: v for k, v in ws.overlay.items() if k.rpartition("/")[0] == key or in_scope(k, key)}
            names = {k: ws.name(k) for k in overlay}
        if (
            key
            and key not in dirs.dirs
            and not any(in_scope(k, key) for k, v in overlay.items() if v is not DELETED)
        ):
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no folder '{path}' in the archive",
                "List the parent folder with pvf_list_dir, or search paths with pvf_search mode 'path'.",
            )
        sub = {d.rpartition("/")[2]: d for d in dirs.dirs.get(key, ())}
        files: dict[str, str] = {}
        for p in dirs.files.get(key, ()):
            files[norm_path(p)] = p
        for k, v in overlay.items():
            parent = k.rpartition("/")[0]
            if parent == key:
                if v is DELETED:
                    files.pop(k, None)
                else:
                    files.setdefault(k, names[k])
            elif in_scope(k, key) and v is not DELETED:
                rest = k[len(key) + 1 :] if key else k
                top = rest.split("/", 1)[0]
                sub.setdefault(top, f"{key}/{top}" if key else top)
        entries: list[dict[str, Any]] = [
            {
                "name": dirs.display.get(d, d).rpartition("/")[2] or n,
                "path": dirs.display.get(d, d),
                "type": "dir",
            }
            for n, d in sorted(sub.items())
        ]
        entries += [
            {
                "name": p.replace("\\", "/").rpartition("/")[2],
                "path": p,
                "type": "file",
                "changed": k in overlay,
            }
            for k, p in sorted(files.items())
        ]
        start = 0
        if cursor:
            data = decode_cursor(cursor, tool="pvf_list_dir", ints=("offset",))
            if data.get("dir") != key or data.get("rev") != revision:
                raise BridgeError(
                    ErrorCode.STALE_WORKSPACE,
                    "the workspace changed between pages (or the cursor is for another folder)",
                    "List the folder again from the first page.",
                    data=self.engine.identity_data(),
                )
            start = int(data.get("offset", 0))
        page = entries[start : start + limit]
        end = start + len(page)
        return {
            "path": key,
            "entries": page,
            "total": len(entries),
            "revision": revision,
            "nextCursor": encode_cursor({"dir": key, "rev": revision, "offset": end})
            if end < len(entries)
            else None,
        }

    def read_file(
        self,
        workspace_id: str,
        path: str,
        *,
        start_line: int,
        end_line: int | None,
        expected_revision: int | None,
        max_chars: int,
    ) -> dict[str, Any]:
        with self.engine.lock:
            ws = self._ws(workspace_id, expected_revision)
            data = ws.read(path)
            revision = ws.revision
            key = ws.key_of(path)
            shown = ws.name(key) if key in ws.names else path
            src: PvfSource = ws.source  # type: ignore[assignment]
            if key not in ws.overlay:
                with contextlib.suppress(BridgeError):
                    shown = src.archive.file_info(path).path
            text = text_of(ws, path, data)
        base = {"path": shown, "revision": revision, "size": len(data), "changed": key in ws.overlay}
        if text is None:
            return {
                **base,
                "kind": "binary",
                "sha256": hashlib.sha256(data).hexdigest(),
                "hexPreview": data[:256].hex(" "),
                "truncated": len(data) > 256,
            }
        lines = text.splitlines(keepends=True)
        total = len(lines)
        if start_line < 1:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "startLine counts from 1")
        last = total if end_line is None else min(end_line, total)
        out: list[str] = []
        used = 0
        n = start_line - 1
        truncated = False
        while n < last:
            line = lines[n]
            if out and used + len(line) > max_chars:
                truncated = True
                break
            if not out and len(line) > max_chars:
                line = line[:max_chars]
                truncated = True
            out.append(line)
            used += len(line)
            n += 1
        return {
            **base,
            "kind": "text",
            "text": "".join(out),
            "startLine": start_line,
            "endLine": start_line + len(out) - 1,
            "totalLines": total,
            "truncated": truncated or n < last,
            "nextStartLine": n + 1 if n < last else None,
        }

    # ------------------------------------------------------------------------------------------- search

    def _path_list(self, ws: Workspace) -> PathList:
        src: PvfSource = ws.source  # type: ignore[assignment]
        cache = self._paths_cache
        if cache is None or cache[0] != id(src):
            cache = (id(src), PathList(src.paths()))
            self._paths_cache = cache
        return cache[1]

    def search(
        self,
        workspace_id: str,
        *,
        query: str,
        mode: str,
        scope: str,
        cursor: str | None,
        limit: int,
        max_bytes: int,
    ) -> dict[str, Any]:
        if not query:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "query is empty")
        ws = self._ws(workspace_id)
        scope_key = norm_path(scope).rstrip("/")
        state: dict[str, Any] = {"phase": 0, "after": 0}
        with self.engine.lock:
            revision = ws.revision
        if cursor:
            data = decode_cursor(
                cursor, tool="pvf_search", expect={"q": query, "m": mode, "s": scope_key}, ints=("p", "a")
            )
            if data.get("rev") != revision:
                raise BridgeError(
                    ErrorCode.STALE_WORKSPACE,
                    f"the workspace moved from revision {data.get('rev')} to {revision} between pages",
                    "Search again from the first page: results of two revisions must not be mixed.",
                    data=self.engine.identity_data(),
                )
            state = {"phase": int(data.get("p", 0)), "after": int(data.get("a", 0))}
        if mode == "path":
            result = self._search_paths(ws, query.lower(), scope_key, state, limit, max_bytes)
        elif mode == "content":
            result = self._search_content(ws, query, scope_key, state, limit, max_bytes)
        else:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"mode {mode!r} is not 'path' or 'content'")
        hits, nxt = result
        with self.engine.lock:
            moved = self.engine.workspace is not ws or ws.revision != revision
        if moved:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                "the workspace changed while searching",
                "Search again.",
                data=self.engine.identity_data(),
            )
        out: dict[str, Any] = {
            "query": query,
            "mode": mode,
            "scope": scope_key,
            "hits": hits,
            "revision": revision,
            "nextCursor": None
            if nxt is None
            else encode_cursor(
                {"q": query, "m": mode, "s": scope_key, "rev": revision, "p": nxt[0], "a": nxt[1]}
            ),
        }
        if mode == "content" and self.index is not None:
            out["index"] = self.index.status()
        if mode == "path" and not hits and nxt is None and not cursor:
            # The default mode looks at names only: a word from inside the files finds nothing there.
            out["hint"] = (
                f"No path contains {query!r}. To search the files' text, call pvf_search again with "
                'mode: "content".'
            )
        return out

    def _search_paths(
        self, ws: Workspace, needle: str, scope: str, state: dict[str, Any], limit: int, max_bytes: int
    ) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
        plist = self._path_list(ws)
        with self.engine.lock:
            overlay = dict(ws.overlay)
            names = {k: ws.name(k) for k in overlay}
        hits: list[dict[str, Any]] = []
        used = 0
        if state["phase"] == 0:
            for i in plist.find(needle, state["after"]):
                p = plist.paths[i]
                k = norm_path(p)
                if not in_scope(k, scope) or overlay.get(k) is DELETED:
                    continue
                item = {"path": p, "changed": k in overlay}
                size = len(p) + 32
                if len(hits) >= limit or (hits and used + size > max_bytes):
                    return hits, (0, i)
                hits.append(item)
                used += size
            state = {"phase": 1, "after": 0}
        added = sorted(k for k, v in overlay.items() if v is not DELETED and k not in _orig(ws))
        for j, k in enumerate(added):
            if j < state["after"]:
                continue
            if needle in k and in_scope(k, scope):
                if len(hits) >= limit:
                    return hits, (1, j)
                hits.append({"path": names[k], "changed": True})
        return hits, None

    def _search_content(
        self, ws: Workspace, query: str, scope: str, state: dict[str, Any], limit: int, max_bytes: int
    ) -> tuple[list[dict[str, Any]], tuple[int, int] | None]:
        folded = query.casefold()
        with self.engine.lock:
            overlay = dict(ws.overlay)
            unindexed = dict(self._unindexed)
        hits: list[dict[str, Any]] = []
        used = 0

        def add(path: str, lines: list[dict[str, Any]]) -> bool:
            nonlocal used
            size = len(path) + sum(len(h["text"]) + 16 for h in lines)
            if len(hits) >= limit or (hits and used + size > max_bytes):
                return False
            hits.append({"path": path, "matches": lines})
            used += size
            return True

        if state["phase"] == 0:
            if len(query) >= 3:
                index = self.index
                if index is None:
                    raise BridgeError(ErrorCode.NOT_READY, "the content index is not available", data={})
                after = state["after"]
                examined = 0
                while True:
                    if examined >= SCAN_BUDGET:
                        # Bounded work per page: a query whose pieces are common but whose text is rare
                        # would otherwise confirm every candidate in one call. The caller follows nextCursor.
                        return hits, (0, after)
                    batch = index.candidates(query, after, 200)
                    if not batch:
                        break
                    examined += len(batch)
                    for rowid, path in batch:
                        k = norm_path(path)
                        if k in overlay or k in unindexed or not in_scope(k, scope):
                            after = rowid
                            continue
                        # The index proposes, the text decides: the file as on disk, which is the current
                        # content for every file outside the overlay (the index is keyed by the file's hash).
                        text = index.text(path)
                        lines = matching_lines(text, folded) if text else []
                        if lines and not add(path, lines):
                            return hits, (0, after)
                        after = rowid
            else:
                plist = self._path_list(ws)
                chosen = [i for i, p in enumerate(plist.paths) if in_scope(norm_path(p), scope)]
                if len(chosen) > SHORT_QUERY_SCAN_MAX:
                    raise BridgeError(
                        ErrorCode.LIMIT_EXCEEDED,
                        f"a query of {len(query)} character(s) cannot use the index and the scope holds "
                        f"{len(chosen)} files (at most {SHORT_QUERY_SCAN_MAX} are scanned)",
                        "Search for 3 or more characters, or pass a narrower scope (a folder).",
                    )
                for i in chosen:
                    if i < state["after"]:
                        continue
                    path = plist.paths[i]
                    k = norm_path(path)
                    if k in overlay or k in unindexed:
                        continue
                    lines = self._lines_of(ws, path, folded)
                    if lines and not add(path, lines):
                        return hits, (0, i)
            state = {"phase": 1, "after": 0}
        # Then the files the index does not hold as they are: unsaved changes, and saved ones not yet indexed.
        changed = sorted(
            {k for k, v in overlay.items() if v is not DELETED}
            | {k for k, (_n, name) in unindexed.items() if name is not None and k not in overlay}
        )
        for j, k in enumerate(changed):
            if j < state["after"] or not in_scope(k, scope):
                continue
            with self.engine.lock:
                name = ws.name(k) if k in ws.names else unindexed.get(k, (0, None))[1] or _display(ws, k)
            lines = self._lines_of(ws, name, folded)
            if lines and not add(name, lines):
                return hits, (1, j)
        return hits, None

    def _lines_of(self, ws: Workspace, path: str, folded: str) -> list[dict[str, Any]]:
        with self.engine.lock:
            if self.engine.workspace is not ws:
                return []
            try:
                data = ws.read(path)
                text = text_of(ws, path, data)
            except BridgeError:
                return []
        return matching_lines(text, folded) if text else []

    # ------------------------------------------------------------------------------------------- edits

    def edit_prepare(
        self, caller: str, workspace_id: str, revision: int, edits: list[dict[str, Any]]
    ) -> dict[str, Any]:
        if not edits:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "no edits given")
        if len(edits) > EDIT_MAX_FILES:
            raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"at most {EDIT_MAX_FILES} files per edit plan")
        eng = self.engine
        with eng.lock:
            ws = self._ws(workspace_id, revision)
            # Refuse before compiling (the engine checks again when it registers the plan).
            eng.plans.refuse_if_pending(PlanKind.EDIT, PLAN_PENDING_HINT)
            changes: list[Change] = []
            seen: set[str] = set()
            with Compiler(ws) as comp:
                for e in edits:
                    path = e["path"]
                    key = ws.key_of(path)
                    if not key or key.endswith("/"):
                        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{path}' is not a file path")
                    if key in seen:
                        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{path}' appears twice")
                    seen.add(key)
                    exists = ws.exists(path)
                    if not exists and not e.get("delete"):
                        # A new file gets the rules an import's names get: `../x`, `a/../../x` or `c:/x` were
                        # added as they were written, and other tools extract such an archive outside their
                        # folder (zip-slip) or cannot extract it at all.
                        from deskbridge.kinds.pvf.paths import check_archive_path

                        check_archive_path(path)
                    old = ws.read(path) if exists else None
                    shown = _display(ws, key) if exists else path.replace("\\", "/").lstrip("/")
                    if e.get("delete"):
                        if old is None:
                            raise BridgeError(
                                ErrorCode.NOT_FOUND, f"'{path}' does not exist", data={"path": path}
                            )
                        old_text = text_of(ws, path, old)
                        ch = make_change(shown, old_text if old_text is not None else old, None)
                        ch.new = DELETED
                        changes.append(ch)
                        continue
                    if e.get("text") is not None:
                        new_text = str(e["text"])
                        payload = comp.compile(path, new_text)
                        old_text = text_of(ws, path, old) if old is not None else None
                        if old is not None and payload == old:
                            continue
                        diff = (
                            text_diff(shown, old_text, new_text)
                            if old is None or old_text is not None
                            else None
                        )
                        ch = Change(
                            shown,
                            "add" if old is None else "modify",
                            payload,
                            diff=diff,
                            binary=None if diff is not None else _binary(old, payload),
                            meta={"mode": "text", "size": len(payload)},
                        )
                    elif e.get("base64") is not None:
                        try:
                            payload = base64.b64decode(e["base64"], validate=True)
                        except ValueError:
                            raise BridgeError(
                                ErrorCode.INVALID_ARGUMENT, f"base64 of '{path}' is not valid"
                            ) from None
                        if old is not None and payload == old:
                            continue
                        ch = Change(
                            shown,
                            "add" if old is None else "modify",
                            payload,
                            binary=_binary(old, payload),
                            meta={"mode": "raw", "size": len(payload)},
                        )
                    else:
                        raise BridgeError(
                            ErrorCode.INVALID_ARGUMENT, f"edit of '{path}' needs text, base64 or delete"
                        )
                    changes.append(ch)
            warnings: list[PlanWarning] = []
            add_side_changes(ws, comp.extra, changes, comp.grew)
            if not changes:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    "the edits change nothing (every file already has that content)",
                    "Read the file again (pvf_read_file) and edit its current text.",
                )

            plan = eng.create_plan(
                PlanKind.EDIT,
                owner=caller,
                workspace_id=ws.id,
                revision=ws.revision,
                changes=changes,
                warnings=warnings,
                on_apply=mirror_on_apply(ws),
                summary={"files": len(changes)},
            )
            return eng.get_plan(plan.id)

    def recovery_prepare(self, caller: str, workspace_id: str, revision: int) -> dict[str, Any]:
        doc = self.recovery
        if doc is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                "no recovery is offered for this archive",
                "pvf_workspace_info shows `recovery` when unsaved changes of an earlier session were kept.",
            )
        with self.engine.lock:
            ws = self._ws(workspace_id, revision)
            edits = [e for e in recovery.plan_edits(doc) if not e.get("delete") or ws.exists(e["path"])]
            recovery.restore_context(doc, ws)
        plan = self.edit_prepare(caller, workspace_id, revision, edits)
        plan["summary"]["recovery"] = recovery.summary(doc)
        return plan

    def recovery_discard(self, workspace_id: str) -> dict[str, Any]:
        ws = self._ws(workspace_id)
        if ws.source_path is not None and self.recovery is not None:
            recovery.remove(self.data_dir, ws.source_path)
        had = self.recovery is not None
        self.recovery = None
        return {"discarded": had}

    # ------------------------------------------------------------------------------------------- import

    async def run_write_task(
        self, call: CallContext, label: str, fn: Callable[[TaskHandle, Task], dict[str, Any]], wait_s: float
    ) -> dict[str, Any]:
        """Run `fn(handle, task)` in a worker thread as the one write task (imports, export publishing): it
        holds the write slot, so lifecycle operations and other writes get TASK_BUSY meanwhile. Waits up to
        `wait_s`; a finished task's result is returned at the top level with its taskId."""

        def work(handle: TaskHandle) -> dict[str, Any]:
            return fn(handle, self.engine.tasks.get(handle.task_id))

        task = self.engine.start_task(work, owner=call.caller, label=label, write=True)
        out = await self.wait_task(call, task, wait_s)
        result = out.pop("result", None)
        return {**out, **(result or {})}

    def import_prepare(
        self,
        caller: str,
        workspace_id: str,
        revision: int,
        sources: list[str],
        target_dir: str,
        mode: str,
        *,
        task: Task | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        from deskbridge.kinds.pvf import transfer

        eng = self.engine
        self._ws(workspace_id, revision)
        self._drop_spills()
        with eng.lock:  # before the sources are read and frozen
            eng.plans.refuse_if_pending(PlanKind.IMPORT, PLAN_PENDING_HINT)
        spill = transfer.SpillStore(self.index_root.parent / "pvf-import")
        try:
            found = transfer.collect_import(  # frozen now, outside the lock
                sources, target_dir, spill, progress, protected=self.protected_dirs
            )
            with eng.lock:
                ws = self._ws(workspace_id, revision)
                changes = transfer.build_import_changes(ws, found, spill, mode)
                overwrites = [c.key for c in changes if c.meta.get("overwrite")]
                holder: dict[str, Any] = {}

                def on_apply(selected: list[Change]) -> dict[str, Any]:
                    return transfer.import_on_apply(ws, holder["overwrite"])(selected)

                plan = eng.create_plan(
                    PlanKind.IMPORT,
                    owner=caller,
                    workspace_id=ws.id,
                    revision=ws.revision,
                    changes=changes,
                    on_apply=on_apply,
                    task=task,
                    summary={
                        "files": len(found),
                        "adds": len(changes) - len(overwrites),
                        "overwrites": len(overwrites),
                    },
                )
                self._apply_holders[plan.id] = holder
                self._spills[plan.id] = spill
                return eng.get_plan(plan.id)
        except BaseException:
            spill.close()
            raise

    def import_apply(
        self,
        caller: str,
        plan_id: str,
        revision: int | None,
        selected: list[str],
        overwrite: list[str],
        acknowledged: list[str] | None = None,
    ) -> dict[str, Any]:
        holder = self._apply_holders.get(plan_id)
        if holder is None:
            self.engine.get_plan(plan_id, PlanKind.IMPORT)  # NOT_FOUND with the usual hint
            raise BridgeError(ErrorCode.NOT_FOUND, f"no import plan {plan_id!r}")
        holder["overwrite"] = set(overwrite)
        out = self.engine.apply_plan(
            plan_id,
            caller=caller,
            change_keys=selected,
            expected_revision=revision,
            acknowledged_warning_ids=acknowledged or (),
            kind=PlanKind.IMPORT,
        )
        out["workspaceCommitted"] = True
        self._drop_spills()
        return out

    def _drop_spills(self) -> None:
        with self.engine.lock:
            for pid in list(self._spills):
                try:
                    state = self.engine.plans.get(pid).state
                except BridgeError:
                    state = None
                if state is None or str(state) != "pending":
                    self._spills.pop(pid).close()
                    self._apply_holders.pop(pid, None)

    # ------------------------------------------------------------------------------------------- export

    def export_prepare(
        self, caller: str, workspace_id: str, revision: int, a: dict[str, Any]
    ) -> dict[str, Any]:
        from deskbridge.kinds.pvf import transfer

        eng = self.engine
        mode = a["mode"]
        fmt = a.get("format")
        meta: dict[str, Any] = {}
        if mode == "mod":
            name, version = transfer.validate_mod_meta(fmt, a.get("name"), a.get("version"), a.get("modId"))
            meta = {"name": name, "version": version, "modId": a.get("modId")}
        elif fmt not in (None, "direct"):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "mode 'direct' takes no MOD format")
        with eng.lock:
            ws = self._ws(workspace_id, revision)
            eng.plans.refuse_if_pending(
                PlanKind.EXPORT, "Run or discard it (pvf_export_execute / pvf_plan_discard) first."
            )
            ar = ws.source.archive  # type: ignore[union-attr]
            items = transfer.export_items(self, ws, a["source"], a.get("scopes") or [], a.get("commitId"))
            entries, warnings, skipped, counts = transfer.plan_export(
                ar,
                items,
                mode=mode,
                fmt=fmt,
                include_dependencies=bool(a.get("includeDependencies")),
                current=lambda t, k: _link_text(ar, t, k),
            )
            merge_keys = tuple(
                e.key for e in entries if e.kind == "merge" and not any(i.path == e.item for i in items)
            )
            changes = []
            for e in entries:
                ch = Change(
                    e.key,
                    "add",
                    e,
                    binary={"new": {"size": len(e.content), "sha256": hashlib.sha256(e.content).hexdigest()}},
                    meta={"item": e.item, "entryKind": e.kind},
                )
                if e.kind == "pvf" and merge_keys:
                    ch.requires = (
                        merge_keys  # dependency entries: leaving them out needs an acknowledged warning
                    )
                changes.append(ch)

            def on_apply(selected: list[Change]) -> Any:
                return [c.new for c in selected]

            plan = eng.create_plan(
                PlanKind.EXPORT,
                owner=caller,
                workspace_id=ws.id,
                revision=ws.revision,
                changes=changes,
                warnings=warnings,
                on_apply=on_apply,
                summary={
                    "mode": mode,
                    "format": fmt or "direct",
                    "source": a["source"],
                    "total": len(entries),
                    "items": len(items),
                    "skippedDeletes": [x for x in skipped if "delete" in x["reason"]],
                    "skipped": skipped[:100],
                    **counts,
                    **meta,
                },
            )
            return eng.get_plan(plan.id)

    def export_execute(
        self,
        caller: str,
        plan_id: str,
        out_parent: str,
        out_name: str | None,
        selected: list[str] | None,
        acknowledged: list[str],
        *,
        task: Task | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        from deskbridge.kinds.pvf import transfer

        eng = self.engine
        info = eng.get_plan(plan_id, PlanKind.EXPORT)
        summary = info["summary"]
        keys = selected if selected else [c for c in eng.plans.get(plan_id).changes]
        target = transfer.output_target(
            Path(out_parent), out_name, summary["mode"], summary.get("format"), summary
        )
        done = eng.apply_plan(
            plan_id,
            caller=caller,
            change_keys=keys,
            acknowledged_warning_ids=acknowledged,
            kind=PlanKind.EXPORT,
            task=task,
        )
        entries = done["result"]
        published = transfer.write_package(
            target, summary["mode"], summary.get("format"), entries, summary, progress=progress
        )
        return {
            **published,
            "planId": plan_id,
            "format": summary.get("format"),
            "sourceRevision": info["revision"],
            "dependencies": summary.get("dependencies", 0),
            "skippedDeletes": summary.get("skippedDeletes", []),
            "warnings": info["warnings"],
            "published": True,
        }

    def history(self, workspace_id: str, cursor: str | None, limit: int) -> dict[str, Any]:
        ws = self._ws(workspace_id)
        assert ws.source_path is not None
        commits = Journal(self.data_dir, ws.source_path).list()
        start = offset_of(cursor)
        page = commits[start : start + limit]
        end = start + len(page)
        return {
            "commits": [
                {k: c[k] for k in ("id", "seq", "time", "source", "caller", "revision")}
                | {"files": [{"path": f["path"], "action": f["action"]} for f in c["files"][:200]]}
                for c in page
            ],
            "total": len(commits),
            "nextCursor": encode_cursor({"o": end}) if end < len(commits) else None,
        }

    COMMIT_DIFF_MAX_FILES = 200
    COMMIT_DIFF_MAX_BYTES = 64 * 1024
    """Per file, so one huge table cannot crowd out the rest of the commit in the page."""

    def commit_diff(self, workspace_id: str, commit_id: str) -> dict[str, Any]:
        """One commit of the journal with a diff per file (decompiled as the archive shows it; sizes for binary)."""
        from deskbridge.kinds.pvf.transfer import payload_text

        ws = self._ws(workspace_id)
        assert ws.source_path is not None
        journal = Journal(self.data_dir, ws.source_path)
        c = journal.get(commit_id)
        ar = ws.source.archive  # type: ignore[union-attr]
        out = []
        for f in c["files"][: self.COMMIT_DIFF_MAX_FILES]:
            before, after = journal.blob(f["before"]), journal.blob(f["after"])
            path = f["path"]
            old = None if before is None else payload_text(ar, path, before)
            new = None if after is None else payload_text(ar, path, after)
            item: dict[str, Any] = {"path": path, "action": f["action"]}
            if (before is None or old is not None) and (after is None or new is not None):
                diff = text_diff(path, old, new)
                raw = diff.encode("utf-8")
                item["diff"] = raw[: self.COMMIT_DIFF_MAX_BYTES].decode("utf-8", "ignore")
                item["diffTruncated"] = len(raw) > self.COMMIT_DIFF_MAX_BYTES
            else:
                item["binary"] = {
                    "old": None if before is None else {"size": len(before), "sha256": f["before"]},
                    "new": None if after is None else {"size": len(after), "sha256": f["after"]},
                }
            out.append(item)
        return {
            **{k: c[k] for k in ("id", "seq", "time", "source", "caller", "revision")},
            "files": out,
            "totalFiles": len(c["files"]),
        }

    # ------------------------------------------------------------------------------------------- links

    def resolve(self, workspace_id: str, args: dict[str, Any]) -> dict[str, Any]:
        with self.engine.lock:
            ws = self._ws(workspace_id)
            ar = ws.source.archive  # type: ignore[union-attr]
            revision = ws.revision
            out: dict[str, Any] = {"revision": revision}
            link = args.get("link")
            if link:
                m = _LINK_RE.match(link.strip())
                if m is None:
                    raise BridgeError(
                        ErrorCode.INVALID_ARGUMENT, f"{link!r} is not a string link like <3::name_1>"
                    )
                table, key = int(m.group(1)), m.group(2)
                out["link"] = f"<{table}::{key}>"
                out["text"] = _link_text(ar, table, key)
            if args.get("listPath") is not None:
                reg = _registry(ar, args["listPath"])
                if args.get("id") is not None:
                    out["id"] = args["id"]
                    out["path"] = reg.resolve(int(args["id"]))
                if args.get("path"):
                    out["path"] = args["path"]
                    out["ids"] = [i for i, p in reg if reg.to_archive_path(p) == norm_path(args["path"])]
            if args.get("text"):
                out["links"] = _links_for_text(ar, args["text"], args.get("limit") or 20)
            return out

    def list_registries(self, workspace_id: str, cursor: str | None, limit: int) -> dict[str, Any]:
        ws = self._ws(workspace_id)
        with self.engine.lock:
            revision = ws.revision
            lists = sorted(p for p in ws.all_keys() if norm_path(p).endswith(".lst"))
        start = offset_of(cursor)
        page = lists[start : start + limit]
        items = []
        with self.engine.lock:
            ar = ws.source.archive  # type: ignore[union-attr]
            for p in page:
                try:
                    reg = _registry(ar, p)
                    entries = list(reg)
                    items.append(
                        {
                            "path": p,
                            "entries": len(entries),
                            "baseDir": reg.base_dir(),
                            "firstEntries": [
                                {"id": i, "path": reg.to_archive_path(rel)} for i, rel in entries[:3]
                            ],
                        }
                    )
                except BridgeError as exc:
                    items.append({"path": p, "error": exc.to_dict()})
        end = start + len(page)
        return {
            "registries": items,
            "total": len(lists),
            "revision": revision,
            "nextCursor": encode_cursor({"o": end}) if end < len(lists) else None,
        }


# --------------------------------------------------------------------------------------------- helpers


def _orig(ws: Workspace) -> set[str]:
    src = ws.source
    return src.norm_set() if isinstance(src, PvfSource) else set()


def _display(ws: Workspace, key: str) -> str:
    src = ws.source
    if isinstance(src, PvfSource):
        with contextlib.suppress(BridgeError):
            return src.archive.file_info(key).path
    return ws.name(key)


def _binary(old: bytes | None, new: bytes) -> dict[str, Any]:
    def d(b: bytes | None) -> dict[str, Any] | None:
        return None if b is None else {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()}

    return {"old": d(old), "new": d(new)}


def _link_text(ar: Any, table: int, key: str) -> str | None:
    if ar.family == "classic":
        return ar.resolve_link(table, key)
    return ar.refs().lookup(table, key)


def _registry(ar: Any, list_path: str) -> Any:
    if not ar.exists(list_path):
        raise BridgeError(ErrorCode.NOT_FOUND, f"no list '{list_path}'", "pvf_list_registries lists them.")
    if ar.family == "classic":
        return ar.registry(list_path)
    from deskbridge.kinds.pvf.archive.nkpi_lists import read_list

    return read_list(ar, list_path)


def _links_for_text(ar: Any, text: str, limit: int) -> list[dict[str, Any]]:
    """String links whose text contains `text` (case-insensitive): every n_string table's `.str` entries."""
    folded = text.casefold()
    found: list[dict[str, Any]] = []
    if ar.family == "classic":
        reg = ar.strings.nstring()
        for table, rel in reg:
            for key, value in ar.strings.str_entries(rel).items():
                if folded in value.casefold():
                    found.append({"link": f"<{table}::{key}>", "text": value, "strFile": rel})
                    if len(found) >= limit:
                        return found
        return found
    refs = ar.refs()
    pairs = [(t, rel) for lst in getattr(refs, "_lists", []) for t, rel in lst.items()]
    for table, rel in dict.fromkeys(pairs):
        sf = refs.str_file(rel)
        if sf is None:
            continue
        for key, value in sf.entries().items():
            if folded in value.casefold():
                found.append({"link": f"<{table}::{key}>", "text": value, "strFile": rel})
                if len(found) >= limit:
                    return found
    return found


__all__ = ["PvfService", "limits"]
