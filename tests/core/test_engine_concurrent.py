"""REL-CONC: truly concurrent callers (UI + two MCP callers, some in worker threads) against one engine.

Unlike the state machine, operations here overlap at every await point (a save waiting for its disk
thread, a caller sleeping between read and write, a task committing mid-way). Nothing predicts single
outcomes; instead the history must be linearizable:

* every workspace's commits have the revisions 2, 3, 4, … exactly once each (one revision per commit);
* replaying the commits in revision order gives exactly the final view (no lost update), and every
  saved file holds exactly the replay up to the revision it was saved at;
* every applied plan was built on the revision right before the one its apply produced (no stale plan);
* never two write tasks at once.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import defaultdict

import pytest
from memkind import JsonStore, write_json

from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.plans import PlanKind, make_change

pytestmark = pytest.mark.anyio

KEYS = ["a", "b", "c", "d"]
ROUNDS = int(os.environ.get("DESKBRIDGE_CONC_ROUNDS", "120"))
EXPECTED_REFUSALS = {
    ErrorCode.STALE_WORKSPACE,
    ErrorCode.STALE_PLAN,
    ErrorCode.NOT_READY,
    ErrorCode.TASK_BUSY,
    ErrorCode.PLAN_PENDING,
    ErrorCode.UNSAVED_CHANGES,
    ErrorCode.NO_WORKSPACE,
    ErrorCode.NOT_FOUND,
}


class RecordingStore(JsonStore):
    """Remembers what each load returned and what each serialisation wrote, with the revision."""

    def __init__(self) -> None:
        super().__init__()
        self.last_loaded: dict[str, str] = {}
        self.serialised: list[tuple[str, int, dict[str, str]]] = []

    def load(self, path):
        source = super().load(path)
        self.last_loaded = {k: source.get(k) for k in source.all_keys()}
        return source

    def serialize(self, workspace, out):
        self.serialised.append(
            (workspace.id, workspace.revision, {k: workspace.read(k) for k in workspace.all_keys()})
        )
        super().serialize(workspace, out)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_interleavings_are_linearizable(tmp_path, seed):
    rng = random.Random(seed)
    store = RecordingStore()
    eng = Engine(store)
    path = write_json(tmp_path / "w.json", {"a": "0"})
    first = await eng.open(path)
    base = {first["workspaceId"]: dict(store.last_loaded)}
    commits: dict[str, list[tuple[int, dict[str, str]]]] = defaultdict(list)
    plan_applies: list[tuple[int, int]] = []
    writers = {"now": 0, "max": 0}
    saves: list[tuple[str, int]] = []

    def ident():
        d = eng.identity_data()
        return d["workspaceId"], d["revision"]

    async def nap():
        await asyncio.sleep(rng.random() * 0.002)

    async def edit(caller):
        wid, _ = ident()
        key = rng.choice(KEYS)
        snap = (
            eng.read(wid, key)
            if eng.workspace and eng.workspace.exists(key)
            else {"value": "", "revision": ident()[1]}
        )
        await nap()
        value = f"{snap['value']}|{caller}"
        if rng.random() < 0.5:
            rev = await asyncio.to_thread(
                eng.commit, caller, wid, {key: value}, expected_revision=snap["revision"]
            )
        else:
            rev = eng.commit(caller, wid, {key: value}, expected_revision=snap["revision"])
        commits[wid].append((rev, {key: value}))

    plans: dict[str, tuple[str, int, dict[str, str]]] = {}

    async def build_plan(caller):
        wid, rev = ident()
        keys = rng.sample(KEYS, rng.randint(1, 3))
        new = {k: f"plan:{caller}:{rev}:{k}" for k in keys}
        ws = eng.workspace
        changes = [make_change(k, ws.read(k) if ws and ws.exists(k) else None, new[k]) for k in keys]
        plan = eng.create_plan(PlanKind.SCRIPT, owner=caller, workspace_id=wid, revision=rev, changes=changes)
        plans[plan.id] = (wid, rev, new)
        await nap()
        if rng.random() < 0.5:
            await apply_pending(caller)  # usually its author applies it; else someone else will

    async def apply_pending(caller):
        """Apply whatever plan is pending — the UI applying an AI's plan, or the author its own."""
        plan_id = eng.status()["pendingPlan"]
        if plan_id is None:
            return
        wid, built, new = plans[plan_id]
        chosen = rng.sample(sorted(new), rng.randint(1, len(new)))
        expected = None if rng.random() < 0.5 else built  # None: the plan's own base revision decides
        try:
            out = eng.apply_plan(plan_id, caller=caller, change_keys=chosen, expected_revision=expected)
        except BridgeError as exc:
            if exc.code == ErrorCode.STALE_PLAN:
                eng.discard_plan(plan_id, caller=caller)
            raise
        commits[wid].append((out["revision"], {k: new[k] for k in chosen}))
        plan_applies.append((built, out["revision"]))

    async def discard_pending(caller):
        plan_id = eng.status()["pendingPlan"]
        if plan_id is not None:
            eng.discard_plan(plan_id, caller=caller)

    async def write_task(caller):
        gate_key = rng.choice(KEYS)

        async def work(handle):
            writers["now"] += 1
            writers["max"] = max(writers["max"], writers["now"])
            try:
                await nap()
                wid, rev = handle.workspace_id, eng.identity_data()["revision"]
                value = f"task:{caller}:{rev}"
                new_rev = eng.commit(caller, wid, {gate_key: value}, expected_revision=rev)
                commits[wid].append((new_rev, {gate_key: value}))
            finally:
                writers["now"] -= 1

        task = eng.start_task(work, owner=caller, label="import", write=True)
        await eng.tasks.wait(task.id, 10)

    async def save(caller):
        wid, _ = ident()
        out = await eng.save(workspace_id=wid, caller=caller)
        saves.append((wid, out["savedRevision"]))

    async def reopen(caller):
        wid, rev = ident()
        policy = rng.choice(["reject", "save", "discard"])
        info = await eng.open(
            path, workspace_id=wid, expected_revision=rev, dirty_policy=policy, caller=caller
        )
        base[info["workspaceId"]] = dict(store.last_loaded)

    ops = [edit, edit, edit, build_plan, build_plan, apply_pending, discard_pending, write_task, save, reopen]

    async def caller_loop(name):
        for _ in range(ROUNDS):
            op = rng.choice(ops)
            try:
                await op(name)
            except BridgeError as exc:
                assert exc.code in EXPECTED_REFUSALS, exc
            await asyncio.sleep(0)

    def exercised() -> bool:
        return (
            sum(len(v) for v in commits.values()) >= 10
            and bool(plan_applies)
            and bool(saves)
            and len(base) > 1
        )

    # Thread timing decides which operations get refused, so one pass of a seed may, rarely, never reopen (seen
    # in CI). Keep interleaving, with the same seeded choices continuing, until every path was taken (bounded).
    for _ in range(5):
        await asyncio.gather(caller_loop("ui"), caller_loop("mcp:1"), caller_loop("mcp:2"))
        if exercised():
            break

    def replay(wid, upto=None):
        view = dict(base[wid])
        for rev, change in sorted(commits[wid]):
            if upto is None or rev <= upto:
                view.update(change)
        return view

    for wid, items in commits.items():
        revs = sorted(r for r, _ in items)
        assert revs == list(range(2, 2 + len(revs))), f"{wid}: revisions {revs}"
    for wid, rev, data in store.serialised:
        assert data == replay(wid, rev), f"saved file of {wid}@{rev} lost an update"
    final_wid, final_rev = ident()
    ws = eng.workspace
    assert {k: ws.read(k) for k in ws.all_keys()} == replay(final_wid)
    assert final_rev == 1 + len(commits[final_wid])
    assert all(applied == built + 1 for built, applied in plan_applies)
    assert writers["max"] <= 1
    # the run must have exercised the interesting paths, or it proves nothing
    print(
        f"REL-CONC seed {seed}: commits={sum(len(v) for v in commits.values())} plan_applies={len(plan_applies)} "
        f"saves={len(saves)} workspaces={len(base)}"
    )
    assert exercised()
