"""Change plans: namespaced ids, diffs, warnings, paginated preview, apply-selected, staleness, slots, TTL."""

from __future__ import annotations

import asyncio

import pytest
from memkind import JsonStore

from deskbridge.core import limits
from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.plans import Change, PlanKind, PlanWarning, make_change, text_diff
from deskbridge.core.workspace import DELETED, MappingSource

pytestmark = pytest.mark.anyio


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class Store(JsonStore):
    def load(self, path):
        return MappingSource({"a": "alpha\n", "b": "beta\n", "bin": b"\x00\x01"})


@pytest.fixture
async def eng():
    engine = Engine(Store(), clock=Clock())
    await engine.open(None)
    return engine


def ident(engine):
    d = engine.identity_data()
    return d["workspaceId"], d["revision"]


def script_plan(engine, owner="mcp:1", **kw):
    wid, rev = ident(engine)
    changes = kw.pop("changes", None) or [
        make_change("a", "alpha\n", "ALPHA\n"),
        make_change("b", "beta\n", None),
        make_change("c", None, "gamma\n"),
    ]
    return engine.create_plan(
        kw.pop("kind", PlanKind.SCRIPT), owner=owner, workspace_id=wid, revision=rev, changes=changes, **kw
    )


# -- changes ---------------------------------------------------------------------------------------------


def test_text_change_has_a_unified_diff_and_binary_a_summary():
    mod = make_change("equipment/a.equ", "x\ny\n", "x\nz\n")
    assert mod.action == "modify"
    assert mod.diff.splitlines()[:2] == ["--- a/equipment/a.equ", "+++ b/equipment/a.equ"]
    assert "-y" in mod.diff and "+z" in mod.diff
    add = make_change("n.txt", None, "new")
    assert add.action == "add" and add.diff.startswith("--- /dev/null") and "No newline" in add.diff
    gone = make_change("old.txt", "bye\n", DELETED)
    assert gone.action == "delete" and "+++ /dev/null" in gone.diff
    binary = make_change("img.png", b"\x89PNG", b"\x89PNG\x00")
    assert binary.diff is None and binary.binary["old"]["size"] == 4 and binary.binary["new"]["size"] == 5
    assert len(binary.binary["new"]["sha256"]) == 64


def test_change_that_neither_exists_nor_is_created_is_invalid():
    with pytest.raises(BridgeError):
        make_change("x", None, None)


def test_text_diff_of_equal_texts_is_empty():
    assert text_diff("k", "same\n", "same\n") == ""


# -- ids, slots ------------------------------------------------------------------------------------------


async def test_plan_ids_are_namespaced_by_kind_and_tools_of_one_kind_refuse_others(eng):
    plan = script_plan(eng)
    assert plan.id.startswith("script-")
    assert eng.get_plan(plan.id, PlanKind.SCRIPT)["changeCount"] == 3
    with pytest.raises(BridgeError) as ei:
        eng.get_plan(plan.id, PlanKind.IMPORT)
    assert ei.value.code == ErrorCode.NOT_FOUND


async def test_second_pending_write_plan_is_refused_for_any_caller(eng):
    first = script_plan(eng, owner="ui")
    for kind in (PlanKind.SCRIPT, PlanKind.IMPORT, PlanKind.EDIT):
        with pytest.raises(BridgeError) as ei:
            script_plan(eng, owner="mcp:1", kind=kind)
        assert ei.value.code == ErrorCode.PLAN_PENDING and ei.value.data["planId"] == first.id
    export = script_plan(eng, kind=PlanKind.EXPORT)  # exports have their own slot
    assert export.id.startswith("export-")
    with pytest.raises(BridgeError) as ei:
        script_plan(eng, kind=PlanKind.EXPORT)
    assert ei.value.code == ErrorCode.EXPORT_PLAN_PENDING


async def test_refuse_if_pending_raises_the_slots_code_with_the_kinds_hint(eng):
    eng.plans.refuse_if_pending(PlanKind.EDIT)  # a free slot: nothing to refuse
    first = script_plan(eng, owner="ui")
    with pytest.raises(BridgeError) as ei:
        eng.plans.refuse_if_pending(PlanKind.IMPORT, "call x_plan_discard")
    assert ei.value.code == ErrorCode.PLAN_PENDING and ei.value.data == {"planId": first.id, "owner": "ui"}
    assert ei.value.hint == "call x_plan_discard"
    eng.plans.refuse_if_pending(PlanKind.EXPORT)  # exports have their own slot
    script_plan(eng, kind=PlanKind.EXPORT)
    with pytest.raises(BridgeError) as ei:
        eng.plans.refuse_if_pending(PlanKind.EXPORT)
    assert ei.value.code == ErrorCode.EXPORT_PLAN_PENDING


async def test_discard_frees_the_slot_and_anyone_may_discard(eng):
    plan = script_plan(eng, owner="mcp:1")
    assert eng.discard_plan(plan.id, caller="ui")["state"] == "discarded"
    assert eng.discard_plan(plan.id, caller="ui")["state"] == "discarded"  # twice is harmless
    script_plan(eng, owner="mcp:2")


async def test_plan_built_on_a_stale_revision_is_refused_at_creation(eng):
    wid, rev = ident(eng)
    eng.commit("ui", wid, {"a": "edited\n"})
    with pytest.raises(BridgeError) as ei:
        eng.create_plan(
            PlanKind.SCRIPT,
            owner="mcp:1",
            workspace_id=wid,
            revision=rev,
            changes=[make_change("a", "alpha\n", "x\n")],
        )
    assert ei.value.code == ErrorCode.STALE_WORKSPACE


async def test_duplicate_change_keys_are_invalid(eng):
    with pytest.raises(BridgeError) as ei:
        script_plan(eng, changes=[make_change("a", "1", "2"), make_change("a", "1", "3")])
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


# -- apply ------------------------------------------------------------------------------------------------


async def test_apply_commits_only_the_selected_keys_and_bumps_revision_once(eng):
    wid, rev = ident(eng)
    plan = script_plan(eng)
    out = eng.apply_plan(plan.id, caller="mcp:1", change_keys=["a", "c"], expected_revision=rev)
    assert out == {"planId": plan.id, "applied": 2, "dropped": 1, "revision": rev + 1, "sourceDirty": True}
    assert eng.read(wid, "a")["value"] == "ALPHA\n" and eng.read(wid, "c")["value"] == "gamma\n"
    assert eng.read(wid, "b")["value"] == "beta\n"  # not selected: not applied
    assert eng.get_plan(plan.id)["state"] == "applied"
    with pytest.raises(BridgeError):  # an applied plan cannot be applied again
        eng.apply_plan(plan.id, caller="mcp:1", change_keys=["b"])


async def test_apply_of_stale_plan_changes_nothing(eng):
    wid, rev = ident(eng)
    plan = script_plan(eng)
    eng.commit("ui", wid, {"z": "someone else\n"})
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="mcp:1", change_keys=["a"], expected_revision=rev)
    assert ei.value.code == ErrorCode.STALE_PLAN and ei.value.data["planRevision"] == rev
    assert eng.read(wid, "a")["value"] == "alpha\n" and eng.identity_data()["revision"] == rev + 1


async def test_apply_with_wrong_expected_revision_is_stale(eng):
    _wid, rev = ident(eng)
    plan = script_plan(eng)
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="mcp:1", change_keys=["a"], expected_revision=rev - 1)
    assert ei.value.code == ErrorCode.STALE_PLAN


async def test_unknown_or_empty_selection_is_invalid_and_nothing_applied(eng):
    _wid, rev = ident(eng)
    plan = script_plan(eng)
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="ui", change_keys=["a", "nope"])
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT and ei.value.data["unknownKeys"] == ["nope"]
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="ui", change_keys=[])
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT
    assert eng.identity_data()["revision"] == rev and eng.get_plan(plan.id)["state"] == "pending"


async def test_unacknowledged_warnings_block_apply_and_are_listed(eng):
    w_dep = PlanWarning("stringtable.bin is not selected", keys=("a",))
    w_all = PlanWarning("the archive list was not updated")
    w_other = PlanWarning("c overwrites a file", keys=("c",))
    plan = script_plan(eng, warnings=[w_dep, w_all, w_other])
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="ui", change_keys=["a"])
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT
    assert sorted(ei.value.data["unacknowledgedWarningIds"]) == sorted([w_dep.id, w_all.id])
    out = eng.apply_plan(
        plan.id, caller="ui", change_keys=["a"], acknowledged_warning_ids=[w_dep.id, w_all.id]
    )
    assert out["applied"] == 1


def test_warning_ids_are_stable_across_runs():
    assert PlanWarning("m", keys=("b", "a")).id == PlanWarning("m", keys=("a", "b")).id
    assert PlanWarning("m").id != PlanWarning("n").id


async def test_apply_calls_the_kind_with_the_selected_changes_and_commits_its_mapping(eng):
    seen = []

    def on_apply(changes):
        seen.append([c.key for c in changes])
        return {c.key: c.new.upper() for c in changes if c.new is not DELETED} | {"log": "applied\n"}

    wid, _ = ident(eng)
    plan = script_plan(eng, on_apply=on_apply)
    eng.apply_plan(plan.id, caller="ui", change_keys=["c", "a"])
    assert seen == [["c", "a"]]
    assert eng.read(wid, "c")["value"] == "GAMMA\n" and eng.read(wid, "log")["value"] == "applied\n"


async def test_failing_kind_apply_commits_nothing_and_keeps_the_plan(eng):
    def on_apply(changes):
        raise BridgeError(ErrorCode.UNSUPPORTED_CHANGE, "file-set change")

    _wid, rev = ident(eng)
    plan = script_plan(eng, on_apply=on_apply)
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="ui", change_keys=["a"])
    assert ei.value.code == ErrorCode.UNSUPPORTED_CHANGE
    assert eng.identity_data()["revision"] == rev and eng.get_plan(plan.id)["state"] == "pending"


async def test_export_plan_execution_does_not_move_the_revision_and_goes_stale_on_edit(eng):
    wid, rev = ident(eng)
    export = script_plan(
        eng, kind=PlanKind.EXPORT, on_apply=lambda ch: {"outputPath": "/x", "files": len(ch)}
    )
    out = eng.apply_plan(export.id, caller="mcp:1", change_keys=["a", "c"])
    assert out["result"] == {"outputPath": "/x", "files": 2} and eng.identity_data()["revision"] == rev
    export2 = script_plan(eng, kind=PlanKind.EXPORT)
    eng.commit("ui", wid, {"a": "edit\n"})  # editing while an export plan waits is allowed…
    with pytest.raises(BridgeError) as ei:  # …and makes the export stale
        eng.apply_plan(export2.id, caller="mcp:1", change_keys=["a"])
    assert ei.value.code == ErrorCode.STALE_EXPORT


async def test_write_task_of_another_caller_blocks_plan_creation_and_apply(eng):
    gate = asyncio.Event()

    async def hold(h):
        await gate.wait()

    plan = script_plan(eng)
    eng.discard_plan(plan.id, caller="ui")
    task = eng.start_task(hold, owner="mcp:1", label="import", write=True)
    with pytest.raises(BridgeError) as ei:
        script_plan(eng, owner="ui")
    assert ei.value.code == ErrorCode.TASK_BUSY
    mine = script_plan(eng, owner="mcp:1", task=task)  # the task itself may register its plan
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(mine.id, caller="ui", change_keys=["a"])
    assert ei.value.code == ErrorCode.TASK_BUSY
    gate.set()
    await eng.tasks.wait(task.id, 2)
    assert eng.apply_plan(mine.id, caller="ui", change_keys=["a"])["applied"] == 1


# -- TTL --------------------------------------------------------------------------------------------------


async def test_plan_expires_after_ttl_and_frees_the_slot(eng):
    plan = script_plan(eng)
    clock = eng.plans._clock
    clock.now += limits.PLAN_TTL_S
    assert eng.get_plan(plan.id)["state"] == "pending"  # exactly at the TTL: still valid
    clock.now += 1
    assert eng.get_plan(plan.id)["state"] == "expired"
    with pytest.raises(BridgeError):
        eng.apply_plan(plan.id, caller="ui", change_keys=["a"])
    script_plan(eng)  # slot is free again


# -- preview ----------------------------------------------------------------------------------------------


async def test_preview_pages_with_an_opaque_cursor_until_done(eng):
    changes = [make_change(f"f{i:03}", None, f"{i}\n") for i in range(25)]
    plan = script_plan(eng, changes=changes)
    seen, cursor, pages = [], None, 0
    while True:
        page = eng.preview_plan(plan.id, cursor, limit=10)
        seen += [i["changeKey"] for i in page["items"]]
        pages += 1
        if not page["hasMore"]:
            assert page["nextCursor"] is None
            break
        cursor = page["nextCursor"]
    assert seen == [c.key for c in changes] and pages == 3 and page["total"] == 25


async def test_preview_limit_at_the_cap_and_one_past(eng):
    plan = script_plan(eng)
    eng.preview_plan(plan.id, limit=limits.PLAN_PAGE_MAX_ITEMS)
    with pytest.raises(BridgeError) as ei:
        eng.preview_plan(plan.id, limit=limits.PLAN_PAGE_MAX_ITEMS + 1)
    assert ei.value.code == ErrorCode.LIMIT_EXCEEDED
    with pytest.raises(BridgeError) as ei:
        eng.preview_plan(plan.id, limit=0)
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


async def test_preview_respects_the_byte_cap_and_cuts_an_oversized_diff(eng, monkeypatch):
    monkeypatch.setattr(limits, "PLAN_PAGE_MAX_BYTES", 1000)
    big = make_change("big", None, "x" * 5000 + "\n")
    small = [make_change(f"s{i}", None, "y" * 300 + "\n") for i in range(5)]
    plan = script_plan(eng, changes=[big, *small])
    first = eng.preview_plan(plan.id)
    assert [i["changeKey"] for i in first["items"]] == ["big"]
    assert first["truncated"] is True and first["items"][0]["diffTruncated"] is True
    assert len(first["items"][0]["diff"].encode()) == 1000
    second = eng.preview_plan(plan.id, first["nextCursor"])
    assert second["truncated"] is False
    assert sum(len(i["diff"].encode()) for i in second["items"]) <= 1000
    assert len(second["items"]) >= 2


async def test_a_lazy_diff_is_computed_once_when_a_preview_first_shows_it(eng, monkeypatch):
    monkeypatch.setattr(limits, "PLAN_PAGE_MAX_BYTES", 1000)
    calls: list[str] = []

    def lazy(key: str, old: str, new: str):
        def compute() -> str:
            calls.append(key)
            return text_diff(key, old, new)

        return Change(key, "modify", new, diff_of=compute)

    eager = [make_change(f"k{i}", "a\n", "y" * 300 + "\n") for i in range(5)]
    eager_plan = script_plan(eng, changes=eager)
    want = [eng.preview_plan(eager_plan.id)]
    want.append(eng.preview_plan(eager_plan.id, want[0]["nextCursor"]))
    eng.discard_plan(eager_plan.id, caller="ui")
    lazies = [lazy(f"k{i}", "a\n", "y" * 300 + "\n") for i in range(5)]
    plan = script_plan(eng, changes=lazies)
    assert calls == []  # nothing at plan time
    first = eng.preview_plan(plan.id)
    # the page stops at the byte budget exactly as with eager diffs; only the diffs it looked at were made
    assert [i["changeKey"] for i in first["items"]] == ["k0", "k1"] and calls == ["k0", "k1", "k2"]
    second = eng.preview_plan(plan.id, first["nextCursor"])
    assert [p["items"] for p in (first, second)] == [p["items"] for p in want]
    assert [p["truncated"] for p in (first, second)] == [p["truncated"] for p in want]
    assert calls == ["k0", "k1", "k2", "k3", "k4"]
    eng.preview_plan(plan.id)
    assert calls == ["k0", "k1", "k2", "k3", "k4"]  # once each
    assert plan.changes["k4"].diff == eager[4].diff and plan.changes["k4"].diff_of is None


def test_a_diff_set_on_a_change_replaces_a_pending_lazy_one():
    ch = Change("k", "modify", "v", diff_of=lambda: "computed")
    assert ch.diff == "computed"
    ch.diff = "set"
    assert ch.diff == "set" and Change("k", "modify", "v", diff="set") == ch


async def test_preview_cursor_from_another_plan_or_garbage_is_invalid(eng):
    plan = script_plan(eng, changes=[make_change(f"k{i}", None, "v") for i in range(3)])
    cursor = eng.preview_plan(plan.id, limit=1)["nextCursor"]
    eng.discard_plan(plan.id, caller="ui")
    other = script_plan(eng)
    for bad in (cursor, "garbage!", "W10"):
        with pytest.raises(BridgeError) as ei:
            eng.preview_plan(other.id, bad)
        assert ei.value.code == ErrorCode.INVALID_ARGUMENT


async def test_preview_filter_and_warnings(eng):
    w = PlanWarning("dep", keys=("a",))
    plan = script_plan(eng, warnings=[w])
    page = eng.preview_plan(plan.id, key_filter="A")
    assert [i["changeKey"] for i in page["items"]] == ["a"]
    assert page["warnings"] == [{"warningId": w.id, "message": "dep", "changeKeys": ["a"]}]


async def test_leaving_out_a_required_change_needs_an_acknowledged_dependency_warning(eng):
    wid, rev = ident(eng)
    changes = [
        make_change("stringtable.bin", "s\n", "s2\n"),
        make_change("a", "alpha\n", "ALPHA\n", requires=["stringtable.bin", "not-in-plan"]),
    ]
    plan = script_plan(eng, changes=changes)
    assert eng.preview_plan(plan.id)["items"][1]["requires"] == ["stringtable.bin", "not-in-plan"]
    with pytest.raises(BridgeError) as ei:
        eng.apply_plan(plan.id, caller="mcp:1", change_keys=["a"], expected_revision=rev)
    (warning,) = ei.value.data["warnings"]
    assert "stringtable.bin" in warning["message"] and "not-in-plan" not in warning["message"]
    assert ei.value.data["unacknowledgedWarningIds"] == [warning["warningId"]]
    # selecting the dependency too needs no acknowledgement…
    eng.apply_plan(plan.id, caller="mcp:1", change_keys=["a", "stringtable.bin"], expected_revision=rev)
    # …and the same omission in a fresh plan gets the same warning id, so it can be acknowledged up front
    plan2 = script_plan(
        eng,
        changes=[
            make_change("stringtable.bin", "s2\n", "s3\n"),
            make_change("a", "ALPHA\n", "x\n", requires=["stringtable.bin"]),
        ],
    )
    out = eng.apply_plan(
        plan2.id, caller="mcp:1", change_keys=["a"], acknowledged_warning_ids=[warning["warningId"]]
    )
    assert out["applied"] == 1 and eng.read(wid, "stringtable.bin")["value"] == "s2\n"
