"""REL-CONC: a hypothesis state machine interleaving the UI and an MCP caller against the engine.

Two callers edit, run write tasks that stay running across steps, build/apply/discard plans, retry
de-duplicated requests, and save/close/open — while another program sometimes rewrites the file. A plain
dict model predicts every outcome (ok or the exact error code). Invariants after every step:

* no lost update — the engine's view equals the model's view (every committed change stays visible
  until a later committed change replaces it), and the file on disk equals the model's disk;
* no applied stale plan — applying a plan whose base revision is not current must be `STALE_PLAN`
  (checked in the rule: the model knows the plan is stale);
* the revision advances by exactly one per commit, so it strictly increases;
* at most one write task runs.
"""

from __future__ import annotations

import asyncio
import inspect
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from memkind import JsonStore, read_json, write_json

from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError
from deskbridge.core.plans import PlanKind, make_change

CALLERS = st.sampled_from(["ui", "mcp:1"])
KEYS = ["a", "b", "c"]
KEY = st.sampled_from(KEYS)
VALUE = st.sampled_from(["x\n", "y\n", "z\n", "long line of text\n"])
POLICY = st.sampled_from(["reject", "save", "discard"])


class EngineMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="deskbridge-stateful-"))
        self.path = write_json(self.dir / "w.json", {"a": "1\n"})
        self.engine = Engine(JsonStore(), barrier_timeout_s=1)
        # the model
        self.open = False
        self.wid: str | None = None
        self.last_wid: str | None = None
        self.epoch = 0
        self.rev = 0
        self.saved_rev = 0
        self.view: dict[str, str] = {}
        self.disk: dict[str, str] = {"a": "1\n"}
        self.external = False
        self.plan: tuple[str, int, dict[str, str]] | None = None
        self.task: tuple[str, asyncio.Event, str, str] | None = None
        self.requests: dict[tuple[str, str], tuple[dict[str, str], int]] = {}
        self.revisions_seen: list[int] = []
        self.steps = 0

    def teardown(self) -> None:
        if self.task is not None:
            self.task[1].set()
            self.loop.run_until_complete(self.engine.tasks.wait(self.task[0], 5))
        self.loop.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers --------------------------------------------------------------------------------------------

    def attempt(self, fn):
        self.steps += 1

        async def go():
            r = fn()
            return await r if inspect.isawaitable(r) else r

        try:
            return "ok", self.loop.run_until_complete(go())
        except BridgeError as exc:
            return str(exc.code), exc

    def expect(self, got, expected: str):
        outcome, value = got
        assert outcome == expected, f"expected {expected}, got {outcome}: {value}"
        return value

    def committed(self, new_rev: int, changes: dict[str, str]) -> None:
        assert new_rev == self.rev + 1, f"revision jumped from {self.rev} to {new_rev}"
        self.rev = new_rev
        self.view.update(changes)
        self.revisions_seen.append(new_rev)

    @property
    def dirty(self) -> bool:
        return self.rev != self.saved_rev

    def lifecycle_refusal(self, *, dirty_policy: str | None) -> str | None:
        if self.task is not None:
            return "TASK_BUSY"
        if self.plan is not None:
            return "PLAN_PENDING"
        if dirty_policy is not None and self.dirty:
            if dirty_policy == "reject":
                return "UNSAVED_CHANGES"
            if dirty_policy == "save" and self.external:
                return "SOURCE_CHANGED"
        return None

    def opened(self, info) -> None:
        assert info["workspaceId"] != self.last_wid
        self.open, self.wid, self.last_wid = True, info["workspaceId"], info["workspaceId"]
        self.epoch += 1
        assert info["workspaceEpoch"] == self.epoch
        self.rev = self.saved_rev = 1
        self.revisions_seen = [1]
        self.view = dict(self.disk)
        self.known = dict(self.disk)
        """What the workspace last read from or wrote to the file."""
        self.external = False

    # -- rules ------------------------------------------------------------------------------------------------

    @initialize()
    def first_open(self) -> None:
        self.opened(self.expect(self.attempt(lambda: self.engine.open(self.path, expected_epoch=0)), "ok"))

    @rule(caller=CALLERS, key=KEY, value=VALUE, fresh=st.booleans())
    def edit(self, caller, key, value, fresh):
        wid = self.wid or self.last_wid
        got = self.attempt(
            lambda: self.engine.commit(
                caller, wid, {key: value}, expected_revision=self.rev if fresh else self.rev - 1
            )
        )
        if not self.open:
            self.expect(got, "NO_WORKSPACE")
        elif not fresh:
            self.expect(got, "STALE_WORKSPACE")
        else:
            self.committed(self.expect(got, "ok"), {key: value})

    @precondition(lambda self: self.open and self.steps % 3 == 0)  # a third as often as the other rules
    @rule(caller=CALLERS, key=KEY, value=VALUE)
    def start_write_task(self, caller, key, value):
        gate = asyncio.Event()
        engine = self.engine

        async def work(handle):
            await gate.wait()
            ident = engine.identity_data()
            return engine.commit(
                caller, ident["workspaceId"], {key: value}, expected_revision=ident["revision"]
            )

        got = self.attempt(lambda: engine.start_task(work, owner=caller, label="import", write=True))
        if self.task is not None:
            self.expect(got, "TASK_BUSY")
        elif self.plan is not None:
            self.expect(got, "PLAN_PENDING")
        else:
            self.task = (self.expect(got, "ok").id, gate, key, value)

    @precondition(lambda self: self.task is not None)
    @rule()
    def finish_write_task(self):
        task_id, gate, key, value = self.task
        gate.set()
        task = self.loop.run_until_complete(self.engine.tasks.wait(task_id, 5))
        assert task.state == "succeeded", task.error
        self.task = None
        self.committed(task.result, {key: value})

    @precondition(lambda self: self.open)
    @rule(
        caller=CALLERS,
        keys=st.lists(KEY, min_size=1, max_size=3, unique=True),
        value=VALUE,
        fresh=st.booleans(),
    )
    def create_plan(self, caller, keys, value, fresh):
        new = {k: value + k for k in keys}
        changes = [make_change(k, self.view.get(k), new[k]) for k in keys]
        got = self.attempt(
            lambda: self.engine.create_plan(
                PlanKind.SCRIPT,
                owner=caller,
                workspace_id=self.wid,
                revision=self.rev if fresh else self.rev - 1,
                changes=changes,
            )
        )
        if self.task is not None:
            self.expect(got, "TASK_BUSY")
        elif not fresh:
            self.expect(got, "STALE_WORKSPACE")
        elif self.plan is not None:
            self.expect(got, "PLAN_PENDING")
        else:
            self.plan = (self.expect(got, "ok").id, self.rev, new)

    @precondition(lambda self: self.plan is not None)
    @rule(caller=CALLERS, data=st.data(), give_expected=st.booleans())
    def apply_plan(self, caller, data, give_expected):
        plan_id, base_rev, new = self.plan
        keys = data.draw(st.lists(st.sampled_from(sorted(new)), min_size=1, unique=True))
        got = self.attempt(
            lambda: self.engine.apply_plan(
                plan_id,
                caller=caller,
                change_keys=keys,
                expected_revision=self.rev if give_expected else None,
            )
        )
        event(f"apply: task={self.task is not None} stale={base_rev != self.rev}")
        if self.task is not None:
            self.expect(got, "TASK_BUSY")
        elif base_rev != self.rev:
            self.expect(got, "STALE_PLAN")  # never applied: nothing in the model changes
        else:
            out = self.expect(got, "ok")
            self.committed(out["revision"], {k: new[k] for k in keys})
            self.plan = None

    # Rules are drawn uniformly; these extra entries raise the weight of finishing a task, building and
    # applying a plan, so runs reach plan applies (stale and fresh) often instead of idling behind a task.
    @precondition(lambda self: self.task is not None)
    @rule()
    def finish_write_task_too(self):
        self.finish_write_task()

    @precondition(lambda self: self.task is not None)
    @rule()
    def finish_write_task_three(self):
        self.finish_write_task()

    @precondition(lambda self: self.open)
    @rule(caller=CALLERS, keys=st.lists(KEY, min_size=1, max_size=3, unique=True), value=VALUE)
    def create_fresh_plan(self, caller, keys, value):
        self.create_plan(caller, keys, value, True)

    @precondition(lambda self: self.plan is not None)
    @rule(caller=CALLERS, data=st.data(), give_expected=st.booleans())
    def apply_plan_too(self, caller, data, give_expected):
        self.apply_plan(caller, data, give_expected)

    @precondition(lambda self: self.plan is not None)
    @rule(caller=CALLERS)
    def discard_plan(self, caller):
        self.expect(self.attempt(lambda: self.engine.discard_plan(self.plan[0], caller=caller)), "ok")
        self.plan = None

    @rule(caller=CALLERS, rid=st.sampled_from(["r1", "r2", "r3"]), key=KEY, value=VALUE)
    def deduplicated_edit(self, caller, rid, key, value):
        params = {"key": key, "value": value}
        wid = self.wid or self.last_wid

        async def call():
            return self.engine.commit(caller, wid, {key: value})

        got = self.attempt(lambda: self.engine.requests.run(caller, rid, params, call))
        known = self.requests.get((caller, rid))
        if known is not None:
            if known[0] == params:
                assert self.expect(got, "ok") == known[1]  # the original result, nothing re-applied
            else:
                self.expect(got, "REQUEST_CONFLICT")
        elif not self.open:
            self.expect(got, "NO_WORKSPACE")  # failures are not remembered
        else:
            rev = self.expect(got, "ok")
            self.committed(rev, {key: value})
            self.requests[(caller, rid)] = (params, rev)

    @rule(value=VALUE)
    def another_program_rewrites_the_file(self, value):
        self.disk = {"a": "external " + value}
        write_json(self.path, self.disk)
        # identity checks are content-aware: the same bytes written again are no change (a touch)
        self.external = self.disk != self.known

    @precondition(lambda self: self.open)
    @rule(caller=CALLERS)
    def save(self, caller):
        got = self.attempt(lambda: self.engine.save(workspace_id=self.wid, caller=caller))
        refusal = self.lifecycle_refusal(dirty_policy=None) or ("SOURCE_CHANGED" if self.external else None)
        if refusal:
            self.expect(got, refusal)
            return
        out = self.expect(got, "ok")
        assert out["savedRevision"] == self.rev
        self.disk, self.saved_rev = dict(self.view), self.rev
        self.known = dict(self.disk)

    @precondition(lambda self: self.open)
    @rule(caller=CALLERS, policy=POLICY)
    def close(self, caller, policy):
        got = self.attempt(
            lambda: self.engine.close(workspace_id=self.wid, dirty_policy=policy, caller=caller)
        )
        refusal = self.lifecycle_refusal(dirty_policy=policy)
        if refusal:
            self.expect(got, refusal)
            return
        self.expect(got, "ok")
        if self.dirty and policy == "save":
            self.disk = dict(self.view)
            self.known = dict(self.disk)
        self.open, self.wid = False, None
        self.epoch += 1
        self.plan = None

    @rule(caller=CALLERS, policy=POLICY, fresh_epoch=st.booleans())
    def open_again(self, caller, policy, fresh_epoch):
        epoch = self.epoch if fresh_epoch else self.epoch - 1
        got = self.attempt(
            lambda: self.engine.open(
                self.path, expected_epoch=epoch, workspace_id=self.wid, dirty_policy=policy, caller=caller
            )
        )
        # Order of checks: admission (task, plan), then identity, then the dirty policy.
        busy = self.lifecycle_refusal(dirty_policy=None)
        if busy:
            self.expect(got, busy)
            return
        if not fresh_epoch:
            self.expect(got, "STALE_WORKSPACE")
            return
        refusal = self.lifecycle_refusal(dirty_policy=policy) if self.open else None
        if refusal:
            self.expect(got, refusal)
            return
        if self.open and self.dirty and policy == "save":
            self.disk = dict(self.view)
            self.known = dict(self.disk)
        self.opened(self.expect(got, "ok"))

    # -- invariants -----------------------------------------------------------------------------------------

    @invariant()
    def no_lost_update(self):
        st_ = self.engine.status()
        assert st_["open"] == self.open and st_["workspaceEpoch"] == self.epoch
        if self.open:
            ws = self.engine.workspace
            assert st_["workspaceId"] == self.wid and st_["revision"] == self.rev
            assert {k: ws.read(k) for k in ws.all_keys()} == self.view
            assert st_["sourceDirty"] == self.dirty
        assert read_json(self.path) == self.disk

    @invariant()
    def revision_strictly_increases(self):
        assert all(a < b for a, b in zip(self.revisions_seen, self.revisions_seen[1:], strict=False))

    @invariant()
    def at_most_one_write_task_runs(self):
        running = [t for t in self.engine.tasks.list() if t["write"] and t["state"] in ("queued", "running")]
        assert len(running) <= 1
        assert (self.engine.status()["runningWriteTask"] is None) == (self.task is None)

    @invariant()
    def plan_slot_matches(self):
        pending = self.engine.status()["pendingPlan"]
        assert pending == (None if self.plan is None else self.plan[0])


EngineMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_engine_interleavings = EngineMachine.TestCase
