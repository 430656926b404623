"""The engine facade a kind composes: one workspace slot, its identity checks, commits, tasks, plans, lifecycle.

A kind creates one `Engine(store, bus)` and routes every UI, MCP and CLI operation through it, so all
callers share the same locks and state (ARCHITECTURE.md principle 1):

    engine = Engine(store, bus)
    info = await engine.open(path)                                   # workspaceId, epoch, revision
    rev = engine.commit("mcp:1", info["workspaceId"], {"a.txt": "new"}, expected_revision=info["revision"])
    plan = engine.create_plan(PlanKind.SCRIPT, owner="mcp:1", workspace_id=..., revision=..., changes=[...])
    engine.apply_plan(plan.id, caller="ui", change_keys=[...], expected_revision=...)
    await engine.save(workspace_id=...)

Locking: one `threading.RLock` (`Engine.lock`) guards the workspace slot, the epoch, admission
(lifecycle flag, write-task occupancy, plan slots) and every commit. Everything done under it is short
and synchronous — including a plan's `on_apply` callback, which must not block on I/O — so sync tools in
worker threads and async handlers on the loop can both call in. Long work (loading, serialising, task
bodies) runs outside the lock; the lifecycle flag, not the lock, keeps writers out meanwhile.

Admission rules (checked and taken in one critical section):

| operation                  | refused when                                                               |
|----------------------------|----------------------------------------------------------------------------|
| commit (edit)              | lifecycle running → NOT_READY; identity/revision → STALE_WORKSPACE           |
| write task                 | lifecycle → NOT_READY; write task running → TASK_BUSY; write plan → PLAN_PENDING |
| create plan                | lifecycle → NOT_READY; other write task → TASK_BUSY; slot taken → PLAN_PENDING / EXPORT_PLAN_PENDING; stale → STALE_WORKSPACE |
| apply plan                 | lifecycle → NOT_READY; other write task → TASK_BUSY; stale → STALE_PLAN / STALE_EXPORT |
| open / close / save / save-as | lifecycle → NOT_READY; write task → TASK_BUSY; write plan → PLAN_PENDING; (open/close) export plan → EXPORT_PLAN_PENDING |

Lifecycle operations wrapped in a task must be started with `write=False` (they take the lifecycle flag
instead of the write-task slot) and `cancellable=False` (a file replace cannot be undone half-way).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.files import FileIdentity
from deskbridge.core.lifecycle import DirtyPolicy, DraftBarrier, Lifecycle, Store
from deskbridge.core.plans import ApplyFn, Change, Plan, PlanBook, PlanKind, PlanState, PlanWarning
from deskbridge.core.policy import AccessScope
from deskbridge.core.requests import RequestLog
from deskbridge.core.tasks import Task, TaskManager, Work
from deskbridge.core.workspace import Workspace, stale_workspace

log = logging.getLogger(__name__)

_KEYS_IN_EVENT = 50


class Engine:
    """See the module docstring."""

    def __init__(
        self,
        store: Store,
        bus: EventBus | None = None,
        *,
        scope: AccessScope | None = None,
        clock: Callable[[], float] = time.monotonic,
        barrier_timeout_s: float = limits.UI_BARRIER_TIMEOUT_S,
        backup_on_save: bool = True,
    ) -> None:
        self.bus = bus or EventBus()
        self.scope = scope
        """When set, save-as targets are resolved inside it (else any absolute path with an existing folder)."""
        self.lock = threading.RLock()
        self.workspace: Workspace | None = None
        self.epoch = 0
        self.lifecycle_op: str | None = None
        self._after_lifecycle: list[Callable[[], None]] = []
        """What `after_lifecycle` deferred until the running lifecycle operation ends."""
        self.saving_keys: set[str] = set()
        """Keys a per-key save (`save(keys=…)`) is writing now: per-key saves of other keys run beside it;
        whole-workspace lifecycle operations wait for none of them but are refused (`NOT_READY`)."""
        self.plans = PlanBook(clock=clock)
        self.requests = RequestLog()
        self.tasks = TaskManager(self.bus, lock=self.lock, admit=self._admit_task, clock=clock)
        self.drafts = DraftBarrier(self.bus, barrier_timeout_s)
        self.lifecycle = Lifecycle(self, store, self.drafts, backup_on_save=backup_on_save)

    # -- identity ----------------------------------------------------------------------------------------

    def identity_data(self) -> dict[str, Any]:
        """The current `{workspaceId, workspaceEpoch, revision}` (ids None when nothing is open)."""
        with self.lock:
            ws = self.workspace
            return {
                "workspaceId": None if ws is None else ws.id,
                "workspaceEpoch": self.epoch,
                "revision": None if ws is None else ws.revision,
            }

    def status(self) -> dict[str, Any]:
        with self.lock:
            ws = self.workspace
            running = self.tasks.running_write_task()
            write_plan = self.plans.pending(PlanKind.SCRIPT)
            export_plan = self.plans.pending(PlanKind.EXPORT)
            return {
                "open": ws is not None,
                **self.identity_data(),
                "sourcePath": None if ws is None or ws.source_path is None else str(ws.source_path),
                "sourceDirty": False if ws is None else ws.dirty,
                "savedRevision": None if ws is None else ws.saved_revision,
                "lifecycle": self.lifecycle_op or ("save" if self.saving_keys else None),
                "runningWriteTask": None if running is None else running.id,
                "pendingPlan": None if write_plan is None else write_plan.id,
                "pendingExportPlan": None if export_plan is None else export_plan.id,
                "editors": self.drafts.clients(),
                "editorDrafts": self.drafts.reported_drafts(),
            }

    def current(self, workspace_id: str | None, expected_revision: int | None = None) -> Workspace:
        """The open workspace if it is `workspace_id` (at `expected_revision` when given)."""
        with self.lock:
            ws = self.workspace
            if ws is None:
                raise BridgeError(ErrorCode.NO_WORKSPACE, "no workspace is open", data=self.identity_data())
            if workspace_id != ws.id:
                raise stale_workspace(
                    f"workspace {workspace_id!r} is no longer open (now {ws.id})", self.identity_data()
                )
            if expected_revision is not None and expected_revision != ws.revision:
                raise stale_workspace(
                    f"the workspace is at revision {ws.revision}, not {expected_revision}",
                    self.identity_data(),
                )
            return ws

    def check_lifecycle_identity(
        self, expected_epoch: int | None, workspace_id: str | None, expected_revision: int | None
    ) -> Workspace | None:
        """Identity check for lifecycle operations; returns the open workspace (None when empty)."""
        with self.lock:
            if expected_epoch is not None and expected_epoch != self.epoch:
                raise stale_workspace(
                    f"the workspace epoch is {self.epoch}, not {expected_epoch}", self.identity_data()
                )
            if self.workspace is None:
                if workspace_id is not None:
                    raise stale_workspace(f"workspace {workspace_id!r} is closed", self.identity_data())
                return None
            if workspace_id is None:
                raise stale_workspace(
                    "a workspace is open; pass its workspaceId (and revision) to replace it",
                    self.identity_data(),
                )
            return self.current(workspace_id, expected_revision)

    # -- admission ---------------------------------------------------------------------------------------

    def _refuse_during_lifecycle(self) -> None:
        if self.lifecycle_op is not None:
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"a {self.lifecycle_op} operation is in progress",
                "Retry when it has finished (a second or two); the status tool shows it.",
                data={"operation": self.lifecycle_op},
            )

    def _refuse_other_write_task(self, task: Task | None) -> None:
        running = self.tasks.running_write_task()
        if running is not None and running is not task:
            raise BridgeError(
                ErrorCode.TASK_BUSY,
                f"write task {running.id} ({running.label}) is running",
                data={"taskId": running.id, "owner": running.owner},
            )

    def _admit_task(self, task: Task) -> None:
        self._refuse_during_lifecycle()
        if task.write:
            self._refuse_other_write_task(None)
            plan = self.plans.pending(PlanKind.SCRIPT)
            if plan is not None:
                raise BridgeError(
                    ErrorCode.PLAN_PENDING,
                    f"plan {plan.id} is pending",
                    data={"planId": plan.id, "owner": plan.owner},
                )

    def after_lifecycle(self, fn: Callable[[], None]) -> None:
        """Run `fn` once no lifecycle operation holds the workspace: now, or right after the running one ends.
        For a store's maintenance inside an operation that starts a task (the operation's own admission
        refuses every task: a save's after-save hook restarting the content index build)."""
        with self.lock:
            if self.lifecycle_op is not None:
                self._after_lifecycle.append(fn)
                return
        fn()

    def end_lifecycle(self) -> None:
        """Clear the running lifecycle operation (`Lifecycle` calls this), then run what waited for its end."""
        with self.lock:
            self.lifecycle_op = None
            waiting, self._after_lifecycle = self._after_lifecycle, []
        for fn in waiting:
            try:
                fn()
            except Exception:  # maintenance; the operation itself has already answered
                log.exception("work deferred until the end of a lifecycle operation failed")

    def admit_lifecycle(self, operation: str, *, refuse_export_plan: bool) -> None:
        """Called by `Lifecycle` under the lock before it sets `lifecycle_op`."""
        self._refuse_during_lifecycle()
        if self.saving_keys:
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"{len(self.saving_keys)} key(s) are being saved",
                "Retry when the save has finished (a second or two); the status tool shows it.",
                data={"operation": "save", "keys": sorted(self.saving_keys)[:_KEYS_IN_EVENT]},
            )
        self._refuse_admission_blockers(refuse_export_plan=refuse_export_plan)

    def admit_key_save(self, keys: Sequence[str]) -> None:
        """Called by `Lifecycle` under the lock before a per-key save takes `keys` into `saving_keys`.

        Admission is per key: a save of document B runs while document A is being saved, and commits go
        on meanwhile (the save writes the snapshot it took after the draft barrier). The same key is
        admitted once: a second save of a key being saved gets `NOT_READY`.
        """
        self._refuse_during_lifecycle()
        busy = sorted(k for k in keys if k in self.saving_keys)
        if busy:
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"{busy[0]!r} is being saved already",
                "Retry when that save has finished (a second or two).",
                data={"operation": "save", "keys": busy[:_KEYS_IN_EVENT]},
            )
        self._refuse_admission_blockers(refuse_export_plan=False)

    def _refuse_admission_blockers(self, *, refuse_export_plan: bool) -> None:
        self._refuse_other_write_task(None)
        plan = self.plans.pending(PlanKind.SCRIPT)
        if plan is not None:
            raise BridgeError(
                ErrorCode.PLAN_PENDING,
                f"plan {plan.id} is pending; apply or discard it first",
                data={"planId": plan.id, "owner": plan.owner},
            )
        if refuse_export_plan:
            export = self.plans.pending(PlanKind.EXPORT)
            if export is not None:
                raise BridgeError(
                    ErrorCode.EXPORT_PLAN_PENDING,
                    f"export plan {export.id} is pending; run or discard it first",
                    data={"planId": export.id, "owner": export.owner},
                )

    # -- reads and direct commits ---------------------------------------------------------------------------

    def read(self, workspace_id: str, key: str, expected_revision: int | None = None) -> dict[str, Any]:
        """`{value, revision}` of one key, read under the lock so value and revision belong together."""
        with self.lock:
            ws = self.current(workspace_id, expected_revision)
            return {"value": ws.read(key), "revision": ws.revision}

    def commit(
        self,
        caller: str,
        workspace_id: str,
        changes: Mapping[str, Any],
        *,
        expected_revision: int | None = None,
        source: str = "edit",
    ) -> int:
        """Commit changes (key → value | DELETED) directly; returns the new revision (advanced by one)."""
        if not changes:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "nothing to commit")
        with self.lock:
            self._refuse_during_lifecycle()
            ws = self.current(workspace_id, expected_revision)
            revision = ws.commit(changes)
        self._publish_commit(ws, revision, caller, list(changes), source)
        return revision

    def note_changed(
        self, caller: str, workspace_id: str, keys: Sequence[str], *, announce: bool = False
    ) -> int:
        """A source with its own authority changed `keys` (markdown: the collab log accepted an update).

        Advances the revision by one and marks the keys dirty (`Workspace.note_changed`) — never refused:
        the change has happened already, so refusing it during a save would only lose track of it (a
        per-key save wrote its snapshot, and a key changed after it stays dirty). `announce` publishes the
        `committed` event (a kind that announces its own fine-grained updates leaves it off).
        """
        with self.lock:
            ws = self.current(workspace_id)
            revision = ws.note_changed(keys)
        if announce:
            self._publish_commit(ws, revision, caller, list(keys), "edit")
        return revision

    def _publish_commit(
        self, ws: Workspace, revision: int, caller: str, keys: list[str], source: str
    ) -> None:
        self.bus.publish(
            "workspace",
            {
                "event": "committed",
                "workspaceId": ws.id,
                "revision": revision,
                "caller": caller,
                "source": source,
                "keyCount": len(keys),
                "keys": keys[:_KEYS_IN_EVENT],
                "sourceDirty": ws.dirty,
            },
        )

    # -- tasks ---------------------------------------------------------------------------------------------

    def start_task(
        self, work: Work, *, owner: str, label: str, write: bool = False, cancellable: bool = True
    ) -> Task:
        """Start a task (see `core.tasks`; from a worker thread after `tasks.bind_loop`); write tasks take the one write slot."""
        ws_id = self.identity_data()["workspaceId"]
        return self.tasks.start(
            work, owner=owner, label=label, write=write, workspace_id=ws_id, cancellable=cancellable
        )

    # -- plans ---------------------------------------------------------------------------------------------

    def create_plan(
        self,
        kind: PlanKind,
        *,
        owner: str,
        workspace_id: str,
        revision: int,
        changes: Iterable[Change],
        warnings: Sequence[PlanWarning] = (),
        on_apply: ApplyFn | None = None,
        summary: Mapping[str, Any] | None = None,
        task: Task | None = None,
    ) -> Plan:
        """Register a plan built on (`workspace_id`, `revision`); `task` is the write task building it, if any."""
        with self.lock:
            self._refuse_during_lifecycle()
            self._refuse_other_write_task(task)
            self.current(workspace_id, revision)  # a plan stale at birth is refused, not stored
            plan = self.plans.create(
                kind,
                owner=owner,
                workspace_id=workspace_id,
                revision=revision,
                changes=changes,
                warnings=warnings,
                on_apply=on_apply,
                summary=summary,
            )
            info = self.plans.info(plan)
        self.bus.publish("plan", {"event": "created", **_plan_event(info)})
        return plan

    def get_plan(self, plan_id: str, kind: PlanKind | None = None) -> dict[str, Any]:
        with self.lock:
            return self.plans.info(self.plans.get(plan_id, kind))

    def preview_plan(
        self,
        plan_id: str,
        cursor: str | None = None,
        limit: int | None = None,
        *,
        kind: PlanKind | None = None,
        key_filter: str | None = None,
    ) -> dict[str, Any]:
        with self.lock:
            plan = self.plans.get(plan_id, kind)
            return self.plans.preview(plan, cursor, limit, key_filter=key_filter)

    def check_apply(
        self,
        plan_id: str,
        *,
        change_keys: Sequence[str],
        expected_revision: int | None = None,
        acknowledged_warning_ids: Iterable[str] = (),
        kind: PlanKind | None = None,
    ) -> None:
        """Raise what `apply_plan` would raise for this selection (unknown, applied or stale plan, unknown
        keys, warnings not acknowledged), changing nothing: run before the person is asked to approve it."""
        with self.lock:
            self._selection(plan_id, kind, change_keys, expected_revision, acknowledged_warning_ids)

    def _selection(
        self,
        plan_id: str,
        kind: PlanKind | None,
        change_keys: Sequence[str],
        expected_revision: int | None,
        acknowledged_warning_ids: Iterable[str],
    ) -> tuple[Any, Any, list[Any]]:
        """The pending, current plan and the validated selection; the caller holds the lock."""
        plan = self.plans.get(plan_id, kind)
        if plan.state is not PlanState.PENDING:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"plan {plan_id} is {plan.state}",
                "Build a new plan.",
                data={"state": str(plan.state)},
            )
        ws = self.workspace
        stale_code = ErrorCode.STALE_EXPORT if plan.kind is PlanKind.EXPORT else ErrorCode.STALE_PLAN
        current_rev = None if ws is None else ws.revision
        if (
            ws is None
            or ws.id != plan.workspace_id
            or ws.revision != plan.revision
            or (expected_revision is not None and expected_revision != ws.revision)
        ):
            raise BridgeError(
                stale_code,
                f"plan {plan_id} was built on revision {plan.revision}; the workspace is now at "
                f"{current_rev}"
                + ("" if expected_revision is None else f" (you expected {expected_revision})"),
                data={"planRevision": plan.revision, **self.identity_data()},
            )
        selected = self.plans.select(plan, change_keys, acknowledged_warning_ids)
        return plan, ws, selected

    def apply_plan(
        self,
        plan_id: str,
        *,
        caller: str,
        change_keys: Sequence[str],
        expected_revision: int | None = None,
        acknowledged_warning_ids: Iterable[str] = (),
        kind: PlanKind | None = None,
        task: Task | None = None,
    ) -> dict[str, Any]:
        """Apply the selected changes (all-or-nothing) and advance the revision exactly once.

        Export plans: checked for staleness (`STALE_EXPORT`), then `on_apply` runs and its return value is
        the result; nothing is committed and the revision does not move.
        """
        with self.lock:
            self._refuse_during_lifecycle()
            self._refuse_other_write_task(task)
            plan, ws, selected = self._selection(
                plan_id, kind, change_keys, expected_revision, acknowledged_warning_ids
            )
            if plan.kind is PlanKind.EXPORT:
                result = plan.on_apply(selected) if plan.on_apply is not None else None
                plan.state = PlanState.APPLIED
                out = {"planId": plan.id, "applied": len(selected), "revision": ws.revision, "result": result}
                revision = None
            else:
                mapping = plan.on_apply(selected) if plan.on_apply is not None else None
                if mapping is None:
                    mapping = {c.key: c.new for c in selected}
                revision = ws.commit(mapping)
                plan.state = PlanState.APPLIED
                plan.applied_revision = revision
                out = {
                    "planId": plan.id,
                    "applied": len(selected),
                    "dropped": len(plan.changes) - len(selected),
                    "revision": revision,
                    "sourceDirty": ws.dirty,
                }
        if revision is not None:
            self._publish_commit(ws, revision, caller, [c.key for c in selected], f"plan:{plan.kind}")
        self.bus.publish(
            "plan",
            {
                "event": "applied",
                "planId": plan.id,
                "kind": str(plan.kind),
                "caller": caller,
                "revision": out["revision"],
                "applied": len(selected),
            },
        )
        return out

    def discard_plan(self, plan_id: str, *, caller: str, kind: PlanKind | None = None) -> dict[str, Any]:
        """Drop a plan (any caller may: UI and MCP share plans); discarding twice is harmless."""
        with self.lock:
            plan = self.plans.get(plan_id, kind)
            if plan.state is PlanState.PENDING:
                plan.state = PlanState.DISCARDED
            info = self.plans.info(plan)
        self.bus.publish("plan", {"event": "discarded", "planId": plan_id, "caller": caller})
        return info

    async def shutdown(self, timeout_s: float = 30.0) -> dict[str, Any]:
        """Stop serving: cancel cancellable tasks, wait for uncancellable commits, drop pending plans.

        The workspace itself stays as it is (unsaved changes are not touched); returns what was done.
        """
        still_running = await self.tasks.shutdown(timeout_s)
        dropped = []
        with self.lock:
            for kind in (PlanKind.SCRIPT, PlanKind.EXPORT):
                plan = self.plans.pending(kind)
                if plan is not None:
                    plan.state = PlanState.DISCARDED
                    dropped.append(plan.id)
        for plan_id in dropped:
            self.bus.publish("plan", {"event": "discarded", "planId": plan_id, "caller": "shutdown"})
        return {"stillRunningTasks": still_running, "discardedPlans": dropped}

    # -- lifecycle -----------------------------------------------------------------------------------------

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
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        return await self.lifecycle.open(
            path,
            expected_epoch=expected_epoch,
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            dirty_policy=dirty_policy,
            caller=caller,
            options=options,
            progress=progress,
        )

    async def close(
        self,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        dirty_policy: DirtyPolicy | str = DirtyPolicy.REJECT,
        caller: str = "ui",
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        return await self.lifecycle.close(
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            dirty_policy=dirty_policy,
            caller=caller,
            progress=progress,
        )

    async def save(
        self,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        keys: Sequence[str] | None = None,
        caller: str = "ui",
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        return await self.lifecycle.save(
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            keys=keys,
            caller=caller,
            progress=progress,
        )

    async def open_key(
        self,
        path: Path | str | None,
        *,
        key: str,
        workspace_id: str,
        options: dict[str, Any] | None = None,
        caller: str = "ui",
    ) -> dict[str, Any]:
        return await self.lifecycle.open_key(
            path, key=key, workspace_id=workspace_id, options=options, caller=caller
        )

    def open_key_now(
        self,
        path: Path | str | None,
        *,
        key: str,
        workspace_id: str,
        options: dict[str, Any] | None = None,
        caller: str = "ui",
    ) -> dict[str, Any]:
        return self.lifecycle.open_key_now(
            path, key=key, workspace_id=workspace_id, options=options, caller=caller
        )

    async def close_key(
        self,
        key: str,
        *,
        workspace_id: str,
        expected_revision: int | None = None,
        dirty_policy: DirtyPolicy | str = DirtyPolicy.REJECT,
        caller: str = "ui",
    ) -> dict[str, Any]:
        return await self.lifecycle.close_key(
            key,
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            dirty_policy=dirty_policy,
            caller=caller,
        )

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
        return await self.lifecycle.save_key_as(
            key,
            target,
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            overwrite=overwrite,
            observed_identity=observed_identity,
            caller=caller,
            before_write=before_write,
        )

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
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        return await self.lifecycle.save_copy(
            target,
            workspace_id=workspace_id,
            expected_revision=expected_revision,
            overwrite=overwrite,
            observed_identity=observed_identity,
            adopt=adopt,
            caller=caller,
            progress=progress,
        )


def _plan_event(info: dict[str, Any]) -> dict[str, Any]:
    return {k: info[k] for k in ("planId", "kind", "owner", "workspaceId", "revision", "changeCount")}
