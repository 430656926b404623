"""Tasks: states, monotonic progress, log ring paging and caps, cancel rules, occupancy, history."""

from __future__ import annotations

import asyncio
import threading

import pytest
from memkind import JsonStore

from deskbridge.core import limits
from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.plans import PlanKind, make_change
from deskbridge.core.tasks import LogRing, TaskManager, TaskState

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


async def test_async_task_succeeds_with_result_and_progress():
    tm = TaskManager(EventBus())

    async def work(h):
        h.progress(1, 3, "first")
        h.log("hello")
        h.progress(3, 3, "done")
        return {"planId": "script-1"}

    task = tm.start(work, owner="mcp:1", label="script run")
    assert task.state in (TaskState.QUEUED, TaskState.RUNNING)
    await tm.wait(task.id, 2)
    st = tm.status(task.id)
    assert st["state"] == "succeeded" and st["result"] == {"planId": "script-1"}
    assert st["progress"] == {"done": 3.0, "total": 3.0, "message": "done"}
    assert [e["text"] for e in st["log"]["entries"]] == ["hello"]


async def test_sync_work_runs_in_a_thread():
    tm = TaskManager(EventBus())
    seen = {}

    def work(h):
        seen["thread"] = threading.current_thread() is not threading.main_thread()
        return 42

    t = tm.start(work, owner="ui", label="sync")
    await tm.wait(t.id, 2)
    assert tm.status(t.id)["result"] == 42 and seen["thread"]


async def test_progress_never_goes_backwards():
    tm = TaskManager(EventBus())

    seen = []

    async def work(h):
        h.progress(5, 10)
        h.progress(2, 10, "late report")
        seen.append(tm.status(h.task_id)["progress"])  # while running: a succeeded task reads complete

    t = tm.start(work, owner="ui", label="p")
    await tm.wait(t.id, 2)
    assert seen == [{"done": 5.0, "total": 10.0, "message": "late report"}]


async def test_a_new_phase_restarts_progress_from_its_own_count():
    # A script run scans (140 of 150 files), then compiles its 20 changes: the compile's progress is its own.
    tm = TaskManager(EventBus())

    seen = []

    async def work(h):
        h.progress(140, 150, "scanning")
        h.progress(0, 20, "compiling changes", restart=True)
        h.progress(5, 20)
        seen.append(tm.status(h.task_id)["progress"])

    t = tm.start(work, owner="ui", label="p")
    await tm.wait(t.id, 2)
    assert seen == [{"done": 5.0, "total": 20.0, "message": "compiling changes"}]


async def test_status_answers_while_another_thread_holds_the_engine_lock():
    # The task manager shares the engine's lock; a script run's compile held it for 106 s on a one-million-file
    # archive and every pvf_script_status poll hung behind it.
    lock = threading.RLock()
    tm = TaskManager(EventBus(), lock=lock)

    async def work(h):
        h.progress(1, 2, "half")

    t = tm.start(work, owner="ui", label="p")
    await tm.wait(t.id, 2)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(10)
    try:
        answer = await asyncio.wait_for(asyncio.to_thread(tm.status, t.id), 30)  # a hang guard
        assert answer["progress"]["message"] == "half"
        assert not release.is_set() and holder.is_alive()  # answered while the lock was still held
    finally:
        release.set()
        holder.join()


async def test_failure_records_the_bridge_error_or_internal():
    tm = TaskManager(EventBus())

    async def bad(h):
        raise BridgeError(ErrorCode.SCRIPT_SYNTAX, "line 3")

    def crash(h):
        raise KeyError("boom")

    a, b = tm.start(bad, owner="ui", label="a"), tm.start(crash, owner="ui", label="b")
    await tm.wait(a.id, 2)
    await tm.wait(b.id, 2)
    assert tm.status(a.id)["error"]["code"] == "SCRIPT_SYNTAX"
    assert tm.status(b.id)["error"]["code"] == "INTERNAL" and "result" not in tm.status(b.id)


async def test_a_failed_or_cancelled_task_says_so_in_its_progress_line():
    # A script run failed while its progress still read "starting the sandbox" (QA, session 7).
    tm = TaskManager(EventBus())
    running = threading.Event()

    async def bad(h):
        h.progress(0, None, "starting the sandbox")
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the script failed")

    def loop(h):
        h.progress(3, 10, "scanning")
        running.set()
        while True:
            h.check_cancelled()
            threading.Event().wait(0.005)

    a, b = tm.start(bad, owner="ui", label="a"), tm.start(loop, owner="ui", label="b")
    await tm.wait(a.id, 2)
    await asyncio.to_thread(running.wait, 2)
    tm.cancel(b.id, "ui")
    await tm.wait(b.id, 5)
    assert tm.status(a.id)["progress"] == {"done": 0.0, "total": None, "message": "failed"}
    assert tm.status(b.id)["progress"] == {"done": 3.0, "total": 10.0, "message": "cancelled"}


async def test_progress_is_published_on_the_task_topic():
    bus = EventBus()
    tm = TaskManager(bus)

    async def work(h):
        h.progress(1, 2, "half")

    async with bus.subscribe("task") as sub:
        t = tm.start(work, owner="mcp:1", label="x")
        await tm.wait(t.id, 2)
        events = []
        while (e := sub.get_nowait()) is not None:
            events.append(e.data)
    assert [e["event"] for e in events] == ["queued", "started", "progress", "finished"]
    assert events[2]["progress"]["message"] == "half" and events[-1]["state"] == "succeeded"
    assert all(e["taskId"] == t.id and e["owner"] == "mcp:1" for e in events)


async def test_only_the_owner_or_the_ui_can_cancel():
    tm = TaskManager(EventBus())
    started = asyncio.Event()

    async def forever(h):
        started.set()
        await asyncio.sleep(3600)

    t = tm.start(forever, owner="mcp:1", label="long")
    await started.wait()
    with pytest.raises(BridgeError) as ei:
        tm.cancel(t.id, "mcp:2")
    assert ei.value.code == ErrorCode.ACCESS_DENIED
    tm.cancel(t.id, "mcp:1")
    await tm.wait(t.id, 2)
    assert tm.status(t.id)["state"] == "cancelled"
    t2 = tm.start(forever, owner="mcp:1", label="long")
    tm.cancel(t2.id, "ui")  # cancelled while still queued: never runs
    await tm.wait(t2.id, 2)
    assert tm.status(t2.id)["state"] == "cancelled" and tm.status(t2.id)["started"] is None


async def test_sync_work_is_cancelled_cooperatively_through_the_flag():
    tm = TaskManager(EventBus())
    running = threading.Event()

    def work(h):
        running.set()
        while True:
            h.check_cancelled()
            threading.Event().wait(0.005)

    t = tm.start(work, owner="ui", label="loop")
    await asyncio.to_thread(running.wait, 2)
    tm.cancel(t.id, "ui")
    await tm.wait(t.id, 5)
    assert tm.status(t.id)["state"] == "cancelled"


async def test_sync_work_that_ignores_the_flag_is_reported_as_what_happened():
    tm = TaskManager(EventBus())
    running, release = threading.Event(), threading.Event()

    def work(h):
        running.set()
        release.wait(5)
        return "wrote anyway"

    t = tm.start(work, owner="ui", label="stubborn")
    await asyncio.to_thread(running.wait, 2)
    assert tm.cancel(t.id, "ui")["cancelRequested"] is True
    release.set()
    await tm.wait(t.id, 5)
    assert tm.status(t.id)["state"] == "succeeded"  # its work did happen; never claim otherwise


async def test_non_cancellable_task_refuses_cancel():
    tm = TaskManager(EventBus())
    gate = asyncio.Event()

    async def commit(h):
        await gate.wait()

    t = tm.start(commit, owner="ui", label="save", cancellable=False)
    await asyncio.sleep(0)
    with pytest.raises(BridgeError) as ei:
        tm.cancel(t.id, "ui")
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT
    gate.set()
    await tm.wait(t.id, 2)


async def test_unknown_task_is_not_found():
    with pytest.raises(BridgeError) as ei:
        TaskManager(EventBus()).status("task-404")
    assert ei.value.code == ErrorCode.NOT_FOUND


async def test_at_most_one_write_task_runs_per_workspace():
    eng = Engine(JsonStore())
    await eng.open(None)
    gate = asyncio.Event()

    async def hold(h):
        await gate.wait()

    first = eng.start_task(hold, owner="mcp:1", label="import", write=True)
    with pytest.raises(BridgeError) as ei:
        eng.start_task(hold, owner="ui", label="script", write=True)
    assert ei.value.code == ErrorCode.TASK_BUSY and ei.value.data["taskId"] == first.id
    reader = eng.start_task(hold, owner="ui", label="search", write=False)  # reads are not limited
    gate.set()
    await eng.tasks.wait(first.id, 2)
    await eng.tasks.wait(reader.id, 2)
    second = eng.start_task(hold, owner="ui", label="script", write=True)  # slot released when finished
    await eng.tasks.wait(second.id, 2)


async def test_write_admission_is_atomic_under_threads():
    eng = Engine(JsonStore())
    await eng.open(None)
    gate = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def hold(h):
        await gate.wait()

    results = []

    def try_start():
        fut = asyncio.run_coroutine_threadsafe(_start(eng, hold), loop)
        results.append(fut.result(5))

    threads = [threading.Thread(target=try_start) for _ in range(8)]
    for th in threads:
        th.start()
    while len(results) < 8:
        await asyncio.sleep(0.01)
    for th in threads:
        th.join()
    assert sorted(r for r in results if r != "started") == ["TASK_BUSY"] * 7
    gate.set()


async def _start(eng, work):
    try:
        eng.start_task(work, owner="mcp:x", label="w", write=True)
        return "started"
    except BridgeError as exc:
        return str(exc.code)


async def test_finished_history_is_capped_and_expires_by_ttl(monkeypatch):
    monkeypatch.setattr(limits, "TASK_HISTORY_MAX", 3)
    clock = Clock()
    tm = TaskManager(EventBus(), clock=clock)

    async def nothing(h):
        return None

    ids = []
    for _ in range(4):
        t = tm.start(nothing, owner="ui", label="n")
        await tm.wait(t.id, 2)
        ids.append(t.id)
        clock.now += 1
    assert [t["taskId"] for t in tm.list()] == ids[1:]  # 3 kept at the cap, the oldest dropped
    clock.now += limits.TASK_HISTORY_TTL_S - 1  # the newest finished exactly TTL ago: still kept
    assert [t["taskId"] for t in tm.list()] == ids[-1:]
    clock.now += 1  # one second past the TTL
    assert tm.list() == []
    with pytest.raises(BridgeError):
        tm.status(ids[-1])


# -- log ring -------------------------------------------------------------------------------------------


def test_log_is_read_page_by_page_with_a_cursor():
    ring = LogRing()
    for i in range(5):
        ring.append(f"line {i}")
    page = ring.read(None, max_bytes=13)  # "line 0" is 6 bytes: two fit
    assert [e["text"] for e in page["entries"]] == ["line 0", "line 1"] and page["hasMore"]
    rest = ring.read(page["nextCursor"])
    assert [e["text"] for e in rest["entries"]] == ["line 2", "line 3", "line 4"]
    assert rest["hasMore"] is False and rest["truncated"] is False
    assert ring.read(rest["nextCursor"])["entries"] == []


def test_log_entry_over_the_cap_is_cut_and_at_the_cap_is_kept():
    ring = LogRing()
    at = ring.append("x" * limits.TASK_LOG_ENTRY_MAX_BYTES)
    past = ring.append("y" * (limits.TASK_LOG_ENTRY_MAX_BYTES + 1))
    assert at.text == "x" * limits.TASK_LOG_ENTRY_MAX_BYTES
    assert past.text.endswith("…[cut]") and past.size <= limits.TASK_LOG_ENTRY_MAX_BYTES


def test_log_keeps_exactly_max_entries_and_says_truncated():
    ring = LogRing()
    for i in range(limits.TASK_LOG_MAX_ENTRIES):
        ring.append(str(i))
    assert ring.read("0")["truncated"] is False
    ring.append("one past")
    page = ring.read("0")
    assert page["truncated"] is True and page["entries"][0]["text"] == "1"


def test_log_total_bytes_are_capped():
    ring = LogRing(total_max_bytes=100, entry_max_bytes=40)
    for _ in range(10):
        ring.append("z" * 30)
    assert sum(len(e["text"]) for e in ring.read(None, max_bytes=10_000)["entries"]) <= 100


def test_a_single_entry_larger_than_the_page_is_still_returned():
    ring = LogRing()
    ring.append("q" * 100)
    page = ring.read(None, max_bytes=10)
    assert len(page["entries"]) == 1 and page["hasMore"] is False


@pytest.mark.parametrize("cursor", ["abc", "-1"])
def test_bad_log_cursor_is_invalid(cursor):
    with pytest.raises(BridgeError) as ei:
        LogRing().read(cursor)
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


async def test_a_sync_tool_in_a_worker_thread_can_start_a_task_after_bind_loop():
    tm = TaskManager(EventBus())
    tm.bind_loop(asyncio.get_running_loop())

    async def work(h):
        return "ran on the loop"

    task = await asyncio.to_thread(tm.start, work, owner="mcp:1", label="from thread")
    await tm.wait(task.id, 2)
    assert tm.status(task.id)["result"] == "ran on the loop"


def test_start_from_a_thread_without_a_loop_is_a_clear_error():
    with pytest.raises(RuntimeError, match="bind_loop"):
        TaskManager(EventBus()).start(lambda h: None, owner="ui", label="x")


async def test_shutdown_cancels_what_it_may_and_waits_for_commits():
    eng = Engine(JsonStore())
    await eng.open(None)
    gate = asyncio.Event()
    committed = []

    async def long_read(h):
        await asyncio.sleep(3600)

    async def committing(h):
        await gate.wait()
        committed.append(True)

    reader = eng.start_task(long_read, owner="mcp:1", label="search")
    saver = eng.start_task(committing, owner="ui", label="save", cancellable=False)
    wid = eng.identity_data()["workspaceId"]
    plan = eng.create_plan(
        PlanKind.EDIT, owner="ui", workspace_id=wid, revision=1, changes=[make_change("k", None, "v")]
    )
    await asyncio.sleep(0)
    asyncio.get_running_loop().call_later(0.05, gate.set)
    out = await eng.shutdown(timeout_s=5)
    assert out == {"stillRunningTasks": [], "discardedPlans": [plan.id]}
    assert eng.tasks.status(reader.id)["state"] == "cancelled"
    assert eng.tasks.status(saver.id)["state"] == "succeeded" and committed == [True]


async def test_a_task_outliving_a_reopen_cannot_write_into_the_new_workspace():
    eng = Engine(JsonStore())
    first = await eng.open(None)
    gate = asyncio.Event()

    async def indexer(h):  # a background read task that commits its result at the end
        await gate.wait()
        return eng.commit("ui", h.workspace_id, {"index": "built for the old workspace"})

    task = eng.start_task(indexer, owner="ui", label="index")
    second = await eng.open(None, workspace_id=first["workspaceId"])
    gate.set()
    await eng.tasks.wait(task.id, 2)
    assert eng.tasks.status(task.id)["error"]["code"] == "STALE_WORKSPACE"
    with pytest.raises(BridgeError):
        eng.read(second["workspaceId"], "index")


async def test_a_succeeded_task_reads_complete_whatever_its_last_report_said():
    # A script run succeeded while its status still read 199 of 200: the work's last report came before its
    # last file, and a poller took the task for one still busy. Failed and cancelled tasks keep their count
    # (test_a_failed_or_cancelled_task_says_so_in_its_progress_line).
    tm = TaskManager(EventBus())

    async def almost(h):
        h.progress(199, 200, "scanning")

    async def counted_only(h):
        h.progress(37, None, "reading")

    async def silent(_h):
        return None

    tasks = [tm.start(w, owner="ui", label=w.__name__) for w in (almost, counted_only, silent)]
    for t in tasks:
        await tm.wait(t.id, 2)
    done_total = [(p["done"], p["total"]) for p in (tm.status(t.id)["progress"] for t in tasks)]
    assert done_total == [(200.0, 200.0), (37.0, 37.0), (1.0, 1.0)]
