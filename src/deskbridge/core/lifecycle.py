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
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, NamedTuple, Protocol, TypeVar

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
#   key_path(workspace, key) -> Path | None  and  serialize_key(workspace, key, out, snapshot) -> None
#       for kinds whose source is a folder of separate files, one per key (markdown: a folder of
#       documents): `save(keys=[…])` writes just those keys, each to its own file, with the lifecycle's
#       file identity check (`Workspace.key_identity`) and atomic replace, and records per key what is on
#       disk (`Workspace.key_saved`, `dirty_keys`). Admission is per key (`Engine.admit_key_save`): keys
#       save side by side and commits go on meanwhile; `serialize_key` writes the `snapshot` taken after
#       the draft barrier, never the value at write time. `key_path` None: the key has no file yet
#       (`SAVE_AS_REQUIRED`; `save_key_as` gives it one).
#   key_written(workspace, key) -> None
#       a per-key save or save-as committed `key` to its file (under `Engine.lock`, keep it short): state that
#       describes what is on disk moves on only now, never when `serialize_key` ran (the write may still fail
#       and leave the old file). Markdown: the line endings the next save matches its lines against.
#   barrier_scope(workspace, keys) -> dict
#       extra fields for the `prepare` event of a per-key save or save-as (markdown: the `docId` its
#       editors compare with the document they show), beside `keys`.
#   snapshot_key(workspace, key) -> Any
#       the hook that runs right after the draft barrier passed (every editor answered), for each key a
#       per-key save writes: the value to write (markdown: the collab text and its version). It runs
#       without `Engine.lock` (a kind's own authority may call into the engine under its lock); the
#       revision recorded as saved is read just before it, so a change landing meanwhile keeps the key
#       dirty, never the reverse. Default: `workspace.read(key)` under the lock.
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
            eng.end_lifecycle()
            self.barrier.release(op_id, outcome)

    @contextlib.contextmanager
    def _admitted_keys(self, keys: Sequence[str]) -> Iterator[str]:
        """Per-key admission (`Engine.admit_key_save`): `keys` are busy until the block ends."""
        eng = self.engine
        op_id = "op-" + secrets.token_hex(6)
        with eng.lock:
            eng.admit_key_save(keys)
            eng.saving_keys.update(keys)
        outcome = "failed"
        try:
            yield op_id
            outcome = "ok"
        finally:
            with eng.lock:
                eng.saving_keys.difference_update(keys)
            self.barrier.release(op_id, outcome)

    @contextlib.asynccontextmanager
    async def _exclusive_keys(self, keys: Sequence[str]) -> AsyncIterator[str]:
        with self._admitted_keys(keys) as op_id:
            yield op_id

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

    def open_first(self, path: Path | str, *, caller: str = "ui") -> dict[str, Any]:
        """Open `path` synchronously into an engine that has nothing open (a kind opening its folder when it
        is created, before any editor or caller exists): no workspace to settle, so no barrier and no dirty
        policy — otherwise the same admission, load and identity checks as `open`. Refused when one is open."""
        target = Path(path)
        if not target.is_absolute():
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{str(target)!r} is not an absolute path")
        eng = self.engine
        with eng.lock:
            if eng.workspace is not None:
                raise stale_open(eng)
            eng.admit_lifecycle("open", refuse_export_plan=True)
            eng.lifecycle_op = "open"
        try:
            source, identity = self._load(target)
            with eng.lock:
                ws = Workspace(source=source, source_path=target, source_identity=identity)
                eng.workspace = ws
                eng.epoch += 1
                info = {
                    "workspaceId": ws.id,
                    "workspaceEpoch": eng.epoch,
                    "revision": ws.revision,
                    "sourcePath": str(target),
                    "sourceDirty": False,
                    "caller": caller,
                    "previousWorkspaceId": None,
                }
        finally:
            eng.end_lifecycle()
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
        if not target.is_file():  # a folder source has no single identity; its kind checks its files
            return self.store.load(target, **kwargs), None
        return self._identity_checked(target, lambda: self.store.load(target, **kwargs))

    def _identity_checked(self, target: Path, load: Callable[[], T]) -> tuple[T, FileIdentity]:
        """`load()` of the file `target` with the identity it had before the read, checked after it."""
        identity_of = getattr(self.store, "file_identity", None) or files.file_identity
        identity = identity_of(target)
        source = load()
        if identity is not None:
            # The identity is the file we parsed only if nothing replaced or wrote it meanwhile: a stat
            # says so (only these fields are compared; hashing the file a second time added nothing).
            try:
                now: os.stat_result | None = target.stat()
            except FileNotFoundError:
                now = None
            if now is None or not files.stat_matches(now, identity):
                closer = getattr(source, "close", None)
                if callable(closer):
                    closer()
                raise BridgeError(
                    ErrorCode.SOURCE_CHANGED,
                    f"'{target}' changed on disk while it was being opened",
                    "Another program is writing it; wait until it has finished, then open it again.",
                )
        return source, identity

    # -- open of one key (a folder workspace's document) -------------------------------------------------

    async def open_key(
        self,
        path: Path | str | None,
        *,
        key: str,
        workspace_id: str,
        options: dict[str, Any] | None = None,
        caller: str = "ui",
    ) -> dict[str, Any]:
        """Open the file `path` as a new key `key` of a folder workspace (markdown: open one document), the
        other keys staying as they are; `path` None adds a key without a file (an untitled document).

        The per-key counterpart of `open`, admitted like `save(keys=…)` / `close_key` / `save_key_as`:

        * when the store says the file is open already (`find_key(workspace, path)`), that key is admitted
          (`NOT_READY` while it is being saved, saved-as or closed — the caller would be handed a key that
          is about to change file or go away) and returned with `opened: false`;
        * otherwise `key` is admitted and the store's `load_key(workspace, path, **options)` reads the file
          off the event loop; the file's identity is taken before the read and checked after it
          (`SOURCE_CHANGED` when another program wrote it meanwhile, like `open`);
        * under `Engine.lock` the store's `add_key(workspace, key, value, revision)` puts the value into the
          source, the revision advances by one (a new key is a change of the workspace, so no revision
          issued before names its content), the key is clean at that revision and its file's identity is
          recorded, once, in `Workspace.key_identities`. Two opens of one file that raced end with one key:
          the second finds the first's key (`find_key`) and returns it.

        No draft barrier: nothing an editor holds is settled by adding a key (a barrier guards a snapshot
        or a swap of what editors show; an open takes neither).
        """
        ws, target = self._open_key_checks(path, workspace_id)
        existing = self._find_key(ws, target)
        if existing is not None:
            with self._admitted_keys([existing]) as op_id:
                return self._key_open_info(op_id, ws, existing, target, opened=False, caller=caller)
        with self._admitted_keys([key]) as op_id:
            loaded = await run_uninterruptible(lambda: self._load_key(ws, target, options))
            return self._add_key(op_id, ws, key, target, loaded, caller)

    def open_key_now(
        self,
        path: Path | str | None,
        *,
        key: str,
        workspace_id: str,
        options: dict[str, Any] | None = None,
        caller: str = "ui",
    ) -> dict[str, Any]:
        """`open_key` reading on the calling thread: for a kind's start-up (its folder's front page, before
        any caller exists) and for a key without a file (nothing to read). Same admission and bookkeeping."""
        ws, target = self._open_key_checks(path, workspace_id)
        existing = self._find_key(ws, target)
        if existing is not None:
            with self._admitted_keys([existing]) as op_id:
                return self._key_open_info(op_id, ws, existing, target, opened=False, caller=caller)
        with self._admitted_keys([key]) as op_id:
            return self._add_key(op_id, ws, key, target, self._load_key(ws, target, options), caller)

    def _open_key_checks(self, path: Path | str | None, workspace_id: str) -> tuple[Workspace, Path | None]:
        if getattr(self.store, "load_key", None) is None or getattr(self.store, "add_key", None) is None:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CHANGE,
                "this kind opens its workspace as a whole, not key by key",
                "Open the workspace.",
            )
        target = None if path is None else Path(path)
        if target is not None and not target.is_absolute():
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{str(target)!r} is not an absolute path",
                "Give the full path of the file to open.",
            )
        return self._open_workspace(workspace_id, None), target

    def _find_key(self, ws: Workspace, target: Path | None) -> str | None:
        find = getattr(self.store, "find_key", None)
        if target is None or find is None:
            return None
        with self.engine.lock:
            return find(ws, target)

    def _load_key(
        self, ws: Workspace, target: Path | None, options: dict[str, Any] | None
    ) -> tuple[Any, FileIdentity | None]:
        kwargs = dict(options or {})
        if target is None:
            return self.store.load_key(ws, None, **kwargs), None  # type: ignore[attr-defined]
        return self._identity_checked(target, lambda: self.store.load_key(ws, target, **kwargs))  # type: ignore[attr-defined]

    def _add_key(
        self,
        op_id: str,
        ws: Workspace,
        key: str,
        target: Path | None,
        loaded: tuple[Any, FileIdentity | None],
        caller: str,
    ) -> dict[str, Any]:
        value, identity = loaded
        eng = self.engine
        with eng.lock:
            self._open_workspace(ws.id, None)  # still the workspace we were admitted in
            raced = self._find_key(ws, target)
            if raced is not None:  # the same file was opened meanwhile: one key per file
                return self._key_open_info(op_id, ws, raced, target, opened=False, caller=caller)
            if ws.exists(key):
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{ws.name(key)!r} is in the workspace already")
            revision = ws.note_changed([key])
            try:
                self.store.add_key(ws, key, value, revision)  # type: ignore[attr-defined]
            except BaseException:
                ws.forget_key(key)
                raise
            ws.mark_keys_saved([key], revision)
            ws.key_identities[ws.key_of(key)] = identity
            info = self._key_open_info(op_id, ws, key, target, opened=True, caller=caller)
        eng.bus.publish("workspace", {"event": "key-opened", **_event_view(info)})
        return info

    def _key_open_info(
        self, op_id: str, ws: Workspace, key: str, target: Path | None, *, opened: bool, caller: str
    ) -> dict[str, Any]:
        with self.engine.lock:
            identity = ws.key_identity(key)
            return {
                "operationId": op_id,
                "key": ws.name(key),
                "opened": opened,
                "path": None if target is None else str(target),
                "revision": ws.revision,
                "identity": None if identity is None else identity.to_dict(),
                "caller": caller,
            }

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
        if keys is not None:
            ws = self._open_workspace(workspace_id, expected_revision)
            wanted = self._saveable_keys(ws, keys)
            async with self._exclusive_keys(wanted) as op_id:
                self._open_workspace(workspace_id, expected_revision)  # still the one we checked
                self._saveable_keys(ws, wanted)  # and no key was closed before we were admitted
                result = await self._save_keys(op_id, ws, wanted)
                result.update(operationId=op_id, caller=caller)
                self.engine.bus.publish("workspace", {"event": "saved", **_event_view(result)})
                return result
        async with self._exclusive("save", refuse_export_plan=False) as op_id:
            ws = self._open_workspace(workspace_id, expected_revision)
            if ws.source_path is None:
                raise BridgeError(ErrorCode.SAVE_AS_REQUIRED, "this workspace has no source file yet")
            await self.barrier.check(op_id, ws, "save")
            result = await self._save_source(ws, progress)
            result.update(operationId=op_id, caller=caller)
            self.engine.bus.publish("workspace", {"event": "saved", **_event_view(result)})
            return result

    def _open_workspace(self, workspace_id: str, expected_revision: int | None) -> Workspace:
        ws = self.engine.check_lifecycle_identity(None, workspace_id, expected_revision)
        if ws is None:
            raise BridgeError(
                ErrorCode.NO_WORKSPACE, "no workspace is open", data=self.engine.identity_data()
            )
        return ws

    def _saveable_keys(self, ws: Workspace, keys: Sequence[str]) -> list[str]:
        if (
            getattr(self.store, "key_path", None) is None
            or getattr(self.store, "serialize_key", None) is None
        ):
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CHANGE,
                "this kind saves its workspace as a whole, not key by key",
                "Save without keys.",
            )
        wanted = list(dict.fromkeys(ws.key_of(k) for k in keys))
        if not wanted:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "no keys to save", "Name the keys to save.")
        with self.engine.lock:
            for key in wanted:
                if not ws.exists(key):  # a deleted key would need its file removed: not a save's business
                    raise BridgeError(ErrorCode.NOT_FOUND, f"{ws.name(key)!r} is not in the workspace")
        return wanted

    def _key_scope(self, ws: Workspace, keys: Sequence[str]) -> dict[str, Any]:
        hook = getattr(self.store, "barrier_scope", None)
        extra = hook(ws, keys) if hook is not None else {}
        return {**extra, "keys": [ws.name(k) for k in keys]}

    def _snapshot_keys(self, ws: Workspace, keys: Sequence[str]) -> tuple[int, dict[str, Any]]:
        """`(revision, key → value to write)`, taken after the draft barrier (see `Store.snapshot_key`)."""
        hook = getattr(self.store, "snapshot_key", None)
        with self.engine.lock:
            revision = ws.revision
            if hook is None:
                return revision, {k: ws.read(k) for k in keys}
        return revision, {k: hook(ws, k) for k in keys}

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
                    expected_identity=same_content_identity(path, ws.source_identity),
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

    async def close_key(
        self,
        key: str,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        dirty_policy: DirtyPolicy | str = DirtyPolicy.REJECT,
        caller: str = "ui",
    ) -> dict[str, Any]:
        """Close one key of a folder workspace (markdown: one open document), the others staying open.

        Admitted per key like a per-key save; the editors are asked first (draft barrier); then the dirty
        policy of the key: `reject` → `UNSAVED_CHANGES`, `save` → saved first, `discard` → dropped. The
        store's `close_key(workspace, key)` removes it from the source (under `Engine.lock`) and the
        workspace forgets its bookkeeping (`Workspace.forget_key`).
        """
        policy = DirtyPolicy.parse(dirty_policy)
        ws = self._open_workspace(workspace_id, expected_revision)
        with self.engine.lock:
            if not ws.exists(key):
                raise BridgeError(ErrorCode.NOT_FOUND, f"{ws.name(key)!r} is not in the workspace")
            k = ws.key_of(key)
        async with self._exclusive_keys([k]) as op_id:
            self._open_workspace(workspace_id, expected_revision)
            with self.engine.lock:
                if not ws.exists(k):  # closed by someone else before we were admitted
                    raise BridgeError(ErrorCode.NOT_FOUND, f"{ws.name(k)!r} is not in the workspace")
            await self.barrier.check(op_id, ws, "close", scope=self._key_scope(ws, [k]))
            dirty = ws.key_dirty(k)
            if dirty and policy is DirtyPolicy.REJECT:
                raise BridgeError(
                    ErrorCode.UNSAVED_CHANGES,
                    f"{ws.name(k)!r} has unsaved changes",
                    "Save it first, or close with dirtyPolicy 'save' or 'discard'.",
                    data={**self.engine.identity_data(), "key": ws.name(k)},
                )
            if dirty and policy is DirtyPolicy.SAVE:
                self._saveable_keys(ws, [k])
                await self._save_keys(op_id, ws, [k], asked=True)
            name = ws.name(k)
            with self.engine.lock:
                hook = getattr(self.store, "close_key", None)
                if hook is not None:
                    hook(ws, k)
                ws.forget_key(k)
            info = {
                "operationId": op_id,
                "key": name,
                "closed": True,
                "discarded": dirty and policy is DirtyPolicy.DISCARD,
                "revision": ws.revision,
                "sourceDirty": ws.dirty,
                "caller": caller,
            }
            self.engine.bus.publish("workspace", {"event": "key-closed", **info})
            return info

    def _key_written(self, ws: Workspace, key: str) -> None:
        """The store's `key_written` hook, once the key's file is on disk (under `Engine.lock`)."""
        hook = getattr(self.store, "key_written", None)
        if hook is not None:
            hook(ws, key)

    async def _save_keys(
        self, op_id: str, ws: Workspace, wanted: Sequence[str], *, asked: bool = False
    ) -> dict[str, Any]:
        key_path = self.store.key_path  # type: ignore[attr-defined]
        serialize_key = self.store.serialize_key  # type: ignore[attr-defined]
        paths = {}
        for key in wanted:
            path = key_path(ws, key)
            if path is None:
                raise BridgeError(
                    ErrorCode.SAVE_AS_REQUIRED,
                    f"{ws.name(key)!r} has no file yet",
                    "Save it with save-as first.",
                    data={"key": ws.name(key)},
                )
            paths[key] = Path(path)
        if not asked:  # a close that saves first has asked the editors already
            await self.barrier.check(op_id, ws, "save", scope=self._key_scope(ws, wanted))
        revision, snapshot = self._snapshot_keys(ws, wanted)
        eng = self.engine

        def write_all() -> dict[str, files.WriteResult]:
            done: dict[str, files.WriteResult] = {}
            for key in wanted:
                path = paths[key]
                with eng.lock:
                    known = ws.key_identity(key)

                def serialise(out: BinaryIO, key: str = key) -> None:
                    serialize_key(ws, key, out, snapshot[key])

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
                        expected_identity=same_content_identity(path, known),
                        changed_code=ErrorCode.SOURCE_CHANGED,
                    )
                # Recorded key by key, in the thread, right after each commit: a later key's failure or a
                # cancelled caller leaves every written key known as saved, with the identity on disk.
                with eng.lock:
                    ws.key_identities[key] = written.identity
                    ws.mark_keys_saved([key], revision)
                    self._key_written(ws, key)
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

    async def save_key_as(
        self,
        key: str,
        target: Path | str,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        overwrite: bool = False,
        observed_identity: FileIdentity | dict[str, Any] | None = None,
        caller: str = "ui",
        before_write: Callable[[Path, FileIdentity | None], Any] | None = None,
    ) -> dict[str, Any]:
        """Save-as of one key of a folder workspace: write it to `target`, which becomes the key's file.

        The key's later saves go to `target` (the store's `rebind_key(workspace, key, path)` records it, under
        `Engine.lock`) and the key is clean at the snapshot's revision. `TARGET_EXISTS` (with the target's
        identity) when something is there and `overwrite` is false; with `overwrite`, the file must still be
        `observed_identity` (`TARGET_CHANGED` otherwise). `before_write(target, observed)` runs after the
        barrier and the checks, before anything is written (a kind asks the person there); raising stops it.
        """
        if isinstance(observed_identity, dict):
            observed_identity = FileIdentity.from_dict(observed_identity)
        if overwrite and observed_identity is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "overwrite needs the identity of the target you observed",
                "Retry without overwrite to get TARGET_EXISTS with the target's identity, then pass it.",
            )
        rebind_key = getattr(self.store, "rebind_key", None)
        if rebind_key is None:
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CHANGE,
                "this kind has no per-key save-as",
                "Use save-as of the workspace.",
            )
        ws = self._open_workspace(workspace_id, expected_revision)
        (key,) = self._saveable_keys(ws, [key])
        dest = self._check_copy_target(target)
        current = self.store.key_path(ws, key)  # type: ignore[attr-defined]
        if current is not None and (
            files.same_file(dest, current) or os.path.normcase(dest) == os.path.normcase(current)
        ):
            raise BridgeError(ErrorCode.SAME_AS_SOURCE, f"'{dest}' is the key's own file")
        async with self._exclusive_keys([key]) as op_id:
            self._open_workspace(workspace_id, expected_revision)
            self._saveable_keys(ws, [key])
            await self.barrier.check(op_id, ws, "save_as", scope=self._key_scope(ws, [key]))
            if before_write is not None:
                await before_write(dest, observed_identity)
            revision, snapshot = self._snapshot_keys(ws, [key])
            eng = self.engine

            def write() -> files.WriteResult:
                def serialise(out: BinaryIO) -> None:
                    self.store.serialize_key(ws, key, out, snapshot[key])  # type: ignore[attr-defined]

                if not overwrite:
                    written = files.publish_new(dest, serialise)
                else:
                    written = files.atomic_write(
                        dest,
                        serialise,
                        expected_identity=same_content_identity(dest, observed_identity),
                        changed_code=ErrorCode.TARGET_CHANGED,
                    )
                with eng.lock:  # recorded in the thread, like a save: survives a cancelled caller
                    rebind_key(ws, key, dest)
                    ws.key_identities[key] = written.identity
                    ws.mark_keys_saved([key], revision)
                    self._key_written(ws, key)
                return written

            written = await run_uninterruptible(write)
            result = {
                "key": ws.name(key),
                "writtenPath": str(dest),
                "savedRevision": revision,
                "revision": ws.revision,
                "sourceDirty": ws.dirty,
                "dirtyKeys": ws.dirty_keys(),
                "identity": written.identity.to_dict(),
                "diskCommitted": True,
                "operationId": op_id,
                "caller": caller,
            }
            self.engine.bus.publish("workspace", {"event": "key-saved-as", **_event_view(result)})
            return result

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
        elif getattr(target, "confined_root", None) is not None:
            # Resolved by `core.paths.resolve_path` already, carrying its root: `core.files` re-checks the
            # folder chain against that root at write time (a folder swapped for a symlink meanwhile is
            # refused), which a realpath taken here could not (tests/core/test_files_toctou.py).
            dest = target  # type: ignore[assignment]
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


def stale_open(engine: Engine) -> BridgeError:
    return BridgeError(
        ErrorCode.STALE_WORKSPACE,
        "a workspace is open already; open the new one with its workspaceId (Engine.open)",
        data=engine.identity_data(),
    )


class OutsideChange(NamedTuple):
    """What `outside_change` found at a path we last knew as `known`."""

    changed: bool
    """The content on disk is not what we know (another program wrote, replaced or removed the file)."""
    gone: bool
    """Nothing is there any more (renamed or deleted)."""
    identity: FileIdentity | None
    """When not `changed`: the identity to record, `known` itself or, after a `touch`, the file's new one."""


def outside_change(path: Path, known: FileIdentity | None) -> OutsideChange:
    """Whether another program changed the file at `path` since we knew it as `known` (None: no file then).

    One stat when nothing changed (cheap enough for every request); the file is hashed only when the stat
    differs and the size does not. Content-aware on purpose: a writer's editor, sync client or backup tool
    bumps mtimes without changing a byte, and calling that a change would ask the person about a change that
    is not one. The one rule of the saves (`same_content_identity`) and of the kinds that watch their files
    for outside changes (markdown's documents, the pvf archive)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return OutsideChange(known is not None, True, None)
    except OSError:
        return OutsideChange(False, False, known)  # unreadable now: not evidence of a change
    if known is None:
        return OutsideChange(True, False, None)
    if files.stat_matches(st, known):
        return OutsideChange(False, False, known)
    if st.st_size != known.size:
        return OutsideChange(True, False, None)
    now = files.current_identity(path)
    if now is None:
        return OutsideChange(True, True, None)
    if now.scheme == known.scheme and now.sha256 == known.sha256:
        return OutsideChange(False, False, now)
    return OutsideChange(True, False, None)


def same_content_identity(path: Path, known: FileIdentity | None) -> FileIdentity | None:
    """The identity a write to `path` may expect when we last knew it as `known`: `known` itself, or the
    file's identity now when only its metadata changed (`outside_change`). A content change keeps `known`,
    so the write is refused as changed."""
    if known is None:
        return None
    seen = outside_change(path, known)
    return known if seen.changed or seen.identity is None else seen.identity


def _event_view(result: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in result.items() if k != "identity"}
