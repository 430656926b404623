"""Workspace identity, revision, overlay over a read-only source, and the engine's identity checks."""

from __future__ import annotations

import pickle

import pytest
from memkind import JsonStore, write_json

from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import DELETED, MappingSource, Workspace

pytestmark = pytest.mark.anyio


def test_overlay_shadows_the_source_without_changing_it():
    source = MappingSource({"a": "1", "b": "2"})
    ws = Workspace(source=source)
    ws.commit({"a": "one", "b": DELETED, "c": "three"})
    assert ws.read("a") == "one" and source.get("a") == "1"
    assert list(ws.all_keys()) == ["a", "c"]
    assert not ws.exists("b") and ws.exists("c")
    with pytest.raises(BridgeError) as ei:
        ws.read("b")
    assert ei.value.code == ErrorCode.NOT_FOUND
    with pytest.raises(BridgeError):
        ws.read("never")


def test_revision_advances_exactly_once_per_commit_and_dirty_follows():
    ws = Workspace(source=MappingSource())
    assert (ws.revision, ws.dirty) == (1, False)
    assert ws.commit({"a": "x", "b": "y"}) == 2
    assert ws.dirty and ws.last_changed == {"a": 2, "b": 2}
    ws.saved_revision = ws.revision
    assert not ws.dirty


def test_deleted_marker_is_a_singleton_even_through_pickle():
    assert pickle.loads(pickle.dumps(DELETED)) is DELETED


async def test_every_open_gets_a_new_id_and_advances_the_epoch(tmp_path):
    src = write_json(tmp_path / "w.json", {"a": "1"})
    eng = Engine(JsonStore())
    assert eng.identity_data() == {"workspaceId": None, "workspaceEpoch": 0, "revision": None}
    first = await eng.open(src)
    second = await eng.open(src, workspace_id=first["workspaceId"])  # same path again
    assert first["workspaceId"] != second["workspaceId"]
    assert (first["workspaceEpoch"], second["workspaceEpoch"]) == (1, 2)
    closed = await eng.close(workspace_id=second["workspaceId"])
    assert closed["workspaceEpoch"] == 3 and eng.workspace is None


async def test_stale_identity_carries_the_current_identity_in_data(tmp_path):
    src = write_json(tmp_path / "w.json", {"a": "1"})
    eng = Engine(JsonStore())
    info = await eng.open(src)
    eng.commit("ui", info["workspaceId"], {"a": "2"})
    with pytest.raises(BridgeError) as ei:
        eng.current(info["workspaceId"], expected_revision=1)
    assert ei.value.code == ErrorCode.STALE_WORKSPACE
    assert ei.value.data == {"workspaceId": info["workspaceId"], "workspaceEpoch": 1, "revision": 2}
    with pytest.raises(BridgeError) as ei:
        eng.commit("ui", "ws-old", {"a": "3"})
    assert ei.value.code == ErrorCode.STALE_WORKSPACE


async def test_commit_with_stale_revision_changes_nothing(tmp_path):
    eng = Engine(JsonStore())
    info = await eng.open(write_json(tmp_path / "w.json", {"a": "1"}))
    wid = info["workspaceId"]
    assert eng.commit("mcp:1", wid, {"a": "mcp"}, expected_revision=1) == 2
    with pytest.raises(BridgeError) as ei:
        eng.commit("ui", wid, {"a": "ui"}, expected_revision=1)
    assert ei.value.code == ErrorCode.STALE_WORKSPACE
    assert eng.read(wid, "a") == {"value": "mcp", "revision": 2}


async def test_operations_without_a_workspace_say_no_workspace():
    eng = Engine(JsonStore())
    with pytest.raises(BridgeError) as ei:
        eng.read("ws-x", "a")
    assert ei.value.code == ErrorCode.NO_WORKSPACE and ei.value.data["workspaceEpoch"] == 0


async def test_empty_commit_is_invalid(tmp_path):
    eng = Engine(JsonStore())
    info = await eng.open(None)
    with pytest.raises(BridgeError) as ei:
        eng.commit("ui", info["workspaceId"], {})
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


async def test_commit_is_published_on_the_bus(tmp_path):
    eng = Engine(JsonStore())
    info = await eng.open(None)
    async with eng.bus.subscribe("workspace") as sub:
        eng.commit("mcp:7", info["workspaceId"], {"k": "v"})
        ev = await sub.get(1)
    assert ev.data["event"] == "committed" and ev.data["revision"] == 2 and ev.data["caller"] == "mcp:7"
    assert ev.data["keys"] == ["k"] and ev.data["sourceDirty"] is True


async def test_commits_from_many_threads_lose_no_update_and_never_skip_a_revision():
    """Sync tools run in worker threads: read-modify-write with expected revisions, retried on STALE."""
    import threading

    eng = Engine(JsonStore())
    wid = (await eng.open(None))["workspaceId"]
    eng.commit("ui", wid, {"counter": 0})
    per_thread, threads = 100, 6
    stale = []

    def add_one(caller):
        done = 0
        while done < per_thread:
            snap = eng.read(wid, "counter")
            try:
                eng.commit(caller, wid, {"counter": snap["value"] + 1}, expected_revision=snap["revision"])
                done += 1
            except BridgeError as exc:
                assert exc.code == ErrorCode.STALE_WORKSPACE
                stale.append(1)

    workers = [threading.Thread(target=add_one, args=(f"mcp:{i}",)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    final = eng.read(wid, "counter")
    assert final["value"] == per_thread * threads
    assert final["revision"] == 2 + per_thread * threads  # exactly one revision per successful commit
