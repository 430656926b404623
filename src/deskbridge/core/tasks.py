"""Long operations as tasks: state, monotonic progress, a capped log read by cursor, result or error, cancel.

A task runs as an asyncio task on the engine's loop. Its work function receives a `TaskHandle` to report
progress, write log lines and poll for cancellation; it may be `async def` (cancelled with
`asyncio.Task.cancel` as well as the flag) or a plain function (run in a worker thread with
`asyncio.to_thread`; cancellation is cooperative — it must poll `handle.cancelled` or call
`handle.check_cancelled()`; a sync function that finishes anyway is reported as succeeded, because its
work did happen).

Ownership: only the owner (the caller that started it) or the UI may cancel a task (seed "取消按 MCP
所属 taskId 校验"). Occupancy — at most one running *write* task per workspace, checked and taken in the
same critical section as admission — is enforced by the `admit` hook the `Engine` passes in.

Progress and state changes are published on the event bus, topic `task`, so the UI and MCP progress
notifications follow along. A succeeded task's progress reads complete (done = total) whatever the work last
reported; a failed or cancelled one keeps what it reached. Finished tasks stay queryable for
`TASK_HISTORY_TTL_S`, at most `TASK_HISTORY_MAX` of them.

Thread-safety: `TaskHandle` methods may be called from worker threads (each task has a `threading.Lock`);
`TaskManager.start` runs on the event loop or, after `bind_loop`, from any thread; queries and `cancel` may
come from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode, internal
from deskbridge.core.events import EventBus

UI_CALLER = "ui"
"""The caller identity of the person at the web UI; may cancel any task."""


class TaskState(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED)


class TaskCancelled(Exception):
    """Raised by `TaskHandle.check_cancelled` inside a work function; ends the task as cancelled."""


# --------------------------------------------------------------------------------------------- log ring


@dataclass
class LogEntry:
    seq: int
    time: float
    text: str
    size: int


_CUT_MARK = " …[cut]"


class LogRing:
    """A task's log: newest entries kept within entry-count and byte caps, read page by page by cursor.

    The cursor is the sequence number of the next entry to read ('0' from the start). A read whose cursor
    points at entries already dropped says `truncated: true` and continues with the oldest kept entry.
    """

    def __init__(
        self,
        max_entries: int = limits.TASK_LOG_MAX_ENTRIES,
        entry_max_bytes: int = limits.TASK_LOG_ENTRY_MAX_BYTES,
        total_max_bytes: int = limits.TASK_LOG_TOTAL_MAX_BYTES,
    ) -> None:
        self.max_entries = max_entries
        self.entry_max_bytes = entry_max_bytes
        self.total_max_bytes = total_max_bytes
        self._entries: deque[LogEntry] = deque()
        self._bytes = 0
        self._next_seq = 0

    def append(self, text: str) -> LogEntry:
        raw = text.encode("utf-8", "replace")
        if len(raw) > self.entry_max_bytes:
            keep = self.entry_max_bytes - len(_CUT_MARK.encode())
            text = raw[:keep].decode("utf-8", "ignore") + _CUT_MARK
            raw = text.encode("utf-8")
        entry = LogEntry(self._next_seq, time.time(), text, len(raw))
        self._next_seq += 1
        self._entries.append(entry)
        self._bytes += entry.size
        while len(self._entries) > self.max_entries or self._bytes > self.total_max_bytes:
            self._bytes -= self._entries.popleft().size
        return entry

    @property
    def first_seq(self) -> int:
        return self._entries[0].seq if self._entries else self._next_seq

    def read(
        self, cursor: str | None = None, max_bytes: int = limits.TASK_LOG_PAGE_MAX_BYTES
    ) -> dict[str, Any]:
        """One page: `{entries, nextCursor, hasMore, truncated}`; at least one entry when any is unread."""
        try:
            start = int(cursor) if cursor not in (None, "") else 0
            if start < 0:
                raise ValueError
        except (TypeError, ValueError):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"log cursor {cursor!r} is not valid",
                "Pass the nextCursor of the previous read, or omit it to start over.",
            ) from None
        start = min(start, self._next_seq)
        truncated = start < self.first_seq
        out: list[dict[str, Any]] = []
        used = 0
        next_seq = max(start, self.first_seq)
        for entry in self._entries:
            if entry.seq < next_seq:
                continue
            if out and used + entry.size > max_bytes:
                break
            out.append({"seq": entry.seq, "time": entry.time, "text": entry.text})
            used += entry.size
            next_seq = entry.seq + 1
        return {
            "entries": out,
            "nextCursor": str(next_seq),
            "hasMore": next_seq < self._next_seq,
            "truncated": truncated,
        }


# --------------------------------------------------------------------------------------------- tasks


@dataclass
class Task:
    """Everything known about one task. Read it through `TaskManager.status`."""

    id: str
    label: str
    owner: str
    write: bool
    workspace_id: str | None
    cancellable: bool = True
    state: TaskState = TaskState.QUEUED
    done: float = 0.0
    total: float | None = None
    message: str | None = None
    result: Any = None
    error: dict[str, Any] | None = None
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished_at: float | None = None
    finished_mono: float | None = None
    log: LogRing = field(default_factory=LogRing)
    cancel_event: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    aio: asyncio.Task[Any] | None = None
    in_thread: bool = False
    done_event: asyncio.Event | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "taskId": self.id,
            "label": self.label,
            "owner": self.owner,
            "write": self.write,
            "workspaceId": self.workspace_id,
            "state": str(self.state),
            "cancellable": self.cancellable,
            "cancelRequested": self.cancel_event.is_set(),
            "progress": {"done": self.done, "total": self.total, "message": self.message},
            "created": self.created,
            "started": self.started,
            "finished": self.finished_at,
        }


class TaskHandle:
    """What a work function gets: report progress, log, and see whether cancellation was asked for."""

    def __init__(self, task: Task, publish: Callable[[Task, str], None]) -> None:
        self._task = task
        self._publish = publish

    @property
    def task_id(self) -> str:
        return self._task.id

    @property
    def workspace_id(self) -> str | None:
        """The workspace the task was admitted for: pass it to commits, so a task that outlives a
        reopen gets `STALE_WORKSPACE` instead of writing its old result into the new workspace."""
        return self._task.workspace_id

    def progress(
        self, done: float, total: float | None = None, message: str | None = None, *, restart: bool = False
    ) -> None:
        """Report progress. `done` never goes backwards (a smaller value is ignored, the message still shows),
        except that `restart` begins a new phase counted from `done` with its own `total` (None: not known
        yet) — a script run's scan, then its compile: without it the compile showed the scan's count over its
        own total, 140000 of 26295."""
        t = self._task
        with t.lock:
            t.done = float(done) if restart else max(t.done, float(done))
            if total is not None or restart:
                t.total = None if total is None else float(total)
            if message is not None:
                t.message = message
        self._publish(t, "progress")

    def log(self, text: str) -> None:
        with self._task.lock:
            self._task.log.append(str(text))

    @property
    def cancelled(self) -> bool:
        return self._task.cancel_event.is_set()

    def check_cancelled(self) -> None:
        if self._task.cancel_event.is_set():
            raise TaskCancelled()


Work = Callable[[TaskHandle], Any] | Callable[[TaskHandle], Awaitable[Any]]
Admit = Callable[[Task], None]
"""Called (under the engine's lock) before a task is registered; raises to refuse it and takes occupancy."""
Release = Callable[[Task], None]


def _noop(_task: Task) -> None:
    return None


class TaskManager:
    """Starts, tracks, cancels and forgets tasks; see the module docstring for the rules."""

    def __init__(
        self,
        bus: EventBus,
        *,
        lock: threading.RLock | None = None,
        admit: Admit = _noop,
        release: Release = _noop,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.bus = bus
        self.lock = lock or threading.RLock()
        self._admit = admit
        self._release = release
        self._clock = clock
        self._tasks: OrderedDict[str, Task] = OrderedDict()
        self._counter = itertools.count(1)
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """The loop tasks run on when `start` is called from a worker thread (set by any call on the loop)."""
        self._loop = loop

    # -- starting --------------------------------------------------------------------------------------

    def start(
        self,
        work: Work,
        *,
        owner: str,
        label: str,
        write: bool = False,
        workspace_id: str | None = None,
        cancellable: bool = True,
    ) -> Task:
        """Admit and start a task; returns at once (state queued or running).

        Callable on the event loop, or from a worker thread (a sync tool) once the loop is known — it was
        used on the loop before, or `bind_loop` was called.
        """
        try:
            loop = asyncio.get_running_loop()
            on_loop = True
            self._loop = loop
        except RuntimeError:
            if self._loop is None or self._loop.is_closed():
                raise RuntimeError("TaskManager.start from a thread needs bind_loop(loop) first") from None
            loop, on_loop = self._loop, False
        task = Task(
            id=f"task-{next(self._counter)}-{secrets.token_hex(4)}",
            label=label,
            owner=owner,
            write=write,
            workspace_id=workspace_id,
            cancellable=cancellable,
        )
        task.done_event = asyncio.Event()
        task.in_thread = not inspect.iscoroutinefunction(work)
        with self.lock:
            self._prune()
            self._admit(task)  # may raise TASK_BUSY / NOT_READY; nothing registered then
            self._tasks[task.id] = task
        self._publish(task, "queued")
        if on_loop:
            self._spawn(task, work)
        else:
            loop.call_soon_threadsafe(self._spawn, task, work)
        return task

    def _spawn(self, task: Task, work: Work) -> None:
        task.aio = asyncio.get_running_loop().create_task(self._run(task, work), name=task.id)

    async def _run(self, task: Task, work: Work) -> None:
        handle = TaskHandle(task, self._publish)
        try:
            with task.lock:
                if task.cancel_event.is_set():
                    raise TaskCancelled()
                task.state = TaskState.RUNNING
                task.started = time.time()
            self._publish(task, "started")
            if not task.in_thread:
                result = await work(handle)  # type: ignore[misc]
            else:
                result = await asyncio.to_thread(work, handle)
                if inspect.isawaitable(result):
                    result = await result
            self._finish(task, TaskState.SUCCEEDED, result=result)
        except (TaskCancelled, asyncio.CancelledError):
            self._finish(
                task, TaskState.CANCELLED, error={"code": "CANCELLED", "message": "the task was cancelled"}
            )
        except BridgeError as exc:
            self._finish(task, TaskState.FAILED, error=exc.to_dict())
        except Exception as exc:
            self._finish(task, TaskState.FAILED, error=internal(exc).to_dict())

    def _finish(
        self, task: Task, state: TaskState, *, result: Any = None, error: dict[str, Any] | None = None
    ) -> None:
        with self.lock:
            with task.lock:
                task.state = state
                task.result = result
                task.error = error
                if state is TaskState.SUCCEEDED:
                    # The work's last report may come before its last step (199 of 200) or never: a poller
                    # must read a succeeded task as complete. Without a known total the count is its own
                    # total, and a task that reported nothing reads 1 of 1 (0 of 0 is no fraction).
                    task.total = max(task.total or 0.0, task.done) or 1.0
                    task.done = task.total
                else:
                    # The last progress line was written while the work still went on ("starting the
                    # sandbox", "scanning 140 of 150"): a person or an agent polling it must not read a failed
                    # or cancelled task as still busy there.
                    task.message = "cancelled" if state is TaskState.CANCELLED else "failed"
                task.finished_at = time.time()
                task.finished_mono = self._clock()
            self._release(task)
        self._publish(task, "finished")
        if task.done_event is not None:
            task.done_event.set()

    # -- queries ---------------------------------------------------------------------------------------

    def get(self, task_id: str) -> Task:
        # A lookup never waits for the lock, which is the engine's: a long commit or a script run's compile
        # holds it for minutes on a big archive, and a status poll (pvf_script_status, pvf_task_status) hung
        # behind it. Reading one key of the dict is atomic; pruning waits for a call that finds the lock free.
        if self.lock.acquire(blocking=False):
            try:
                self._prune()
            finally:
                self.lock.release()
        task = self._tasks.get(task_id)
        if task is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no task {task_id!r}",
                "It finished too long ago or never existed; list the tasks to see the current ones.",
            )
        return task

    def status(
        self, task_id: str, log_cursor: str | None = None, log_max_bytes: int = limits.TASK_LOG_PAGE_MAX_BYTES
    ) -> dict[str, Any]:
        """Summary, result or error, and one page of the log from `log_cursor`."""
        task = self.get(task_id)
        with task.lock:
            out = task.summary()
            out["log"] = task.log.read(log_cursor, min(log_max_bytes, limits.TASK_LOG_PAGE_MAX_BYTES))
            if task.state is TaskState.SUCCEEDED:
                out["result"] = task.result
            if task.error is not None:
                out["error"] = task.error
        return out

    def list(self, owner: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            self._prune()
            tasks = list(self._tasks.values())
        return [t.summary() for t in tasks if owner is None or t.owner == owner]

    def running_write_task(self) -> Task | None:
        with self.lock:
            for t in self._tasks.values():
                if t.write and not t.state.finished:
                    return t
        return None

    async def wait(self, task_id: str, timeout: float | None = None) -> Task:
        """Wait until the task has finished; returns it (state, result, error)."""
        task = self.get(task_id)
        assert task.done_event is not None
        await asyncio.wait_for(task.done_event.wait(), timeout)
        return task

    # -- cancelling ------------------------------------------------------------------------------------

    def cancel(self, task_id: str, caller: str) -> dict[str, Any]:
        """Ask a task to stop. Only its owner or the UI may; a finished task is left as it is."""
        task = self.get(task_id)
        if caller != task.owner and caller != UI_CALLER:
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"task {task_id!r} belongs to another caller",
                "Only the caller that started a task, or the person in the UI, can cancel it.",
            )
        if task.state.finished:
            return task.summary()
        if not task.cancellable:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"task {task_id!r} ({task.label}) cannot be cancelled once started",
                "It is committing to disk; wait for it to finish (task status).",
            )
        task.cancel_event.set()
        # A queued task sees the flag when it starts (cancelling its asyncio task before its first step
        # would skip our bookkeeping). Async work is interrupted at its next await. Thread work only gets
        # the flag: cancelling the awaiting asyncio task would report "cancelled" while the thread kept
        # writing.
        if task.aio is not None and task.state is TaskState.RUNNING and not task.in_thread:
            self._call_on_loop(task, task.aio.cancel)
        self._publish(task, "cancel-requested")
        return task.summary()

    @staticmethod
    def _call_on_loop(task: Task, fn: Callable[[], Any]) -> None:
        loop = task.aio.get_loop() if task.aio is not None else None
        try:
            same = asyncio.get_running_loop() is loop
        except RuntimeError:
            same = False
        if same or loop is None:
            fn()
        else:
            loop.call_soon_threadsafe(fn)

    async def shutdown(self, timeout_s: float = 30.0) -> list[str]:
        """Cancel every cancellable task and wait (up to `timeout_s`) for all to finish — including the
        uncancellable ones, which are committing to disk. Returns the ids still running after the wait."""
        with self.lock:
            live = [t for t in self._tasks.values() if not t.state.finished]
        for t in live:
            if t.cancellable:
                with contextlib.suppress(BridgeError):
                    self.cancel(t.id, UI_CALLER)
        waits = [t.done_event.wait() for t in live if t.done_event is not None]
        if waits:
            await asyncio.wait([asyncio.ensure_future(w) for w in waits], timeout=timeout_s)
        return [t.id for t in live if not t.state.finished]

    # -- housekeeping ----------------------------------------------------------------------------------

    def _prune(self) -> None:
        """Forget finished tasks older than the TTL, then the oldest finished beyond the history cap."""
        now = self._clock()
        finished = [t for t in self._tasks.values() if t.state.finished]
        for t in finished:
            if t.finished_mono is not None and now - t.finished_mono > limits.TASK_HISTORY_TTL_S:
                del self._tasks[t.id]
        finished = [t for t in self._tasks.values() if t.state.finished]
        excess = len(finished) - limits.TASK_HISTORY_MAX
        for t in sorted(finished, key=lambda t: t.finished_mono or 0)[: max(0, excess)]:
            del self._tasks[t.id]

    def _publish(self, task: Task, event: str) -> None:
        with task.lock:
            data = task.summary()
        data["event"] = event
        self.bus.publish("task", data)
