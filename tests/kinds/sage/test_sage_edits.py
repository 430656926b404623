"""Saves on a copy of the real RA3Afterdash mod: a broken file keeps its last good records, a build that loses
most assets is degraded, and a strict query right after a write answers from the written files (issue 12,
defects 3 and 5)."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import pytest

from deskbridge.core.tools import CallContext
from deskbridge.kinds.sage import queries
from deskbridge.kinds.sage.indexer import ProjectIndexer
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.tools import sage_tools


@pytest.fixture
def mod_copy(sage_data, tmp_path) -> Path:
    mod = tmp_path / "RA3Afterdash"
    shutil.copytree(sage_data.mod, mod)
    return mod


def write(path: Path, text: str | bytes) -> None:
    """Write and make sure the modification time moves (coarse clocks)."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    if path.stat().st_mtime_ns == before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


def test_emptying_mod_xml_keeps_the_last_good_index_and_says_degraded(sage_data, mod_copy):
    indexer = ProjectIndexer(mod_copy, sage_data.sdk, use_cache=False)
    good = indexer.open_sync()
    assets = good.stats["assetCount"]
    assert indexer.status()["state"] == "ready" and not good.degraded
    mod_xml = mod_copy / "Data" / "Mod.xml"
    write(mod_xml, "")
    broken = indexer.reindex_sync([str(mod_xml)])
    assert broken.stats["assetCount"] == assets  # was 102 of 12,599 before the fix
    status = indexer.status()
    assert status["state"] == "degraded" and "Data/Mod.xml" in status["degraded"][0]
    diags = queries.list_diagnostics(broken, "parse-error", "Data/Mod.xml")["items"]
    assert diags and any("last version that did" in d["message"] for d in diags)
    assert queries.find_asset(broken, "AlliedScoutInfantry", "GameObject")["total"] == 2
    # Fixed again: ready, nothing kept.
    write(mod_xml, (sage_data.mod / "Data" / "Mod.xml").read_bytes())
    fixed = indexer.reindex_sync([str(mod_xml)])
    assert indexer.status()["state"] == "ready" and not fixed.degraded
    assert not queries.list_diagnostics(fixed, "parse-error", "Data/Mod.xml")["items"]


def test_a_unit_file_cut_in_half_keeps_its_units(sage_data, mod_copy):
    indexer = ProjectIndexer(mod_copy, sage_data.sdk, use_cache=False)
    good = indexer.open_sync()
    unit = mod_copy / "Data" / "Mod" / "Units" / "Attack Dog" / "GameObject.xml"
    data = unit.read_bytes()
    write(unit, data[: len(data) // 2])
    broken = indexer.reindex_sync([str(unit)])
    assert broken.stats["assetCount"] == good.stats["assetCount"]
    items = queries.find_asset(broken, "AlliedScoutInfantry", "GameObject")["items"]
    assert [i["file"] for i in items if i["origin"] == "project"] == [
        "Data/Mod/Units/Attack Dog/GameObject.xml"
    ]
    assert indexer.status()["state"] == "degraded"


def test_a_save_that_loses_most_assets_is_published_as_degraded(sage_data, mod_copy):
    indexer = ProjectIndexer(mod_copy, sage_data.sdk, use_cache=False)
    indexer.open_sync()
    mod_xml = mod_copy / "Data" / "Mod.xml"
    text = mod_xml.read_text(encoding="utf-8-sig")
    start, end = text.index("<Includes>"), text.index("</Includes>")
    # Valid XML that includes nothing any more: no parse error, but almost every asset is gone.
    write(mod_xml, text[:start] + "<Includes></Includes>" + text[end + len("</Includes>") :])
    lost = indexer.reindex_sync([str(mod_xml)])
    status = indexer.status()
    assert lost.stats["assetCount"] < 200
    assert status["state"] == "degraded" and "fewer than the last good one" in status["degraded"][0]


def test_a_strict_query_right_after_a_write_sees_the_write(sage_data, mod_copy):
    """Defect 5: with the watcher's 300 ms debounce, `final`/`strict` answered from the pre-edit index with
    stale false. A strict query now checks the modification times of the files it answers from."""
    ctx = CallContext(caller="test")

    async def main() -> None:
        service = SageService(mod_copy, sage_data.sdk, use_cache=False, snapshot_quiet_s=60)
        await service.start(watch=True)
        try:
            tools = {t.name: t for t in sage_tools(service)}

            async def call(name: str, **raw: object) -> dict:
                spec = tools[name]
                return await spec.handler(ctx, spec.args.model_validate(raw))

            first = await call(
                "sage_find_asset", id="AlliedScoutInfantry", type="GameObject", freshness="final"
            )
            assert first["index"]["state"] == "ready"
            path = mod_copy / "Data" / "Mod" / "Units" / "Attack Dog" / "GameObject.xml"
            text = path.read_text(encoding="utf-8-sig")
            decl, _, body = text.partition("\n")
            shifted = decl + "\n\n\n\n" + body  # every definition moves down three lines
            write(path, shifted)
            for freshness in ("final", "strict"):
                out = await call(
                    "sage_find_asset", id="AlliedScoutInfantry", type="GameObject", freshness=freshness
                )
                mod_def = next(i for i in out["items"] if i["origin"] == "project")
                assert mod_def["line"] == 10, (freshness, mod_def, out["index"])
                assert out["index"]["stale"] is False
            legacy = await call(
                "sage_find_asset",
                id="AlliedScoutInfantry",
                type="GameObject",
                waitForIndex=True,
                allowStale=False,
            )
            assert next(i for i in legacy["items"] if i["origin"] == "project")["line"] == 10
        finally:
            await service.stop()

    t = time.perf_counter()
    asyncio.run(main())
    assert time.perf_counter() - t < 120
