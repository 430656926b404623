"""Open, close, save and save-a-copy of a workspace: the order of checks, the UI draft barrier, the disk commit.

The kind supplies *how* (a `Store`: load a source from a path, serialise the current state to a file);
this module supplies *when* and *whether*:

1. exclusive lifecycle admission — one lifecycle operation at a time; refused while a write task runs
   (`TASK_BUSY`) or a write plan is pending (`PLAN_PENDING`; open/close also refuse a pending export plan,
   `EXPORT_PLAN_PENDING`). While it runs, new writes, plans and tasks get `NOT_READY` at once (we chose
   refusing over waiting: a lifecycle operation can take seconds, and a caller that is told "not ready,
   retry" decides for itself, while a hidden wait could outlive the caller's own timeout);
2. identity — `workspaceId` / expected revision / `workspaceEpoch`, else `STALE_WORKSPACE`;
3. the UI draft barrier — every registered editor must answer `prepare` with its draft state within the
   timeout (`UI_NOT_READY` otherwise, `UI_DRAFT_PENDING` if any has a draft); editors stay frozen until
   `release`. `dirtyPolicy: discard` never skips it (seed "未保存内容与关闭策略");
4. dirty policy for open/close — `reject` (default, `UNSAVED_CHANGES`), `save`, `discard`;
5. the disk work off the event loop (`asyncio.to_thread`), with file identity checks: `SOURCE_CHANGED`,
   `SAME_AS_SOURCE`, `TARGET_EXISTS`, `TARGET_CHANGED`, `SAVE_AS_REQUIRED`;
6. the swap/commit under `Engine.lock`, and an event on topic `workspace`.

Results say `diskCommitted` and carry any warnings of maintenance after the commit (`Store.after_save`),
so a caller never retries a save that did land (seed "保存").
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import secrets
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, TypeVar

from deskbridge.core import files, limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.files import FileIdentity
from deskbridge.core.workspace import Source, Workspace

if TYPE_CHECKING:
    from deskbridge.core.engine import Engine

T = TypeVar("T")


class DirtyPolicy(StrEnum):
    """What open/close do with unsaved changes: refuse (default), save them first, or drop them."""

    REJECT = "reject"
    SAVE = "save"
    DISCARD = "discard"

    @classmethod
    def parse(cls, value: DirtyPolicy | str) -> DirtyPolicy:
        try:
            return cls(value)
        except ValueError:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"dirtyPolicy {value!r} is not one of reject, save, discard",
                "Pass dirtyPolicy 'reject' (default), 'save' or 'discard'.",
            ) from None


class Store(Protocol):
    """What a kind implements so the engine can open and save it. Both run in a worker thread."""

    def load(self, path: Path | None) -> Source:
        """Parse `path` into a read-only source (None: a new, empty workspace). Raise `BridgeError` if bad."""
        ...

    def serialize(self, workspace: Workspace, out: BinaryIO) -> None:
        """Write the workspace's current committed state (source + overlay) to `out`."""
        ...


# Optional Store methods, looked up with getattr:
#   load(path, *, progress, **options) / serialize(workspace, out, *, progress)
#       a `progress(done, total)` keyword is passed when the method accepts one (archive opens and saves
#       take seconds; the lifecycle task forwards it to MCP progress notifications and the UI), and the
#       kind's open options (e.g. PVF key files) reach `load` as keywords.
#   file_identity(path) -> FileIdentity
#       the opened file's identity, when the kind can vouch for it without hashing the whole file (PVF
#       reuses a verified identity for an unchanged file; see kinds/pvf/store.py `VerifiedIdentities`);
#       must equal what `files.file_identity` would return. Saves still hash the target before replacing it.
#   verify(workspace, tmp_path) -> None
#       check the complete temp file before it replaces the target (re-open it, read the changes back);
#       raising leaves the target untouched. Used by save and save-as alike.
#   rebind(workspace, path, identity) -> Source | None
#       after a save: the file just written is the new source (a returned Source replaces the old one and
#       the overlay empties, `Workspace.rebase`); runs under `Engine.lock`, so keep it short. A failure
#       becomes a warning and the workspace keeps old source + overlay, which equal what is on disk.
#   after_save(workspace, path) -> None
#       maintenance after a successful save (index, version record); a failure becomes a warning.
#   key_path(workspace, key) -> Path  and  serialize_key(workspace, key, out) -> None
#       for kinds whose source is a folder of separate files, one per key (markdown: a folder of
#       documents): `save(keys=[…])` writes just those keys, each to its own file, with the lifecycle's
#       file identity check (`Workspace.key_identities`, else `Source.identity_of`) and atomic replace,
#       and records per key what is on disk (`Workspace.key_saved`, `dirty_keys`).
#   write_source(workspace, path, expected_identity) -> FileIdentity | None
#       for kinds whose source is a folder (a mod project, a folder of documents): write the changed
#       files yourself, each through `core.files`, and check for outside changes; replaces the
#       single-file serialise + atomic replace.


Progress = Callable[[int, int], None]
"""`progress(done, total)` from a store's load or serialise (units are the store's)."""


def _accepts(fn: Any, name: str) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


async def run_uninterruptible(fn: Callable[[], T]) -> T:
    """Run `fn` in a thread and see it finish even if the caller is cancelled (a client disconnecting).

    A disk commit cannot be undone half way, and its bookkeeping (new identity, saved revision) must not
    be lost — so on cancellation we keep waiting for the thread, then let the cancellation through.
    The lifecycle flag stays set until then, so no commit can change what is being serialised.
    """
    fut = asyncio.ensure_future(asyncio.to_thread(fn))
    try:
        return await asyncio.shield(fut)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await fut
        raise


# --------------------------------------------------------------------------------------------- barrier


class _Round:
    def __init__(self, expected: set[str], loop: asyncio.AbstractEventLoop) -> None:
        self.expected = expected
        self.answers: dict[str, dict[str, Any]] = {}
        self.loop = loop
        self.complete = asyncio.Event()


class DraftBarrier:
    """Asks every registered editor (browser tab, script window) whether it holds an unsynced draft.

    The wire protocol is the platform's, the same for every kind (web/app.py): an editor is registered while
    its event stream `GET /api/events?editor=<clientId>` is open, gets `prepare`/`release` on topic `ui`,
    answers with `POST /api/editors/ack {operationId, clientId, hasDrafts}` and may report its draft state
    for display with `POST /api/editors/report`. A kind exposes its barrier as `workspace.drafts`. Thread-safe.
    """

    def __init__(self, bus: EventBus, timeout_s: float = limits.UI_BARRIER_TIMEOUT_S) -> None:
        self.bus = bus
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._clients: set[str] = set()
        self._rounds: dict[str, _Round] = {}
        self._frozen: set[str] = set()
        """Operations whose `prepare` went out and whose `release` has not."""
        self._reported: dict[str, bool] = {}
        """Draft state each editor last reported on its own, for status displays only."""

    def register(self, client_id: str) -> None:
        with self._lock:
            self._clients.add(client_id)

    def unregister(self, client_id: str) -> None:
        with self._lock:
            self._clients.discard(client_id)
            self._reported.pop(client_id, None)

    def report(self, client_id: str, has_drafts: bool) -> None:
        """An editor says whether it holds a draft, unasked — shown in status (e.g. workspace_info).

        Never trusted for a lifecycle decision: a report can be late, which is why `check` always asks
        (seed "前端同步与任务边界": a dirty flag reported with delay does not close the race).
        """
        with self._lock:
            if client_id in self._clients:
                self._reported[client_id] = bool(has_drafts)

    def reported_drafts(self) -> dict[str, bool | None]:
        """Each registered editor's last reported draft state (None: it never reported)."""
        with self._lock:
            return {c: self._reported.get(c) for c in sorted(self._clients)}

    def clients(self) -> list[str]:
        with self._lock:
            return sorted(self._clients)

    async def check(
        self,
        operation_id: str,
        workspace: Workspace | None,
        operation: str,
        *,
        scope: Mapping[str, Any] | None = None,
    ) -> None:
        """Pass only when every registered editor answered in time without a draft; editors stay frozen.

        `scope` goes into the `prepare` event for kinds whose operation concerns part of what an editor
        shows (markdown: `{docId, revision}` of the one document being saved); `workspace` may then be None.
        """
        with self._lock:
            expected = set(self._clients)
            if not expected:
                return
            rnd = _Round(expected, asyncio.get_running_loop())
            self._rounds[operation_id] = rnd
            self._frozen.add(operation_id)
        self.bus.publish(
            "ui",
            {
                "event": "prepare",
                "operationId": operation_id,
                "operation": operation,
                "workspaceId": None if workspace is None else workspace.id,
                "revision": None if workspace is None else workspace.revision,
                **dict(scope or {}),
                "clients": sorted(expected),
            },
        )
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(rnd.complete.wait(), self.timeout_s)
        with self._lock:
            self._rounds.pop(operation_id, None)
            missing = sorted(rnd.expected - set(rnd.answers))
            drafts = sorted(c for c, a in rnd.answers.items() if a.get("hasDrafts"))
        if missing:
            raise BridgeError(
                ErrorCode.UI_NOT_READY,
                f"{len(missing)} editor(s) did not confirm their draft state in time",
                data={"operationId": operation_id, "clients": missing},
            )
        if drafts:
            raise BridgeError(
                ErrorCode.UI_DRAFT_PENDING,
                f"{len(drafts)} editor(s) hold unsynced edits",
                data={
                    "operationId": operation_id,
                    "clients": drafts,
                    "details": {c: rnd.answers[c].get("detail") for c in drafts},
                },
            )

    def ack(self, operation_id: str, client_id: str, has_drafts: bool, detail: Any = None) -> None:
        """An editor's answer. `UI_NOT_READY` for an unknown/finished operation or an unregistered editor."""
        with self._lock:
            rnd = self._rounds.get(operation_id)
            if rnd is None:
                raise BridgeError(
                    ErrorCode.UI_NOT_READY,
                    f"operation {operation_id!r} is not waiting for editors",
                    "The answer came too late or for an unknown operation; the operation was refused.",
                )
            if client_id not in rnd.expected:
                raise BridgeError(
                    ErrorCode.UI_NOT_READY,
                    f"editor {client_id!r} is not registered for this operation",
                    "Register the editor first; it will be asked in the next operation.",
                )
            rnd.answers[client_id] = {"hasDrafts": bool(has_drafts), "detail": detail}
            done = set(rnd.answers) >= rnd.expected
        if done:
            rnd.loop.call_soon_threadsafe(rnd.complete.set)

    def release(self, operation_id: str, outcome: str) -> None:
        """Unfreeze the editors after an operation that asked them (called on success and failure alike)."""
        with self._lock:
            if operation_id not in self._frozen:
                return
            self._frozen.discard(operation_id)
        self.bus.publish("ui", {"event": "release", "operationId": operation_id, "outcome": outcome})


# --------------------------------------------------------------------------------------------- lifecycle


class Lifecycle:
    """The lifecycle operations of one `Engine`; see the module docstring for the order of checks."""

    def __init__(
        self, engine: Engine, store: Store, barrier: DraftBarrier, *, backup_on_save: bool = True
    ) -> None:
        self.engine = engine
        self.store = store
        self.barrier = barrier
        self.backup_on_save = backup_on_save

    @contextlib.asynccontextmanager
    async def _exclusive(self, operation: str, *, refuse_export_plan: bool) -> AsyncIterator[str]:
        eng = self.engine
        op_id = "op-" + secrets.token_hex(6)
        with eng.lock:
            eng.admit_lifecycle(operation, refuse_export_plan=refuse_export_plan)
            eng.lifecycle_op = operation
        outcome = "failed"
        try:
            yield op_id
            outcome = "ok"
        finally:
            with eng.lock:
                eng.lifecycle_op = None
            self.barrier.release(op_id, outcome)

    # -- open / close ----------------------------------------------------------------------------------

    async def open(
        self,
        path: Path | str | None,
        *,
        expected_epoch: int | None = None,
        workspace_id: str | None = None,
        expected_revision: int | None = None,
        dirty_policy: DirtyPolicy | str = DirtyPolicy.REJECT,
        caller: str = "ui",
        options: dict[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Open `path` (None: a new workspace without a source file) in place of the current workspace.

        `options` go to the store's `load` as keywords; `progress` reports the load (and a `save` dirty policy).
        """
        policy = DirtyPolicy.parse(dirty_policy)
        target = None if path is None else Path(path)
        if target is not None and not target.is_absolute():
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{str(target)!r} is not an absolute path",
                "Give the full path of the file to open.",
            )
        eng = self.engine
        async with self._exclusive("open", refuse_export_plan=True) as op_id:
            old = eng.check_lifecycle_identity(expected_epoch, workspace_id, expected_revision)
            if old is not None:
                await self.barrier.check(op_id, old, "open")
                await self._settle_dirty(old, policy, progress)
            # Parse the candidate before touching the current workspace: a failure keeps everything as it was.
            source, identity = await run_uninterruptible(lambda: self._load(target, options, progress))
            with eng.lock:
                ws = Workspace(source=source, source_path=target, source_identity=identity)
                eng.workspace = ws
                eng.epoch += 1
                ws_epoch = eng.epoch
            if target is not None:
                await asyncio.to_thread(
                    files.remove_stale_temps, target if target.is_dir() else target.parent
                )
            info = {
                "operationId": op_id,
                "workspaceId": ws.id,
                "workspaceEpoch": ws_epoch,
                "revision": ws.revision,
                "sourcePath": None if target is None else str(target),
                "sourceDirty": False,
                "caller": caller,
                "previousWorkspaceId": None if old is None else old.id,
            }
            eng.bus.publish("workspace", {"event": "opened", **info})
            return info

    def _load(
        self, target: Path | None, options: dict[str, Any] | None = None, progress: Progress | None = None
    ) -> tuple[Source, FileIdentity | None]:
        kwargs = dict(options or {})
        if progress is not None and _accepts(self.store.load, "progress"):
            kwargs["progress"] = progress
        if target is None:
            return self.store.load(None, **kwargs), None
        if not target.exists():
            raise BridgeError(ErrorCode.NOT_FOUND, f"'{target}' does not exist")
        # A folder source has no single identity; its kind checks its files in `write_source`.
        identity_of = getattr(self.store, "file_identity", None) or files.file_identity
        identity = identity_of(target) if target.is_file() else None
        source = self.store.load(target, **kwargs)
        if identity is not None:
            # The identity is the file we parsed only if nothing replaced or wrote it meanwhile: a stat
            # says so (only these fields are compared; hashing the file a second time added nothing).
            try:
                now: os.stat_result | None = target.stat()
            except FileNotFoundError:
                now = None
            if now is None or (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) != (
                identity.device,
                identity.inode,
                identity.size,
                identity.mtime_ns,
            ):
                closer = getattr(source, "close", None)
                if callable(closer):
                    closer()
                raise BridgeError(
                    ErrorCode.SOURCE_CHANGED,
                    f"'{target}' changed on disk while it was being opened",
                    "Another program is writing it; wait until it has finished, then open it again.",
                )
        return source, identity

    async def close(
        self,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        dirty_policy: DirtyPolicy | str = DirtyPolicy.REJECT,
        caller: str = "ui",
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        policy = DirtyPolicy.parse(dirty_policy)
        eng = self.engine
        async with self._exclusive("close", refuse_export_plan=True) as op_id:
            ws = eng.check_lifecycle_identity(None, workspace_id, expected_revision)
            if ws is None:
                raise BridgeError(ErrorCode.NO_WORKSPACE, "no workspace is open", data=eng.identity_data())
            await self.barrier.check(op_id, ws, "close")
            await self._settle_dirty(ws, policy, progress)
            with eng.lock:
                eng.workspace = None
                eng.epoch += 1
                epoch = eng.epoch
            info = {
                "operationId": op_id,
                "closedWorkspaceId": ws.id,
                "workspaceEpoch": epoch,
                "caller": caller,
            }
            eng.bus.publish("workspace", {"event": "closed", **info})
            return info

    async def _settle_dirty(
        self, ws: Workspace, policy: DirtyPolicy, progress: Progress | None = None
    ) -> None:
        if not ws.dirty or policy is DirtyPolicy.DISCARD:
            return
        if policy is DirtyPolicy.REJECT:
            raise BridgeError(
                ErrorCode.UNSAVED_CHANGES,
                f"the workspace has unsaved changes (revision {ws.revision}, saved {ws.saved_revision})",
                data=self.engine.identity_data(),
            )
        await self._save_source(ws, progress)

    # -- save ------------------------------------------------------------------------------------------

    async def save(
        self,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        keys: Sequence[str] | None = None,
        caller: str = "ui",
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Write the committed state to the source file (atomic, with `.bak`), refusing external changes.

        `keys`: write only these keys, each to its own file (a store with `key_path`/`serialize_key`); the
        other keys keep their unsaved changes (`dirtyKeys` in the result).
        """
        async with self._exclusive("save", refuse_export_plan=False) as op_id:
            ws = self.engine.check_lifecycle_identity(None, workspace_id, expected_revision)
            if ws is None:
                raise BridgeError(
                    ErrorCode.NO_WORKSPACE, "no workspace is open", data=self.engine.identity_data()
                )
            if keys is not None:
                result = await self._save_keys(op_id, ws, keys)
                result.update(operationId=op_id, caller=caller)
                self.engine.bus.publish("workspace", {"event": "saved", **_event_view(result)})
                return result
            if ws.source_path is None:
                raise BridgeError(ErrorCode.SAVE_AS_REQUIRED, "this workspace has no source file yet")
            await self.barrier.check(op_id, ws, "save")
            result = await self._save_source(ws, progress)
            result.update(operationId=op_id, caller=caller)
            self.engine.bus.publish("workspace", {"event": "saved", **_event_view(result)})
            return result

    def _serialiser(self, ws: Workspace, progress: Progress | None) -> Callable[[BinaryIO], None]:
        if progress is not None and _accepts(self.store.serialize, "progress"):
            return lambda out: self.store.serialize(ws, out, progress=progress)  # type: ignore[call-arg]
        return lambda out: self.store.serialize(ws, out)

    def _verifier(self, ws: Workspace) -> Callable[[Path], None] | None:
        verify = getattr(self.store, "verify", None)
        if verify is None:
            return None
        return lambda tmp: verify(ws, tmp)

    async def _save_source(self, ws: Workspace, progress: Progress | None = None) -> dict[str, Any]:
        if ws.source_path is None:
            raise BridgeError(ErrorCode.SAVE_AS_REQUIRED, "this workspace has no source file yet")
        revision = ws.revision  # stable: lifecycle admission blocks commits until we are done
        path = ws.source_path
        eng = self.engine

        def write_and_record() -> files.WriteResult | FileIdentity | None:
            own = getattr(self.store, "write_source", None)
            if own is not None:
                written: files.WriteResult | FileIdentity | None = own(ws, path, ws.source_identity)
            elif ws.source_identity is None:
                try:
                    written = files.publish_new(
                        path, self._serialiser(ws, progress), verify=self._verifier(ws)
                    )
                except BridgeError as exc:
                    if exc.code is ErrorCode.TARGET_EXISTS:
                        raise BridgeError(
                            ErrorCode.SOURCE_CHANGED,
                            f"'{path}' was created by another program since this workspace began",
                            data=exc.data,
                        ) from exc
                    raise
            else:
                written = files.atomic_write(
                    path,
                    self._serialiser(ws, progress),
                    backup=self.backup_on_save,
                    expected_identity=ws.source_identity,
                    changed_code=ErrorCode.SOURCE_CHANGED,
                    verify=self._verifier(ws),
                )
            # Recorded here, in the thread, right after the commit: even if our caller is cancelled the
            # workspace knows what is on disk (else the next save would see its own write as SOURCE_CHANGED).
            identity = written.identity if isinstance(written, files.WriteResult) else written
            with eng.lock:
                ws.source_identity = identity
                ws.saved_revision = revision
                rebind = getattr(self.store, "rebind", None)
                if rebind is not None:
                    try:
                        fresh = rebind(ws, path, identity)
                    except Exception as exc:  # on disk already: old source + overlay still equal the file
                        rebind_warnings.append(
                            f"saved, but re-reading the saved file failed: {type(exc).__name__}: {exc}"
                        )
                    else:
                        if fresh is not None:
                            ws.rebase(fresh)
            return written

        rebind_warnings: list[str] = []
        written = await run_uninterruptible(write_and_record)
        warnings = rebind_warnings + await self._after_save(ws, path)
        identity = written.identity if isinstance(written, files.WriteResult) else written
        backup = written.backup_path if isinstance(written, files.WriteResult) else None
        return {
            "writtenPath": str(path),
            "sourcePath": str(path),
            "savedRevision": revision,
            "revision": ws.revision,
            "sourceDirty": ws.dirty,
            "identity": None if identity is None else identity.to_dict(),
            "backupPath": None if backup is None else str(backup),
            "diskCommitted": True,
            "warnings": warnings,
        }

    async def _save_keys(self, op_id: str, ws: Workspace, keys: Sequence[str]) -> dict[str, Any]:
        key_path = getattr(self.store, "key_path", None)
        serialize_key = getattr(self.store, "serialize_key", None)
        if key_path is None or serialize_key is None:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CHANGE,
                "this kind saves its workspace as a whole, not key by key",
                "Save without keys.",
            )
        wanted = list(dict.fromkeys(ws.key_of(k) for k in keys))
        if not wanted:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "no keys to save", "Name the keys to save.")
        for key in wanted:
            if not ws.exists(key):  # a deleted key would need its file removed: not a save's business
                raise BridgeError(ErrorCode.NOT_FOUND, f"{ws.name(key)!r} is not in the workspace")
        await self.barrier.check(op_id, ws, "save", scope={"keys": [ws.name(k) for k in wanted]})
        revision = ws.revision  # stable: lifecycle admission blocks commits until we are done
        eng = self.engine
        known_of = getattr(ws.source, "identity_of", None)

        def write_all() -> dict[str, files.WriteResult]:
            done: dict[str, files.WriteResult] = {}
            for key in wanted:
                path = Path(key_path(ws, key))
                if key in ws.key_identities:
                    known = ws.key_identities[key]
                else:
                    known = known_of(key) if callable(known_of) else None

                def serialise(out: BinaryIO, key: str = key) -> None:
                    serialize_key(ws, key, out)

                if known is None:
                    try:
                        written = files.publish_new(path, serialise)
                    except BridgeError as exc:
                        if exc.code is ErrorCode.TARGET_EXISTS:
                            raise BridgeError(
                                ErrorCode.SOURCE_CHANGED,
                                f"'{path}' was created by another program since this workspace began",
                                data={**exc.data, "key": ws.name(key)},
                            ) from exc
                        raise
                else:
                    written = files.atomic_write(
                        path,
                        serialise,
                        backup=self.backup_on_save,
                        expected_identity=known,
                        changed_code=ErrorCode.SOURCE_CHANGED,
                    )
                # Recorded key by key, in the thread, right after each commit: a later key's failure or a
                # cancelled caller leaves every written key known as saved, with the identity on disk.
                with eng.lock:
                    ws.key_identities[key] = written.identity
                    ws.mark_keys_saved([key], revision)
                done[key] = written
            return done

        written = await run_uninterruptible(write_all)
        return {
            "savedKeys": [ws.name(k) for k in written],
            "writtenPaths": {ws.name(k): str(w.path) for k, w in written.items()},
            "identities": {ws.name(k): w.identity.to_dict() for k, w in written.items()},
            "savedRevision": revision,
            "revision": ws.revision,
            "sourceDirty": ws.dirty,
            "dirtyKeys": ws.dirty_keys(),
            "diskCommitted": True,
            "warnings": [],
        }

    async def _after_save(self, ws: Workspace, path: Path) -> list[str]:
        hook = getattr(self.store, "after_save", None)
        if hook is None:
            return []
        try:
            await run_uninterruptible(lambda: hook(ws, path))
        except Exception as exc:  # the file is on disk; report, never turn it into "not saved"
            return [f"saved, but maintenance after saving failed: {type(exc).__name__}: {exc}"]
        return []

    async def save_copy(
        self,
        target: Path | str,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        overwrite: bool = False,
        observed_identity: FileIdentity | dict[str, Any] | None = None,
        adopt: bool = False,
        caller: str = "ui",
        progress: Progress | None = None,
    ) -> dict[str, Any]:
        """Save-as: write a copy to `target`; the source path, `dirty` state and workspaceId stay as they are.

        `adopt=True` (for a new, untitled document): the copy becomes the workspace's source — later saves
        go there and the workspace is clean. The seed's archive semantics are the default (a copy only).
        """
        dest = self._check_copy_target(target)
        if isinstance(observed_identity, dict):
            observed_identity = FileIdentity.from_dict(observed_identity)
        if overwrite and observed_identity is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "overwrite needs the identity of the target you observed",
                "Retry without overwrite to get TARGET_EXISTS with the target's identity, then pass it.",
            )
        async with self._exclusive("save_as", refuse_export_plan=False) as op_id:
            ws = self.engine.check_lifecycle_identity(None, workspace_id, expected_revision)
            if ws is None:
                raise BridgeError(
                    ErrorCode.NO_WORKSPACE, "no workspace is open", data=self.engine.identity_data()
                )
            if ws.source_path is not None and (
                files.same_file(dest, ws.source_path)
                or os.path.normcase(dest) == os.path.normcase(ws.source_path)
            ):
                raise BridgeError(ErrorCode.SAME_AS_SOURCE, f"'{dest}' is the workspace's own source file")
            await self.barrier.check(op_id, ws, "save_as")
            revision = ws.revision

            def write() -> files.WriteResult:
                serialise = self._serialiser(ws, progress)
                if not overwrite:
                    written = files.publish_new(dest, serialise, verify=self._verifier(ws))
                else:
                    written = files.atomic_write(
                        dest,
                        serialise,
                        expected_identity=observed_identity,
                        changed_code=ErrorCode.TARGET_CHANGED,
                        verify=self._verifier(ws),
                    )
                if adopt:  # recorded in the thread, like a save: survives a cancelled caller
                    with self.engine.lock:
                        ws.source_path, ws.source_identity, ws.saved_revision = (
                            dest,
                            written.identity,
                            revision,
                        )
                return written

            written = await run_uninterruptible(write)
            result = {
                "writtenPath": str(dest),
                "sourcePath": None if ws.source_path is None else str(ws.source_path),
                "snapshotRevision": revision,
                "revision": ws.revision,
                "sourceDirty": ws.dirty,
                "identity": written.identity.to_dict(),
                "diskCommitted": True,
                "operationId": op_id,
                "caller": caller,
            }
            self.engine.bus.publish("workspace", {"event": "copy-saved", **_event_view(result)})
            return result

    def _check_copy_target(self, target: Path | str) -> Path:
        scope = self.engine.scope
        if scope is not None:
            dest = scope.resolve(str(target))
        else:
            raw = Path(target)
            if not raw.is_absolute():
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"{str(target)!r} is not an absolute path",
                    "Give the full path of the copy to write.",
                )
            # Resolve the parent (symlinks, `..`) but not the name itself: a symlink at the target is
            # a thing that exists there, to be refused or overwritten explicitly.
            dest = Path(os.path.realpath(raw.parent)) / raw.name
        if not dest.parent.is_dir():
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"the folder '{dest.parent}' does not exist",
                "Create the folder first, or choose an existing one.",
            )
        if dest.is_dir():
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, f"'{dest}' is a folder", "Give a file path to write the copy to."
            )
        return dest


def _event_view(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "identity"}
