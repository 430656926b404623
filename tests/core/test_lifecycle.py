"""Open / close / save / save-as: order of checks, dirty policy, draft barrier, file identity, exclusivity."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest
from memkind import JsonStore, read_json, write_json

from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import file_identity
from deskbridge.core.plans import PlanKind, make_change
from deskbridge.core.policy import AccessScope

pytestmark = pytest.mark.anyio


@pytest.fixture
def src(tmp_path):
    return write_json(tmp_path / "w.json", {"a": "1"})


async def opened(src, **kw):
    eng = Engine(JsonStore(), **kw)
    info = await eng.open(src)
    return eng, info["workspaceId"]


async def raises(code, awaitable):
    with pytest.raises(BridgeError) as ei:
        await awaitable
    assert ei.value.code == code, ei.value
    return ei.value


# -- save -----------------------------------------------------------------------------------------------


async def test_save_writes_the_committed_state_keeps_a_backup_and_clears_dirty(src):
    eng, wid = await opened(src)
    rev = eng.commit("mcp:1", wid, {"b": "2"})
    assert eng.status()["sourceDirty"] is True
    async with eng.bus.subscribe("workspace") as sub:
        out = await eng.save(workspace_id=wid, expected_revision=rev)
        ev = await sub.get(1)
    assert read_json(src) == {"a": "1", "b": "2"}
    assert read_json(src.with_name("w.json.bak")) == {"a": "1"}
    assert out["savedRevision"] == rev and out["sourceDirty"] is False and out["diskCommitted"] is True
    assert out["identity"] == file_identity(src).to_dict()
    assert ev.data["event"] == "saved" and ev.data["writtenPath"] == str(src)


async def test_save_without_a_source_path_requires_save_as():
    eng = Engine(JsonStore())
    wid = (await eng.open(None))["workspaceId"]
    await raises(ErrorCode.SAVE_AS_REQUIRED, eng.save(workspace_id=wid))


async def test_save_refuses_a_source_changed_on_disk_since_open(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "ours"})
    write_json(src, {"a": "another program"})
    err = await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid))
    assert err.data["diskCommitted"] is False
    assert read_json(src) == {"a": "another program"} and eng.status()["sourceDirty"] is True


async def test_save_refuses_a_source_changed_since_the_last_save(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "one"})
    await eng.save(workspace_id=wid)
    eng.commit("ui", wid, {"a": "two"})
    write_json(src, {"a": "external"})
    await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid))


async def test_save_with_stale_revision_is_refused(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    await raises(ErrorCode.STALE_WORKSPACE, eng.save(workspace_id=wid, expected_revision=1))


async def test_failing_serialiser_leaves_the_file_and_the_dirty_state(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    eng.lifecycle.store.fail_serialize = RuntimeError("codec bug")
    with pytest.raises(RuntimeError):
        await eng.save(workspace_id=wid)
    assert read_json(src) == {"a": "1"} and eng.status()["sourceDirty"] is True
    assert eng.status()["lifecycle"] is None  # the lifecycle flag is always released


async def test_failure_after_the_disk_commit_is_reported_as_saved_with_a_warning(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    eng.lifecycle.store.after_save_error = OSError("index update failed")
    out = await eng.save(workspace_id=wid)
    assert out["diskCommitted"] is True and out["sourceDirty"] is False
    assert "index update failed" in out["warnings"][0]
    assert read_json(src) == {"a": "x"}


# -- save as (a copy) -------------------------------------------------------------------------------------


async def test_save_copy_keeps_source_path_dirty_state_and_workspace_id(src, tmp_path):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "changed"})
    async with eng.bus.subscribe("workspace") as sub:
        out = await eng.save_copy(tmp_path / "copy.json", workspace_id=wid)
        assert (await sub.get(1)).data["event"] == "copy-saved"
    assert read_json(tmp_path / "copy.json") == {"a": "changed"}
    assert out["sourcePath"] == str(src) and out["sourceDirty"] is True
    st = eng.status()
    assert st["workspaceId"] == wid and st["sourceDirty"] is True and st["sourcePath"] == str(src)
    assert read_json(src) == {"a": "1"}


async def test_save_copy_onto_the_source_is_same_as_source_also_through_aliases(src, tmp_path):
    eng, wid = await opened(src)
    (tmp_path / "alias.json").symlink_to(src)
    (tmp_path / "sub").mkdir()
    for alias in (src, tmp_path / "alias.json", tmp_path / "sub" / ".." / "w.json"):
        await raises(ErrorCode.SAME_AS_SOURCE, eng.save_copy(alias, workspace_id=wid))


async def test_save_copy_onto_an_existing_target_needs_overwrite_with_the_observed_identity(src, tmp_path):
    eng, wid = await opened(src)
    target = write_json(tmp_path / "t.json", {"old": "target"})
    err = await raises(ErrorCode.TARGET_EXISTS, eng.save_copy(target, workspace_id=wid))
    observed = err.data["identity"]
    assert read_json(target) == {"old": "target"}
    await raises(ErrorCode.INVALID_ARGUMENT, eng.save_copy(target, workspace_id=wid, overwrite=True))
    out = await eng.save_copy(target, workspace_id=wid, overwrite=True, observed_identity=observed)
    assert read_json(target) == {"a": "1"} and out["writtenPath"] == str(target)


async def test_overwrite_with_a_stale_observed_identity_is_target_changed(src, tmp_path):
    eng, wid = await opened(src)
    target = write_json(tmp_path / "t.json", {"v": "1"})
    observed = file_identity(target)
    write_json(target, {"v": "2, changed meanwhile"})
    await raises(
        ErrorCode.TARGET_CHANGED,
        eng.save_copy(target, workspace_id=wid, overwrite=True, observed_identity=observed),
    )
    assert read_json(target) == {"v": "2, changed meanwhile"}


@pytest.mark.parametrize(
    "target, code",
    [
        ("relative.json", ErrorCode.INVALID_ARGUMENT),
        ("{tmp}/missing/x.json", ErrorCode.NOT_FOUND),
        ("{tmp}", ErrorCode.INVALID_ARGUMENT),
    ],
)
async def test_save_copy_target_shape_errors(src, tmp_path, target, code):
    eng, wid = await opened(src)
    await raises(code, eng.save_copy(target.format(tmp=tmp_path), workspace_id=wid))


async def test_save_copy_outside_the_access_scope_is_denied(src, tmp_path):
    (tmp_path / "allowed").mkdir()
    eng, wid = await opened(src, scope=AccessScope.folder(tmp_path / "allowed"))
    await raises(ErrorCode.ACCESS_DENIED, eng.save_copy(tmp_path / "x.json", workspace_id=wid))
    out = await eng.save_copy("copy.json", workspace_id=wid)
    assert out["writtenPath"] == str((tmp_path / "allowed" / "copy.json").resolve())


# -- open / close --------------------------------------------------------------------------------------------


async def test_open_failure_keeps_the_current_workspace_and_its_changes(src, tmp_path):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "keep me"})
    other = write_json(tmp_path / "o.json", {})
    eng.lifecycle.store.fail_next_load = BridgeError(ErrorCode.PVF_CORRUPT, "bad header")
    await raises(ErrorCode.PVF_CORRUPT, eng.open(other, workspace_id=wid, dirty_policy="discard"))
    assert eng.status()["workspaceId"] == wid and eng.read(wid, "a")["value"] == "keep me"


async def test_open_of_a_missing_file_is_not_found_and_relative_is_invalid(src, tmp_path):
    eng = Engine(JsonStore())
    await raises(ErrorCode.NOT_FOUND, eng.open(tmp_path / "nope.json"))
    await raises(ErrorCode.INVALID_ARGUMENT, eng.open("w.json"))


async def test_two_opens_of_an_empty_workspace_race_free_by_epoch(src):
    eng = Engine(JsonStore())
    epoch = eng.status()["workspaceEpoch"]
    await eng.open(src, expected_epoch=epoch)
    await raises(ErrorCode.STALE_WORKSPACE, eng.open(src, expected_epoch=epoch))


async def test_open_over_an_open_workspace_needs_its_identity(src):
    eng, wid = await opened(src)
    await raises(ErrorCode.STALE_WORKSPACE, eng.open(src))
    await raises(ErrorCode.STALE_WORKSPACE, eng.open(src, workspace_id="ws-other"))
    await eng.open(src, workspace_id=wid, expected_revision=1)


async def test_dirty_policy_reject_is_the_default(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    err = await raises(ErrorCode.UNSAVED_CHANGES, eng.close(workspace_id=wid))
    assert err.data["workspaceId"] == wid and eng.status()["open"]
    await raises(ErrorCode.UNSAVED_CHANGES, eng.open(src, workspace_id=wid))


async def test_dirty_policy_save_saves_then_closes(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "saved on close"})
    await eng.close(workspace_id=wid, dirty_policy="save")
    assert read_json(src) == {"a": "saved on close"} and not eng.status()["open"]


async def test_dirty_policy_save_that_fails_keeps_the_workspace(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    write_json(src, {"a": "external"})
    await raises(ErrorCode.SOURCE_CHANGED, eng.close(workspace_id=wid, dirty_policy="save"))
    assert eng.status()["workspaceId"] == wid


async def test_dirty_policy_discard_drops_changes_without_writing(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "dropped"})
    info = await eng.open(src, workspace_id=wid, dirty_policy="discard")
    assert read_json(src) == {"a": "1"} and eng.read(info["workspaceId"], "a")["value"] == "1"


async def test_close_of_a_closed_workspace_is_stale(src):
    eng, wid = await opened(src)
    await eng.close(workspace_id=wid)
    await raises(ErrorCode.STALE_WORKSPACE, eng.close(workspace_id=wid))


# -- exclusivity ------------------------------------------------------------------------------------------------


async def test_lifecycle_refuses_while_a_write_task_runs(src, tmp_path):
    eng, wid = await opened(src)
    gate = asyncio.Event()

    async def hold(h):
        await gate.wait()

    task = eng.start_task(hold, owner="mcp:1", label="import", write=True)
    for op in (
        eng.save(workspace_id=wid),
        eng.close(workspace_id=wid),
        eng.open(src, workspace_id=wid),
        eng.save_copy(tmp_path / "c.json", workspace_id=wid),
    ):
        err = await raises(ErrorCode.TASK_BUSY, op)
        assert err.data["taskId"] == task.id
    gate.set()
    await eng.tasks.wait(task.id, 2)


async def test_lifecycle_refuses_while_a_plan_is_pending_and_open_close_also_for_exports(src):
    eng, wid = await opened(src)
    plan = eng.create_plan(
        PlanKind.SCRIPT, owner="mcp:1", workspace_id=wid, revision=1, changes=[make_change("a", "1", "2")]
    )
    await raises(ErrorCode.PLAN_PENDING, eng.save(workspace_id=wid))
    await raises(ErrorCode.PLAN_PENDING, eng.close(workspace_id=wid))
    eng.discard_plan(plan.id, caller="mcp:1")
    eng.create_plan(
        PlanKind.EXPORT, owner="mcp:1", workspace_id=wid, revision=1, changes=[make_change("a", "1", "1\n")]
    )
    await raises(ErrorCode.EXPORT_PLAN_PENDING, eng.close(workspace_id=wid))
    await raises(ErrorCode.EXPORT_PLAN_PENDING, eng.open(src, workspace_id=wid))
    await eng.save(workspace_id=wid)  # saving does not invalidate an export snapshot


async def start_a_held_save(eng, wid):
    """Start a save and hold it inside the store's serialisation until `release` is set; `restore()` puts the
    store's own serialisation back."""
    entered, release = threading.Event(), threading.Event()
    store = eng.lifecycle.store
    original = store.serialize

    def slow_serialize(ws, out):
        entered.set()
        release.wait(5)
        original(ws, out)

    store.serialize = slow_serialize
    saving = asyncio.create_task(eng.save(workspace_id=wid))
    await asyncio.to_thread(entered.wait, 5)

    def restore():
        store.serialize = original

    return saving, release, restore


async def test_writes_tasks_and_plans_get_not_ready_during_a_lifecycle_operation(src):
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    saving, release, _restore = await start_a_held_save(eng, wid)

    async def nothing(h):
        return None

    try:
        for attempt in (
            lambda: eng.commit("mcp:1", wid, {"a": "during save"}),
            lambda: eng.start_task(nothing, owner="mcp:1", label="w", write=True),
            lambda: eng.create_plan(
                PlanKind.EDIT, owner="ui", workspace_id=wid, revision=2, changes=[make_change("a", "x", "y")]
            ),
        ):
            with pytest.raises(BridgeError) as ei:
                attempt()
            assert ei.value.code == ErrorCode.NOT_READY and ei.value.data == {"operation": "save"}
        await raises(ErrorCode.NOT_READY, eng.close(workspace_id=wid))
    finally:
        release.set()
    await saving
    assert eng.commit("mcp:1", wid, {"a": "after save"}) == 3


# -- draft barrier ---------------------------------------------------------------------------------------------


async def answer_prepares(eng, answers, after=None):
    """Act as the editors: answer each `prepare` on the `ui` topic with the given draft state."""
    async with eng.bus.subscribe("ui") as sub:
        async for ev in sub:
            if ev.data["event"] == "prepare":
                for client, has_drafts in answers.items():
                    eng.drafts.ack(ev.data["operationId"], client, has_drafts)
                if after:
                    after(ev)
                return ev


async def test_barrier_passes_when_every_editor_answers_without_drafts(src):
    eng, wid = await opened(src, barrier_timeout_s=5)
    eng.drafts.register("tab-1")
    eng.drafts.register("script-window")
    editors = asyncio.create_task(answer_prepares(eng, {"tab-1": False, "script-window": False}))
    await asyncio.sleep(0)
    async with eng.bus.subscribe("ui") as sub:
        await eng.save(workspace_id=wid)
        events = [sub.get_nowait().data for _ in range(2)]
    prepare = await editors
    assert prepare.data["clients"] == ["script-window", "tab-1"]
    assert [e["event"] for e in events] == ["prepare", "release"] and events[1]["outcome"] == "ok"


async def test_barrier_with_a_draft_is_ui_draft_pending_even_with_discard(src):
    eng, wid = await opened(src, barrier_timeout_s=5)
    eng.commit("ui", wid, {"a": "x"})
    eng.drafts.register("tab-1")
    editors = asyncio.create_task(answer_prepares(eng, {"tab-1": True}))
    await asyncio.sleep(0)
    err = await raises(ErrorCode.UI_DRAFT_PENDING, eng.close(workspace_id=wid, dirty_policy="discard"))
    await editors
    assert err.data["clients"] == ["tab-1"] and eng.status()["workspaceId"] == wid


async def test_barrier_times_out_as_ui_not_ready_and_a_late_answer_is_refused(src):
    eng, wid = await opened(src, barrier_timeout_s=0.05)
    eng.drafts.register("tab-1")
    eng.drafts.register("tab-2")
    editors = asyncio.create_task(answer_prepares(eng, {"tab-1": False}))  # tab-2 never answers
    await asyncio.sleep(0)
    err = await raises(ErrorCode.UI_NOT_READY, eng.save(workspace_id=wid))
    prepare = await editors
    assert err.data["clients"] == ["tab-2"]
    with pytest.raises(BridgeError) as ei:
        eng.drafts.ack(prepare.data["operationId"], "tab-2", False)
    assert ei.value.code == ErrorCode.UI_NOT_READY


async def test_answer_from_an_unregistered_editor_is_refused(src):
    eng, wid = await opened(src, barrier_timeout_s=5)
    eng.drafts.register("tab-1")
    refused = []

    def intruder(ev):
        try:
            eng.drafts.ack(ev.data["operationId"], "unknown-tab", False)
        except BridgeError as exc:
            refused.append(exc.code)

    editors = asyncio.create_task(answer_prepares(eng, {"tab-1": False}, after=intruder))
    await asyncio.sleep(0)
    await eng.save(workspace_id=wid)
    await editors
    assert refused == [ErrorCode.UI_NOT_READY]


async def test_no_registered_editor_means_no_barrier(src):
    eng, wid = await opened(src, barrier_timeout_s=0.01)
    eng.drafts.register("tab-1")
    eng.drafts.unregister("tab-1")
    await eng.save(workspace_id=wid)


async def test_same_path_reopen_runs_the_barrier_and_dirty_checks(src):
    eng, wid = await opened(src, barrier_timeout_s=0.05)
    eng.drafts.register("tab-1")
    await raises(ErrorCode.UI_NOT_READY, eng.open(src, workspace_id=wid, dirty_policy="discard"))
    assert eng.status()["workspaceId"] == wid


async def test_stale_temp_files_next_to_the_source_are_removed_on_open(src):
    stale = src.with_name(".deskbridge-tmp-w.json-abc")
    stale.write_bytes(b"half")
    os.utime(stale, (1, 1))  # left by a crash long ago
    fresh = src.with_name(".deskbridge-tmp-w.json-def")
    fresh.write_bytes(b"another process is writing this right now")
    await opened(src)
    assert not stale.exists() and fresh.exists() and os.path.exists(src)


async def test_a_save_whose_caller_is_cancelled_still_finishes_and_records_the_commit(src):
    """A client disconnecting mid-save must not leave a written file that the workspace thinks is foreign."""
    eng, wid = await opened(src)
    eng.commit("ui", wid, {"a": "x"})
    saving, release, restore = await start_a_held_save(eng, wid)
    saving.cancel()
    await asyncio.sleep(0.01)
    with pytest.raises(BridgeError) as ei:  # still inside the uninterruptible commit: writers kept out
        eng.commit("mcp:1", wid, {"a": "sneaky"})
    assert ei.value.code == ErrorCode.NOT_READY
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await saving
    assert read_json(src) == {"a": "x"} and eng.status()["sourceDirty"] is False
    restore()
    eng.commit("ui", wid, {"a": "next"})
    await eng.save(workspace_id=wid)  # not SOURCE_CHANGED: the cancelled save's identity was recorded
    assert read_json(src) == {"a": "next"}


class FolderStore(JsonStore):
    """A kind whose source is a folder: one file per key, written by the kind itself."""

    def load(self, path):
        from deskbridge.core.workspace import MappingSource

        return MappingSource({p.name: p.read_text() for p in path.iterdir() if p.is_file()})

    def write_source(self, ws, path, expected_identity):
        from deskbridge.core.files import atomic_write

        for key in ws.changed_keys():
            atomic_write(path / key, ws.read(key).encode())
        return None


async def test_folder_kinds_write_their_own_files_through_write_source(tmp_path):
    folder = tmp_path / "mod"
    folder.mkdir()
    (folder / "a.xml").write_text("<a/>")
    eng = Engine(FolderStore())
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"b.xml": "<b/>"})
    out = await eng.save(workspace_id=wid)
    assert (folder / "b.xml").read_text() == "<b/>" and out["identity"] is None and not out["sourceDirty"]


async def test_editors_are_released_after_a_failed_operation_and_not_bothered_before_the_barrier(src):
    eng, wid = await opened(src, barrier_timeout_s=5)
    eng.drafts.register("tab-1")
    async with eng.bus.subscribe("ui") as sub:
        await raises(ErrorCode.STALE_WORKSPACE, eng.save(workspace_id="ws-old"))  # refused before asking
        assert sub.get_nowait() is None
        eng.commit("ui", wid, {"a": "x"})
        write_json(src, {"a": "external"})
        editors = asyncio.create_task(answer_prepares(eng, {"tab-1": False}))
        await asyncio.sleep(0)
        await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid))  # fails after the barrier
        await editors
        events = [sub.get_nowait().data for _ in range(2)]
    assert [e["event"] for e in events] == ["prepare", "release"] and events[1]["outcome"] == "failed"


async def test_closing_an_untitled_workspace_with_save_policy_needs_save_as(tmp_path):
    eng = Engine(JsonStore())
    wid = (await eng.open(None))["workspaceId"]
    eng.commit("ui", wid, {"a": "draft"})
    await raises(ErrorCode.SAVE_AS_REQUIRED, eng.close(workspace_id=wid, dirty_policy="save"))
    assert eng.status()["workspaceId"] == wid


async def test_save_as_with_adopt_makes_the_copy_the_new_source(tmp_path):
    eng = Engine(JsonStore())
    wid = (await eng.open(None))["workspaceId"]
    eng.commit("ui", wid, {"a": "text"})
    out = await eng.save_copy(tmp_path / "new.json", workspace_id=wid, adopt=True)
    assert out["sourcePath"] == str(tmp_path / "new.json") and out["sourceDirty"] is False
    eng.commit("ui", wid, {"a": "more"})
    await eng.save(workspace_id=wid)  # now goes to the adopted file
    assert read_json(tmp_path / "new.json") == {"a": "more"}


async def test_unknown_dirty_policy_is_invalid(src):
    eng, wid = await opened(src)
    await raises(ErrorCode.INVALID_ARGUMENT, eng.close(workspace_id=wid, dirty_policy="force"))


async def test_reported_draft_state_shows_in_status_but_the_barrier_still_asks(src):
    eng, wid = await opened(src, barrier_timeout_s=0.05)
    eng.drafts.register("tab-1")
    eng.drafts.register("tab-2")
    eng.drafts.report("tab-1", False)
    eng.drafts.report("stranger", True)  # unregistered editors are ignored
    assert eng.status()["editorDrafts"] == {"tab-1": False, "tab-2": None}
    # tab-1 reported "no draft", but a report is no answer to this operation: still UI_NOT_READY
    err = await raises(ErrorCode.UI_NOT_READY, eng.save(workspace_id=wid))
    assert err.data["clients"] == ["tab-1", "tab-2"]


# -- save(keys=…): a folder saved one key (one file) at a time ----------------------------------------------


@pytest.fixture
def folder(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.txt").write_text("A", "utf-8")
    (d / "b.txt").write_text("B", "utf-8")
    return d


async def test_save_of_one_key_writes_its_file_only_and_keeps_the_others_dirty(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore(), backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2"})
    rev = eng.commit("mcp:1", wid, {"b": "B2"})
    ws = eng.workspace
    assert ws.dirty_keys() == ["a", "b"] and ws.dirty
    async with eng.bus.subscribe("workspace") as sub:
        out = await eng.save(workspace_id=wid, keys=["a"])
        ev = await sub.get(1)
    assert (folder / "a.txt").read_text("utf-8") == "A2" and (folder / "b.txt").read_text("utf-8") == "B"
    assert out["savedKeys"] == ["a"] and out["dirtyKeys"] == ["b"] and out["sourceDirty"] is True
    assert out["savedRevision"] == rev and out["diskCommitted"] is True
    assert out["identities"]["a"] == file_identity(folder / "a.txt").to_dict()
    assert ev.data["event"] == "saved" and ev.data["savedKeys"] == ["a"]
    assert not (folder / "a.txt.bak").exists()
    # the key's own identity is now what is on disk: saving it again is not its own SOURCE_CHANGED
    eng.commit("mcp:1", wid, {"a": "A3"})
    await eng.save(workspace_id=wid, keys=["a"])
    assert ws.dirty_keys() == ["b"]
    out = await eng.save(workspace_id=wid, keys=["b"])
    assert out["dirtyKeys"] == [] and out["sourceDirty"] is False and not ws.dirty
    assert ws.saved_revision == ws.revision
    # clean again: a close with the default dirty policy goes through
    await eng.close(workspace_id=wid)


async def test_save_of_a_key_whose_file_another_program_replaced_writes_nothing(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore())
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "mine", "b": "B2"})
    other = folder / ".a.tmp"
    other.write_text("theirs", "utf-8")
    os.replace(other, folder / "a.txt")
    err = await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid, keys=["a"]))
    assert err.data.get("path") or err.message
    assert (folder / "a.txt").read_text("utf-8") == "theirs"
    assert eng.workspace.dirty_keys() == ["a", "b"]
    # the other key's file is untouched by the refusal and saves on its own
    await eng.save(workspace_id=wid, keys=["b"])
    assert (folder / "b.txt").read_text("utf-8") == "B2" and eng.workspace.dirty_keys() == ["a"]


async def test_save_of_a_new_key_creates_its_file_and_refuses_one_created_meanwhile(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore())
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"c": "C", "d": "D"})
    await eng.save(workspace_id=wid, keys=["c"])
    assert (folder / "c.txt").read_text("utf-8") == "C"
    (folder / "d.txt").write_text("someone else's", "utf-8")
    await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid, keys=["d"]))
    assert (folder / "d.txt").read_text("utf-8") == "someone else's"


async def test_save_of_keys_is_refused_for_unknown_keys_and_whole_file_stores(folder, src):
    from memkind import FolderStore

    eng = Engine(FolderStore())
    wid = (await eng.open(folder))["workspaceId"]
    await raises(ErrorCode.NOT_FOUND, eng.save(workspace_id=wid, keys=["nope"]))
    await raises(ErrorCode.INVALID_ARGUMENT, eng.save(workspace_id=wid, keys=[]))
    whole, wid2 = await opened(src)
    await raises(ErrorCode.UNSUPPORTED_CHANGE, whole.save(workspace_id=wid2, keys=["a"]))


# -- per-key admission, the after-barrier snapshot, content-aware identity, per-key save-as -----------------


class _Held:
    """Holds the write of one key in its worker thread until released (to see what runs beside it)."""

    def __init__(self, key: str) -> None:
        self.key = key
        self.started = threading.Event()
        self.go = threading.Event()

    def __call__(self, key: str) -> None:
        if key == self.key:
            self.started.set()
            assert self.go.wait(10)

    async def wait_started(self) -> None:
        assert await asyncio.to_thread(self.started.wait, 10)


async def test_keys_save_side_by_side_while_the_same_key_is_admitted_once(folder):
    from memkind import FolderStore

    store = FolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2", "b": "B2"})
    store.gate = held = _Held("a")
    saving_a = asyncio.create_task(eng.save(workspace_id=wid, keys=["a"]))
    try:
        await held.wait_started()
        assert eng.status()["lifecycle"] == "save"
        # document B saves while A is being written: per-key admission, not NOT_READY
        out_b = await eng.save(workspace_id=wid, keys=["b"])
        assert out_b["savedKeys"] == ["b"] and (folder / "b.txt").read_text("utf-8") == "B2"
        # the same key is admitted once
        err = await raises(ErrorCode.NOT_READY, eng.save(workspace_id=wid, keys=["a", "b"]))
        assert err.data == {"operation": "save", "keys": ["a"]}
        # whole-workspace lifecycle operations wait for no key save: refused at once
        err = await raises(ErrorCode.NOT_READY, eng.close(workspace_id=wid, dirty_policy="discard"))
        assert err.data["keys"] == ["a"]
        # commits go on during the save; what changed after the snapshot stays dirty
        eng.commit("mcp:1", wid, {"a": "A3"})
    finally:
        held.go.set()
    out_a = await saving_a
    assert (folder / "a.txt").read_text("utf-8") == "A2"
    assert out_a["dirtyKeys"] == ["a"] and eng.workspace.key_dirty("a")
    assert not eng.workspace.key_dirty("b")
    assert eng.status()["lifecycle"] is None
    await eng.save(workspace_id=wid, keys=["a"])
    assert (folder / "a.txt").read_text("utf-8") == "A3" and not eng.workspace.dirty


async def test_the_value_saved_is_the_snapshot_taken_after_every_editor_answered(folder):
    from memkind import SnapshotFolderStore

    store = SnapshotFolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.drafts.register("tab-1")
    async with eng.bus.subscribe("ui") as sub:
        saving = asyncio.create_task(eng.save(workspace_id=wid, keys=["a"]))
        prepare = await sub.get(5)
        assert prepare.data["event"] == "prepare" and prepare.data["keys"] == ["a"]
        assert store.snapshots == []  # nothing taken before the editors answered
        # the editor flushes its typing before it answers: that typing is what gets saved
        rev = eng.commit("tab-1", wid, {"a": "typed before the answer"})
        eng.drafts.ack(prepare.data["operationId"], "tab-1", False)
        out = await saving
        release = await sub.get(5)
    assert store.snapshots == [("a", rev)] and release.data["event"] == "release"
    assert (folder / "a.txt").read_text("utf-8") == "typed before the answer"
    assert out["savedRevision"] == rev and out["dirtyKeys"] == []


async def test_a_touch_without_a_content_change_is_not_source_changed(folder, src):
    from memkind import FolderStore

    eng = Engine(FolderStore(), backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2", "b": "B2"})
    os.utime(folder / "a.txt", ns=(10**18, 10**18))  # touched: same bytes, new mtime
    await eng.save(workspace_id=wid, keys=["a"])
    assert (folder / "a.txt").read_text("utf-8") == "A2"
    # the same bytes written again by another program (new inode) are no change either
    other = folder / ".b.tmp"
    other.write_text("B", "utf-8")
    os.replace(other, folder / "b.txt")
    await eng.save(workspace_id=wid, keys=["b"])
    assert (folder / "b.txt").read_text("utf-8") == "B2"
    # a content change of the same size still is
    eng.commit("mcp:1", wid, {"a": "A3"})
    (folder / "a.txt").write_text("Z2", "utf-8")
    await raises(ErrorCode.SOURCE_CHANGED, eng.save(workspace_id=wid, keys=["a"]))
    assert (folder / "a.txt").read_text("utf-8") == "Z2"
    # and the whole-file save of a single-file kind is content-aware the same way
    whole, wid2 = await opened(src)
    whole.commit("mcp:1", wid2, {"a": "new"})
    os.utime(src, ns=(10**18, 10**18))
    out = await whole.save(workspace_id=wid2)
    assert out["diskCommitted"] and read_json(src)["a"] == "new"


async def test_one_identity_per_key_from_read_to_write(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore(), backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    ws = eng.workspace
    assert ws.key_identity("a") == file_identity(folder / "a.txt")  # as read
    assert ws.key_identity("c") is None  # no file yet
    eng.commit("mcp:1", wid, {"a": "A2"})
    out = await eng.save(workspace_id=wid, keys=["a"])
    assert ws.key_identity("a") == file_identity(folder / "a.txt")  # as written
    assert ws.key_identities["a"].to_dict() == out["identities"]["a"]


async def test_a_source_with_its_own_authority_notes_changes_even_during_a_key_save(folder):
    from memkind import FolderStore

    store = FolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    ws = eng.workspace
    before = ws.revision
    assert eng.note_changed("tab", wid, ["a"]) == before + 1 and ws.dirty_keys() == ["a"]
    store.gate = held = _Held("a")
    saving = asyncio.create_task(eng.save(workspace_id=wid, keys=["a"]))
    try:
        await held.wait_started()
        later = eng.note_changed("tab", wid, ["a"])  # the collab log took an update meanwhile
    finally:
        held.go.set()
    out = await saving
    assert out["savedRevision"] == later - 1 and ws.dirty_keys() == ["a"]
    ws.forget_key("a")
    assert ws.dirty_keys() == [] and not ws.dirty


async def test_save_key_as_gives_the_key_a_new_file_refusing_to_overwrite_silently(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore(), backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2"})
    err = await raises(ErrorCode.TARGET_EXISTS, eng.save_key_as("a", folder / "b.txt", workspace_id=wid))
    assert (folder / "b.txt").read_text("utf-8") == "B"
    await raises(ErrorCode.SAME_AS_SOURCE, eng.save_key_as("a", folder / "a.txt", workspace_id=wid))
    seen = file_identity(folder / "b.txt")
    (folder / "b.txt").write_text("BB", "utf-8")  # changed after it was observed
    await raises(
        ErrorCode.TARGET_CHANGED,
        eng.save_key_as("a", folder / "b.txt", workspace_id=wid, overwrite=True, observed_identity=seen),
    )
    assert err.data  # the refusal carries what is there
    out = await eng.save_key_as("a", folder / "new.txt", workspace_id=wid)
    assert out["writtenPath"] == str(folder / "new.txt") and not eng.workspace.key_dirty("a")
    eng.commit("mcp:1", wid, {"a": "A3"})
    await eng.save(workspace_id=wid, keys=["a"])  # later saves go to the new file
    assert (folder / "new.txt").read_text("utf-8") == "A3" and (folder / "a.txt").read_text("utf-8") == "A"


async def test_close_key_asks_the_editors_then_follows_its_dirty_policy(folder):
    from memkind import FolderStore

    store = FolderStore()
    closed: list[str] = []
    store.close_key = lambda ws, key: closed.append(key)
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2", "b": "B2"})
    err = await raises(ErrorCode.UNSAVED_CHANGES, eng.close_key("a", workspace_id=wid))
    assert err.data["key"] == "a" and closed == []
    out = await eng.close_key("a", workspace_id=wid, dirty_policy="save")
    assert out["closed"] and not out["discarded"] and closed == ["a"]
    assert (folder / "a.txt").read_text("utf-8") == "A2"
    eng.drafts.register("tab-1")
    async with eng.bus.subscribe("ui") as sub:
        closing = asyncio.create_task(eng.close_key("b", workspace_id=wid, dirty_policy="discard"))
        prepare = await sub.get(5)
        assert prepare.data["operation"] == "close" and prepare.data["keys"] == ["b"]
        eng.drafts.ack(prepare.data["operationId"], "tab-1", False)
        out = await closing
    assert out["discarded"] and closed == ["a", "b"] and (folder / "b.txt").read_text("utf-8") == "B"
    assert eng.workspace.dirty_keys() == [] and not eng.workspace.dirty
    await raises(ErrorCode.NOT_FOUND, eng.close_key("zzz", workspace_id=wid))


def test_open_first_opens_synchronously_into_an_empty_engine_only(folder):
    from memkind import FolderStore

    eng = Engine(FolderStore())
    info = eng.lifecycle.open_first(folder)
    assert info["workspaceEpoch"] == 1 and eng.workspace.id == info["workspaceId"]
    assert sorted(eng.workspace.all_keys()) == ["a", "b"] and eng.lifecycle_op is None
    with pytest.raises(BridgeError) as ei:
        eng.lifecycle.open_first(folder)  # one is open: replacing it needs open() with its workspaceId
    assert ei.value.code == ErrorCode.STALE_WORKSPACE and eng.workspace.id == info["workspaceId"]


# -- open_key: one file opened as a new key of a folder workspace ---------------------------------------------


async def test_open_key_adds_a_clean_key_with_its_file_identity_recorded_once(folder):
    from memkind import OpeningFolderStore

    eng = Engine(OpeningFolderStore(), backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    ws = eng.workspace
    other = folder.parent / "c.txt"  # a file outside the folder, like a document opened with approval
    other.write_text("C", "utf-8")
    before = ws.revision
    async with eng.bus.subscribe("workspace") as sub:
        out = await eng.open_key(other, key="c", workspace_id=wid, caller="mcp:1")
        ev = await sub.get(1)
    assert out["opened"] is True and out["key"] == "c" and out["path"] == str(other)
    assert out["revision"] == before + 1 == ws.revision  # a new key is a change: no older revision names it
    assert out["identity"] == file_identity(other).to_dict() == ws.key_identity("c").to_dict()
    assert ws.read("c") == "C" and not ws.key_dirty("c") and not ws.dirty
    assert ev.data["event"] == "key-opened" and ev.data["key"] == "c" and ev.data["caller"] == "mcp:1"
    # the same file again is the same key, nothing recorded a second time
    again = await eng.open_key(other, key="c2", workspace_id=wid)
    assert again["opened"] is False and again["key"] == "c" and ws.revision == before + 1
    assert not ws.exists("c2")
    # the recorded identity is what a save of the key checks: its own file, written in place
    eng.commit("mcp:1", wid, {"c": "C2"})
    await eng.save(workspace_id=wid, keys=["c"])
    assert other.read_text("utf-8") == "C2" and not ws.dirty


async def test_open_key_is_not_ready_while_that_key_is_being_saved_and_per_key_otherwise(folder):
    from memkind import OpeningFolderStore

    store = OpeningFolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    eng.commit("mcp:1", wid, {"a": "A2"})
    store.gate = held = _Held("a")
    saving_a = asyncio.create_task(eng.save(workspace_id=wid, keys=["a"]))
    try:
        await held.wait_started()
        # opening a's file would hand back a key that is mid-save: refused at once, not waited for
        err = await raises(ErrorCode.NOT_READY, eng.open_key(folder / "a.txt", key="x", workspace_id=wid))
        assert err.data["keys"] == ["a"]
        # another file opens beside the save (admission is per key)
        (folder / "d.txt").write_text("D", "utf-8")
        out = await eng.open_key(folder / "d.txt", key="d", workspace_id=wid)
        assert out["opened"] and eng.workspace.read("d") == "D"
    finally:
        held.go.set()
    await saving_a
    assert (await eng.open_key(folder / "a.txt", key="x", workspace_id=wid))["key"] == "a"
    # and a key being opened is busy for a save or close of it until the open has finished
    (folder / "e.txt").write_text("E", "utf-8")
    loading = threading.Event()
    go = threading.Event()

    def hold(path):
        if path.name == "e.txt":
            loading.set()
            assert go.wait(10)

    store.load_gate = hold
    opening = asyncio.create_task(eng.open_key(folder / "e.txt", key="e", workspace_id=wid))
    try:
        assert await asyncio.to_thread(loading.wait, 10)
        assert eng.saving_keys == {"e"}
    finally:
        go.set()
    assert (await opening)["opened"] and eng.saving_keys == set()


async def test_open_key_refuses_a_file_changed_while_read_and_bad_paths(folder, src):
    from memkind import OpeningFolderStore

    store = OpeningFolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    f = folder.parent / "f.txt"
    f.write_text("F", "utf-8")
    store.load_gate = lambda path: (f.write_text("F, longer now", "utf-8"), os.utime(f, ns=(1, 1)))
    rev = eng.workspace.revision
    await raises(ErrorCode.SOURCE_CHANGED, eng.open_key(f, key="f", workspace_id=wid))
    assert not eng.workspace.exists("f") and eng.workspace.revision == rev and eng.saving_keys == set()
    store.load_gate = None
    await raises(ErrorCode.NOT_FOUND, eng.open_key(folder / "nope.txt", key="n", workspace_id=wid))
    await raises(ErrorCode.INVALID_ARGUMENT, eng.open_key("f.txt", key="n", workspace_id=wid))
    await raises(ErrorCode.STALE_WORKSPACE, eng.open_key(f, key="n", workspace_id="ws-other"))
    # a kind that opens its workspace as a whole has no per-key open
    whole = Engine(JsonStore())
    wid2 = (await whole.open(src))["workspaceId"]
    await raises(ErrorCode.UNSUPPORTED_CHANGE, whole.open_key(f, key="n", workspace_id=wid2))


async def test_two_opens_of_one_file_that_race_end_with_one_key(folder):
    from memkind import OpeningFolderStore

    store = OpeningFolderStore()
    eng = Engine(store, backup_on_save=False)
    wid = (await eng.open(folder))["workspaceId"]
    g = folder.parent / "g.txt"
    g.write_text("G", "utf-8")
    inner: list[dict] = []

    def open_meanwhile(path):  # while the first open reads, a second open of the same file completes
        if not inner:
            store.load_gate = None
            inner.append(eng.open_key_now(path, key="g2", workspace_id=wid))

    store.load_gate = open_meanwhile
    out = await eng.open_key(g, key="g1", workspace_id=wid)
    assert inner[0]["opened"] is True and inner[0]["key"] == "g2"
    assert out["opened"] is False and out["key"] == "g2" and not eng.workspace.exists("g1")
    assert eng.workspace.key_identity("g2") == file_identity(g)
