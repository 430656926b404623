"""The service a server keeps per project: background builds, live re-index, cache, consistency, snapshots."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.sage import queries
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.snapshot import read_snapshot, snapshot_dir


@pytest.fixture
def mod_copy(sage_data, tmp_path) -> Path:
    dest = tmp_path / "RA3Afterdash"
    shutil.copytree(sage_data.mod, dest)
    return dest


def test_incremental_reindex_after_editing_a_copy_of_a_real_file(mod_copy, sage_data):
    service = SageService(mod_copy, sage_data.sdk)
    before = service.open_sync()
    assert before.refs_to  # built: the patch must update it in place of a rebuild
    weapon = mod_copy / "Data/Mod/Units/Tanya/WeaponTemplate.xml"
    text = weapon.read_text(encoding="utf-8")
    weapon.write_text(
        text.replace('id="AlliedCommandoDesertEagles"', 'id="AlliedCommandoGoldenEagles"'), encoding="utf-8"
    )
    after = service.reindex_sync([str(weapon)])
    assert after.stats.get("patchedFiles") == 1  # patched, not rebuilt
    assert after.build_id > before.build_id
    assert queries.find_asset(after, "AlliedCommandoGoldenEagles", "WeaponTemplate")["total"] == 1
    old = queries.find_asset(after, "AlliedCommandoDesertEagles", "WeaponTemplate")["items"]
    assert all(d["origin"] == "sdk" for d in old)  # only the vanilla one is left
    # the old index object is untouched: answers already handed out stay consistent
    assert any(
        d["origin"] == "project"
        for d in queries.find_asset(before, "AlliedCommandoDesertEagles", "WeaponTemplate")["items"]
    )
    # the patched index equals a full rebuild
    full = SageService(mod_copy, sage_data.sdk, use_cache=False).open_sync()
    assert after.stats["assetCount"] == full.stats["assetCount"]
    assert after.stats["referenceCount"] == full.stats["referenceCount"]
    assert {k: [(d.file, d.line) for d in v] for k, v in after.by_id.items()} == {
        k: [(d.file, d.line) for d in v] for k, v in full.by_id.items()
    }
    assert after.refs_built is not None
    assert {k: [(f, list(r)) for f, r in v] for k, v in after.refs_to.items()} == {
        k: [(f, list(r)) for f, r in v] for k, v in full.refs_to.items()
    }


def test_a_new_include_triggers_a_full_walk(mod_copy, sage_data):
    service = SageService(mod_copy, sage_data.sdk)
    service.open_sync()
    units = mod_copy / "Data/Mod/Units.xml"
    units.write_text(
        units.read_text(encoding="utf-8-sig").replace(
            "</Includes>", '<Include type="all" source="Units/VAPrydwen.xml" /></Includes>'
        ),
        encoding="utf-8",
    )
    after = service.reindex_sync([str(units)])
    assert "patchedFiles" not in after.stats
    assert queries.is_file_active(after, "Data/Mod/Units/VAPrydwen.xml")["compiled"]


def test_warm_start_reads_the_cache_and_content_only_changes_invalidate_it(mod_copy, sage_data):
    cold = SageService(mod_copy, sage_data.sdk)
    first = cold.open_sync()
    assert cold.save_cache()
    assert first.stats["parsedFiles"] == 1152
    warm = SageService(mod_copy, sage_data.sdk)
    again = warm.open_sync()
    assert again.stats["parsedFiles"] == 0 and again.stats["recordsCacheHits"] == 1152
    # Same size, same mtime: only the content (and ctime) differ.
    target = mod_copy / "Data/Mod/Units/Tanya/WeaponTemplate.xml"
    data = target.read_bytes()
    st = os.stat(target)
    target.write_bytes(data.replace(b'AttackRange="140.0"', b'AttackRange="999.0"'))
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(target).st_size == st.st_size and os.stat(target).st_mtime_ns == st.st_mtime_ns
    third = SageService(mod_copy, sage_data.sdk).open_sync()
    assert third.stats["parsedFiles"] == 1


def test_racy_entries_are_checked_by_content_hash(mod_copy, sage_data):
    """A file written in the same instant it was cached is re-checked by hash, not trusted by its stat."""
    service = SageService(mod_copy, sage_data.sdk)
    service.open_sync()
    target = str(mod_copy / "Data/Mod/Units/Tanya/WeaponTemplate.xml")
    entry = service.store._entries[target]
    entry[4] = os.stat(target).st_mtime_ns  # cached "at" the file's own mtime: ambiguous
    service.store.invalidate([target])
    before = service.store.hash_checks
    assert service.store.get(target) is not None
    assert service.store.hash_checks == before + 1


def test_consistency_options_and_states(minimod):
    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=60)
        assert service.status()["state"] == "no_index"
        with pytest.raises(BridgeError) as err:
            await service.usable_index()
        assert err.value.code == "NOT_READY" and "sage_get_status" in err.value.hint
        await service.start(watch=False)
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        status = service.status()
        assert status["state"] == "ready" and status["complete"] and not status["stale"]
        assert status["projectDir"] == str(minimod.mod) and status["buildId"] == index.build_id
        # a change arrives: the old index keeps answering but is flagged; strict callers are refused
        service._pending.add(str(minimod.mod / "Data/Units/Tank.xml"))
        service.state = "stale"
        assert (await service.usable_index()).build_id == index.build_id
        assert service.status()["stale"] is True
        with pytest.raises(BridgeError) as err:
            await service.usable_index(allow_stale=False)
        assert err.value.code == "INDEX_STALE"
        with pytest.raises(BridgeError) as err:
            await service.usable_index(wait_for_index=True, timeout_s=0.2)
        assert err.value.code == "NOT_READY"
        service._pending.clear()
        await service.changed([str(minimod.mod / "Data/Units/Tank.xml")])
        assert service.status()["state"] == "ready" and not service.status()["stale"]
        await service.stop()

    asyncio.run(scenario())


def test_the_watcher_reindexes_and_the_snapshot_waits_for_quiet(minimod, deskbridge_home):
    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=0.5)
        await service.start(watch=True)
        await service.usable_index(wait_for_index=True, timeout_s=30)
        await asyncio.sleep(0.3)  # let the watcher settle in
        assert service.status()["watching"] is True
        tank = minimod.mod / "Data/Units/Tank.xml"
        tank.write_text(tank.read_text().replace('id="TankGunVet"', 'id="TankGunElite"'))
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            index = service.index
            if index is not None and queries.find_asset(index, "TankGunElite")["total"]:
                break
            await asyncio.sleep(0.1)
        else:
            pytest.fail("the watcher did not re-index the edited file")
        folder = snapshot_dir(minimod.mod)
        assert not (folder / "current.json.gz").exists()  # not written on every change
        deadline = time.monotonic() + 10
        while not (folder / "current.json.gz").exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        snap = read_snapshot(minimod.mod)
        assert any(a["id"] == "TankGunElite" for a in snap["assets"])
        await service.stop()

    asyncio.run(scenario())


def test_stop_writes_the_snapshot_once_best_effort(minimod):
    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
        await service.start(watch=False)
        await service.usable_index(wait_for_index=True, timeout_s=30)
        assert not (snapshot_dir(minimod.mod) / "current.json.gz").exists()
        await service.stop()
        assert (snapshot_dir(minimod.mod) / "current.json.gz").exists()

    asyncio.run(scenario())


def test_snapshot_schema_v1_is_gzip_and_keeps_the_previous_one(minimod):
    service = SageService(minimod.mod, minimod.sdk)
    service.open_sync()
    first = service.write_snapshot_sync()
    assert first is not None and first.name == "current.json.gz"
    assert first.parent.name.startswith("minimod-") and len(first.parent.name) == len("minimod-") + 12
    service.open_sync()
    service.write_snapshot_sync()
    snap = json.loads(gzip.decompress(first.read_bytes()))
    prev = read_snapshot(minimod.mod, which="previous")
    assert prev["buildId"] < snap["buildId"]
    assert set(snap) >= {
        "schemaVersion",
        "project",
        "generatedAt",
        "buildId",
        "phase",
        "complete",
        "stale",
        "stats",
        "assets",
        "defines",
        "references",
        "includeGraph",
        "sourceCandidates",
    }
    assert snap["schemaVersion"] == 1 and snap["project"] == str(minimod.mod)
    tank = next(a for a in snap["assets"] if a["id"] == "Tank")
    assert tank == {
        "type": "GameObject",
        "id": "Tank",
        "file": "Data/Units/Tank.xml",
        "line": 4,
        "origin": "project",
        "stream": "static",
        "viaInstance": False,
        "streams": {"static": "all"},
    }
    assert "Data/Unused.xml" in snap["sourceCandidates"]
    assert not [p for p in first.parent.iterdir() if p.name.endswith(".tmp")]


def test_sdk_from_environment_and_config(minimod, monkeypatch, deskbridge_home):
    monkeypatch.setenv("DESKBRIDGE_SAGE_SDK", str(minimod.sdk))
    assert SageService(minimod.mod).sdk == minimod.sdk
    monkeypatch.delenv("DESKBRIDGE_SAGE_SDK")
    config = deskbridge_home / "config" / "config.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"sage": {"sdk": str(minimod.sdk), "searchPaths": [str(minimod.root)]}}))
    service = SageService(minimod.mod)
    assert service.sdk == minimod.sdk and str(minimod.root) in service.search.data
    monkeypatch.setenv("DESKBRIDGE_SAGE_SDK", str(minimod.mod))  # not an SDK
    with pytest.raises(BridgeError) as err:
        SageService(minimod.mod)
    assert err.value.code == "INVALID_ARGUMENT" and "DESKBRIDGE_SAGE_SDK" in err.value.message


def test_a_failed_build_keeps_the_last_good_index_answering(minimod, monkeypatch):
    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
        await service.start(watch=False)
        good = await service.usable_index(wait_for_index=True, timeout_s=30)

        def broken(*args, **kwargs):
            raise OSError("disk on fire")

        monkeypatch.setattr(service.builder, "build", broken)
        await service.rebuild()
        status = service.status()
        assert status["state"] == "error" and "disk on fire" in status["error"]
        assert (await service.usable_index()).build_id == good.build_id
        assert queries.find_asset(service.index, "Tank")["total"] == 1
        await service.stop()

    asyncio.run(scenario())


def test_stop_during_a_build_saves_no_cache_that_mixes_two_builds(minimod, monkeypatch):
    """`stop()` stops waiting for a build after a while; the build thread goes on. Saving then iterated the
    resolver's and the store's dicts while the build grew them ("dictionary changed size during
    iteration") and would have written a cache half of one build: now nothing is saved until it ends."""
    import threading

    from deskbridge.kinds.sage import service as service_module
    from deskbridge.kinds.sage.indexer import ProjectIndexer

    monkeypatch.setattr(service_module, "STOP_WAIT_S", 0.2)
    service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
    cache = service.store.cache_file
    assert cache is not None and not cache.exists()
    reached, release = threading.Event(), threading.Event()
    real_get = service.store.get
    calls = []

    def slow_get(path):
        calls.append(path)
        if len(calls) == 3:  # two files parsed: the store is dirty, the resolver has answers
            reached.set()
            release.wait(30)
        return real_get(path)

    monkeypatch.setattr(service.store, "get", slow_get)

    async def scenario() -> None:
        await service.start(watch=False)
        assert await asyncio.to_thread(reached.wait, 30)
        assert service.building()
        assert service.save_cache() is False  # refused mid-build, from any caller
        await service.stop()
        assert not cache.exists()
        release.set()
        assert service._build_task is not None
        await service._build_task  # the build ends and saves its own, whole cache
        assert not service.building()
        assert cache.exists()

    try:
        asyncio.run(scenario())
    finally:
        release.set()
    built = service.index
    assert built is not None and built.complete
    warm = ProjectIndexer(minimod.mod, minimod.sdk)
    index = warm.open_sync()
    assert warm.store.parsed == 0  # everything came from the saved cache
    assert sorted(index.assets) == sorted(built.assets)


def test_the_resolvers_exported_state_is_a_copy(minimod):
    old = time.time() - 60  # folders listed right after they changed are not persisted (racy)
    for folder in [minimod.root, *(p for p in minimod.root.rglob("*") if p.is_dir())]:
        os.utime(folder, (old, old))
    service = SageService(minimod.mod, minimod.sdk, use_cache=False)
    service.open_sync()
    state = service.resolver.export_state()
    assert state is not None and state["dirs"] and state["memo"]
    dirs, memo = dict(state["dirs"]), list(state["memo"])
    service.resolver.tree.mtimes["/nowhere"] = 1
    service.resolver.resolve("DATA:Nowhere/Else.xml", None)
    assert state["dirs"] == dirs and state["memo"] == memo


def test_a_warm_start_that_resolved_nothing_new_saves_nothing(minimod):
    old = time.time() - 60  # folders listed right after they changed are not persisted (racy)
    for path in [minimod.root, *minimod.root.rglob("*")]:
        os.utime(path, (old, old))
    cold = SageService(minimod.mod, minimod.sdk)
    cold.open_sync()
    assert cold.save_cache()
    warm = SageService(minimod.mod, minimod.sdk)
    warm.open_sync()
    assert warm.store.parsed == 0 and warm.resolver.changed is False  # every include from the cache
    assert warm.save_cache() is False
    warm.resolver.resolve("DATA:Nowhere/Else.xml", None)  # a new answer is saved
    assert warm.resolver.changed is True and warm.save_cache() is True
    again = SageService(minimod.mod, minimod.sdk)
    again.open_sync()
    assert again.resolver._memo.get(("DATA:Nowhere/Else.xml", "")) is None
    assert ("DATA:Nowhere/Else.xml", "") in again.resolver._memo


def test_torn_caches_are_ignored_and_built_again(minimod, deskbridge_home):
    """The records and schema caches are written without fsync (`durable=False`): after a power cut either
    may be empty or cut short, and the next start must then simply build again, never fail."""
    from deskbridge.kinds.sage.indexer import ProjectIndexer

    cold = ProjectIndexer(minimod.mod, minimod.sdk)
    built = cold.open_sync()
    assert cold.save_cache()
    caches = [p for p in deskbridge_home.rglob("*") if p.is_file() and p.suffix in (".marshal", ".gz")]
    assert {p.suffix for p in caches} == {".marshal", ".gz"}
    for cut in (0.5, 0.0):
        for p in caches:
            data = p.read_bytes()
            p.write_bytes(data[: int(len(data) * cut)])
        again = ProjectIndexer(minimod.mod, minimod.sdk)
        index = again.open_sync()
        assert again.store.cache_hits == 0 and again.store.parsed >= len(index.files) > 0  # all parsed again
        assert again.model() is not None  # the torn schema cache was compiled again
        assert sorted(index.assets) == sorted(built.assets)
        assert again.save_cache()


def test_freshness_final_sees_a_file_created_where_an_include_pointed_at_nothing(minimod):
    """QA: a query with freshness final right after a save must see it, also when the saved file is new —
    the missing file an include names, or a Data/Mod.xml written back after it was deleted. No watcher
    runs here, so only the check of the disk before answering can notice."""

    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
        await service.start(watch=False)
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        assert queries.find_asset(index, "Plane")["total"] == 0
        minimod.write(  # `Mod.xml` includes Missing.xml
            "Data/Missing.xml",
            '<AssetDeclaration xmlns="uri:ea.com:eala:asset"><GameObject id="Plane"/></AssetDeclaration>',
        )
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        [row] = queries.find_asset(index, "Plane")["items"]
        assert row["file"] == "Data/Missing.xml" and row["origin"] == "project"
        mod_xml = minimod.mod / "Data/Mod.xml"
        text = mod_xml.read_bytes()
        mod_xml.unlink()
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        assert queries.find_asset(index, "Plane")["items"][0]["origin"] == "inactive"
        mod_xml.write_bytes(text)
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        assert queries.find_asset(index, "Plane")["items"][0]["origin"] == "project"
        (minimod.mod / "Data/.Mod.xml.swp").write_bytes(b"an editor's swap file")
        assert (await service.usable_index(wait_for_index=True, timeout_s=30)).build_id == index.build_id
        await service.stop()

    asyncio.run(scenario())


def test_a_renamed_folder_reported_by_the_watcher_is_reindexed(minimod):
    """QA: renaming a folder (`Data/Units` → `Data/units`, as Windows Explorer does on a case change) made
    the watcher report the two folder paths only; they were dropped for not ending in .xml, and the index
    kept answering with Data/Units/Tank.xml — a path that no longer exists — as `ready`."""

    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
        await service.start(watch=False)
        index = await service.usable_index(wait_for_index=True, timeout_s=30)
        assert queries.find_asset(index, "Tank")["items"][0]["file"] == "Data/Units/Tank.xml"
        old, new = minimod.mod / "Data" / "Units", minimod.mod / "Data" / "units"
        old.rename(new)
        index = await service.changed([str(old), str(new)])  # what watchfiles reports for the rename
        assert index is not None
        assert queries.find_asset(index, "Tank")["items"][0]["file"] == "Data/units/Tank.xml"
        (minimod.mod / "Data" / ".git-objects-like").mkdir()  # a folder no include can reach: no rebuild
        again = await service.changed([str(minimod.mod / "Data" / ".git-objects-like" / "ab")])
        assert again is not None and again.build_id == index.build_id
        await service.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("gone_s", [0.0, 1.0])
def test_the_watcher_follows_a_mod_folder_that_was_moved_away_and_restored(minimod, deskbridge_home, gone_s):
    """A restore from a backup or a branch checkout replaces the whole folder: the watch on the old folder saw
    nothing after that (or the moved folder's files under the old name), and the index stayed stale for good."""

    async def wait_for(service: SageService, asset: str) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            index = service.index
            if index is not None and queries.find_asset(index, asset)["total"]:
                return
            await asyncio.sleep(0.1)
        pytest.fail(f"the watcher never indexed {asset}")

    async def scenario() -> None:
        service = SageService(minimod.mod, minimod.sdk, snapshot_quiet_s=600)
        await service.start(watch=True)
        await service.usable_index(wait_for_index=True, timeout_s=30)
        await asyncio.sleep(0.3)
        backup = minimod.mod.with_name("MiniMod.bak")
        minimod.mod.rename(backup)
        await asyncio.sleep(gone_s)  # 0: back before the watcher has even seen it go
        shutil.copytree(backup, minimod.mod)  # the restore, with one asset renamed
        tank = minimod.mod / "Data/Units/Tank.xml"
        tank.write_text(tank.read_text().replace('id="TankGunVet"', 'id="TankGunRestored"'))
        await wait_for(service, "TankGunRestored")
        (backup / "Data/Units/Tank.xml").write_text("<broken")  # the moved-away copy is no longer watched
        tank.write_text(tank.read_text().replace('id="TankGunRestored"', 'id="TankGunEditedAfter"'))
        await wait_for(service, "TankGunEditedAfter")
        assert service.status()["watching"] is True
        await service.stop()

    asyncio.run(scenario())
