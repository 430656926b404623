"""A warm start (records from the disk cache) loads only what it needs: no `dataclasses` (with `inspect`,
`ast`, `dis`), no `typing`, no `json`, no lxml — each measurably part of a ~0.15 s `deskbridge sage …`
process (issue 12, SAGE-WARM). And the plain value classes that replaced the dataclasses still compare,
print and copy as the dataclasses did."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from deskbridge.kinds.sage.indexer import ProjectIndexer
from deskbridge.kinds.sage.model import AssetDef, SageIndex
from deskbridge.kinds.sage.records import FileRecords, extract_records
from deskbridge.kinds.sage.settings import DeskbridgeDirs, SageConfig

HEAVY = ("dataclasses", "inspect", "typing", "json", "lxml.etree", "deskbridge.core.errors")

_CHILD = r"""
import sys
from deskbridge.kinds.sage.indexer import ProjectIndexer
service = ProjectIndexer(sys.argv[1], sys.argv[2])
index = service.open_sync()
service.save_cache()
heavy = [m for m in sys.argv[3].split(",") if m in sys.modules]
print(index.stats["parsedFiles"], index.stats["recordsCacheHits"], index.stats["assetCount"], ",".join(heavy), sep="|")
"""


def _run(minimod: Any, home: Path) -> list[str]:
    env = {**os.environ, "DESKBRIDGE_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(minimod.mod), str(minimod.sdk), ",".join(HEAVY)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.stdout.splitlines()[-1].split("|")


def test_a_warm_start_loads_no_heavy_module(minimod: Any, tmp_path: Path) -> None:
    # Without compiled manifests, as the benchmark's RA3Afterdash: a manifest is read (through
    # `core.files`, which loads all of these) on every start, its assets are not cached.
    shutil.rmtree(minimod.sdk / "BuiltMods")
    # Files and folders written just now are "racy" (research/sage.md §1.5): a warm start hashes them
    # again, reading them through `core.files`. Ten minutes old, they are trusted by their stat.
    past = time.time() - 600
    for folder in (minimod.mod, minimod.sdk):
        for dirpath, _dirs, files in os.walk(folder, topdown=False):
            for name in files:
                os.utime(os.path.join(dirpath, name), (past, past))
            os.utime(dirpath, (past, past))
    home = tmp_path / "home"
    parsed, _hits, assets, heavy = _run(minimod, home)  # cold: writes the caches
    assert int(parsed) > 0
    parsed, hits, warm_assets, heavy = _run(minimod, home)
    assert int(parsed) == 0 and int(hits) > 0
    assert warm_assets == assets
    assert heavy == "", f"a warm start imported {heavy}"


def test_value_classes_compare_print_and_copy_like_dataclasses(minimod: Any, tmp_path: Path) -> None:
    a = AssetDef("GameObject", "Tank", "/m/a.xml", 3, "project")
    assert a == AssetDef("GameObject", "Tank", "/m/a.xml", 3, "project", -1, "", "")
    assert a != AssetDef("GameObject", "Tank", "/m/a.xml", 4, "project")
    assert repr(a).startswith("AssetDef(type='GameObject', id='Tank', file='/m/a.xml', line=3,")
    rec = extract_records(
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><A id="x"/></AssetDeclaration>', None
    )
    head, blob = rec.to_cache()
    assert FileRecords.from_cache(head, blob) == FileRecords.from_cache(head, blob)
    assert FileRecords() == FileRecords() and FileRecords().assets is not FileRecords().assets

    os.environ["DESKBRIDGE_HOME"] = str(tmp_path / "home")
    try:
        index = ProjectIndexer(minimod.mod, minimod.sdk, use_cache=False).open_sync()
    finally:
        del os.environ["DESKBRIDGE_HOME"]
    copy = index.replace(build_id=index.build_id + 1)
    assert isinstance(copy, SageIndex) and copy.build_id == index.build_id + 1
    # As `dataclasses.replace`: every other field is the same object, caches included.
    assert copy.files is index.files and copy.by_id is index.by_id and copy._chains is index._chains
    assert copy != index and copy.replace(build_id=index.build_id) == index

    # The frozen settings stay immutable.
    dirs = DeskbridgeDirs(cache=Path("/c"), data=Path("/d"), config=Path("/f"))
    assert (dirs.cache, dirs.data, dirs.config) == (Path("/c"), Path("/d"), Path("/f"))
    assert SageConfig() == SageConfig(sdk=None, search_paths=())
    try:
        dirs.cache = Path("/x")  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("DeskbridgeDirs must be immutable")


def test_the_definition_tables_are_made_on_first_use_and_equal_a_cold_builds(
    minimod: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """~17 k `AssetDef`s were a third of a warm start: an index now makes `assets`, `by_id`, `defines` and
    `diagnostics` when first read, once, whichever thread reads first."""
    import threading

    from deskbridge.kinds.sage import queries

    monkeypatch.setenv("DESKBRIDGE_HOME", str(tmp_path / "home"))
    cold_service = ProjectIndexer(minimod.mod, minimod.sdk)
    cold = cold_service.open_sync()
    assert cold_service.save_cache()
    warm = ProjectIndexer(minimod.mod, minimod.sdk).open_sync()
    assert warm.stats["parsedFiles"] == 0
    assert not {"assets", "by_id", "defines", "diagnostics"} & set(vars(warm))
    assert warm.stats["assetCount"] == cold.stats["assetCount"] > 0  # counted without the tables
    seen: list[object] = []
    threads = [threading.Thread(target=lambda: seen.append(warm.by_id)) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 4 and all(s is seen[0] for s in seen)
    assert warm.assets == cold.assets and warm.by_id == cold.by_id and warm.defines == cold.defines
    assert warm.diagnostics == cold.diagnostics and warm.diagnostics
    assert sum(len(v) for v in warm.by_id.values()) == warm.stats["assetCount"]
    assert queries.find_asset(warm, "Tank") == queries.find_asset(cold, "Tank")
    try:
        warm.no_such_field  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("unknown attributes must still raise AttributeError")


def test_cached_records_keep_their_assets_marshalled_until_read() -> None:
    rec = extract_records(
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><A id="x"/><B id="y"/></AssetDeclaration>', None
    )
    assert rec.assets == [("A", "x", 1), ("B", "y", 1)]
    head, blob = rec.to_cache()
    cached = FileRecords.from_cache(head, blob)
    assert type(cached.asset_data) is bytes and cached.asset_count == 2  # counted, not decoded
    assert type(cached.asset_data) is bytes
    assert cached == FileRecords.from_cache(head, blob)  # equality decodes both
    assert cached.assets == rec.assets and type(cached.asset_data) is list
    again = FileRecords.from_cache(*cached.to_cache())
    assert again == cached and again.replace(last_good=True).assets == rec.assets


_COLD_CHILD = r"""
import sys
from deskbridge.kinds.sage import parallel
from deskbridge.kinds.sage.indexer import ProjectIndexer
loaded = []
real_fork = parallel._fork
def spy(*args, **kwargs):
    loaded.append("deskbridge.core.files" in sys.modules)
    return real_fork(*args, **kwargs)
parallel._fork = spy
service = ProjectIndexer(sys.argv[1], sys.argv[2])
index = service.open_sync()
service.save_cache()
print(index.stats["parsedFiles"], len(loaded), any(loaded), service.store.cache_file.is_file(), sep="|")
"""


def test_a_cold_build_forks_its_workers_before_loading_core_files(minimod: Any, tmp_path: Path) -> None:
    """The workers read files through `core.reading`; `core.files` (dataclasses, ctypes, secrets, platform,
    shutil, blake3: ~60 M instructions) is loaded only afterwards, for the cache writes — everything
    imported before the fork delays every worker (issue 12, SAGE-COLD)."""
    env = {**os.environ, "DESKBRIDGE_HOME": str(tmp_path / "home"), "DESKBRIDGE_SAGE_WORKERS": "2"}
    out = subprocess.run(
        [sys.executable, "-c", _COLD_CHILD, str(minimod.mod), str(minimod.sdk)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    parsed, forks, core_files_loaded, cached = out.stdout.splitlines()[-1].split("|")
    assert int(parsed) > 0 and int(forks) == 3  # two workers and the schema process
    assert core_files_loaded == "False"
    assert cached == "True"
