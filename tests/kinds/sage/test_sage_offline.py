"""A SAGE mod with no server running: `deskbridge mcp --project` answers from the saved snapshot, says so, and
refuses what only the live index can answer instead of returning an empty list."""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from deskbridge.kinds.sage.service import SageService

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def bridge(m: Any) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "deskbridge", "mcp", "--project", str(m.mod), "--sdk", str(m.sdk)],
        env=dict(os.environ),
    )


async def test_no_snapshot_says_how_to_get_one(minimod: Any) -> None:
    async with Client(bridge(minimod)) as client:
        status = await client.call_tool("sage_get_status", {})
    assert status.is_error and status.structured_content["code"] == "NOT_READY"
    assert "deskbridge serve" in status.structured_content["hint"]


async def test_answers_come_from_the_snapshot_and_say_so(minimod: Any) -> None:
    service = SageService(minimod.mod, minimod.sdk, use_cache=False)
    service.open_sync()
    service.write_snapshot_sync()
    async with Client(bridge(minimod)) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"sage_find_asset", "sage_get_asset_references"} <= names  # the live tool list, same schemas
        found = (await client.call_tool("sage_find_asset", {"id": "tank"})).structured_content
        assert found["source"] == "snapshot" and found["index"]["source"] == "snapshot"
        assert found["snapshotAgeSeconds"] >= 0 and found["items"][0]["file"] == "Data/Units/Tank.xml"
        refs = (await client.call_tool("sage_find_references", {"id": "TankGun"})).structured_content
        assert refs["total"] >= 1 and refs["items"][0]["from"]["id"] == "Tank"  # the live answer's shape
        define = (await client.call_tool("sage_find_define", {"name": "HELTH"})).structured_content
        assert define["total"] == 0 and define["candidates"] == ["HEALTH"]
        typo = (await client.call_tool("sage_find_references", {"id": "TankGnu"})).structured_content
        assert typo["total"] == 0 and "sage_find_asset" in typo["hint"]
        chain = await client.call_tool("sage_get_inheritance_chain", {"type": "GameObject", "id": "Tank"})
        assert [s["id"] for s in chain.structured_content["chain"]] == ["Tank", "BaseUnit"]
        active = (
            await client.call_tool("sage_is_file_active", {"path": "Data/Unused.xml"})
        ).structured_content
        assert active["active"] is False
        # QA: a Windows spelling finds the file under its own name; a path outside is refused as live
        windows = await client.call_tool("sage_is_file_active", {"path": "data\\units\\TANK.xml"})
        assert windows.structured_content["path"] == "Data/Units/Tank.xml"
        assert windows.structured_content["active"] is True
        for outside in ("/etc/passwd", "../../../etc/passwd"):
            refused = await client.call_tool("sage_is_file_active", {"path": outside})
            assert refused.is_error and refused.structured_content["code"] == "ACCESS_DENIED", outside
        definition = await client.call_tool(
            "sage_get_definition", {"type": "WeaponTemplate", "id": "TankGun"}
        )
        shown = definition.structured_content
        # QA: the live answer's shape (excerpt, startLine, definitionCount, the row's file and line), not
        # a nested `definition` and `xml` that an agent following the live tool's answer would not find
        assert "TankGun" in shown["excerpt"] and shown["file"] == "Data/Units/Tank.xml"
        assert shown["startLine"] == shown["line"] and shown["definitionCount"] == 1 and shown["which"] == 0
        wrong = await client.call_tool(
            "sage_get_definition", {"type": "WeaponTemplate", "id": "TankGun", "which": 5}
        )
        assert wrong.is_error and wrong.structured_content["code"] == "INVALID_ARGUMENT"
        assert "Call sage_get_definition with which between 0 and 0" in wrong.structured_content["hint"]
        big = await client.call_tool("sage_list_assets_by_type", {"type": "GameObject", "limit": 5000})
        assert big.is_error and "{tool}" not in big.structured_content["hint"]  # named, as live
        assert "sage_list_assets_by_type" in big.structured_content["hint"]
        live_only = await client.call_tool("sage_get_asset_references", {"type": "GameObject", "id": "Tank"})
        assert live_only.is_error and live_only.structured_content["code"] == "NOT_READY"
        assert "deskbridge serve" in live_only.structured_content["hint"]


async def test_a_strict_question_is_never_answered_from_a_snapshot_older_than_the_project(
    minimod: Any,
) -> None:
    """Offline, `freshness: strict` is INDEX_STALE once a project file changed (or appeared) after the
    snapshot's index was built, naming the file; `newest` still answers, saying `stale` and which files."""
    service = SageService(minimod.mod, minimod.sdk, use_cache=False)
    service.open_sync()
    service.write_snapshot_sync()
    async with Client(bridge(minimod)) as client:
        fresh = await client.call_tool("sage_find_asset", {"id": "tank", "freshness": "strict"})
        assert not fresh.is_error, fresh.structured_content
        assert fresh.structured_content["index"]["stale"] is False
        tank = minimod.mod / "Data" / "Units" / "Tank.xml"
        later = tank.stat().st_mtime + 5
        tank.write_text(tank.read_text("utf-8").replace('id="Tank"', 'id="Tank2"'), "utf-8")
        os.utime(tank, (later, later))
        (minimod.mod / "Data" / "New.xml").write_text("<AssetDeclaration/>", "utf-8")
        await asyncio.sleep(1.1)  # past the one-second look the previous answer took
        strict = await client.call_tool("sage_find_asset", {"id": "tank", "freshness": "strict"})
        assert strict.is_error and strict.structured_content["code"] == "INDEX_STALE"
        assert "Data/Units/Tank.xml" in strict.structured_content["message"]
        assert "deskbridge serve" in strict.structured_content["hint"]
        legacy = await client.call_tool("sage_find_asset", {"id": "tank", "allowStale": False})
        assert legacy.is_error and legacy.structured_content["code"] == "INDEX_STALE"
        newest = (await client.call_tool("sage_find_asset", {"id": "tank"})).structured_content
        assert newest["items"][0]["id"] == "Tank"  # the snapshot's answer, flagged
        assert newest["index"]["stale"] is True
        assert {"Data/Units/Tank.xml", "Data/New.xml"} <= set(newest["index"]["changedSinceSnapshot"])


async def test_a_fresh_snapshot_of_a_mod_with_art_is_not_stale(minimod: Any) -> None:
    """QA: right after `deskbridge snapshot` of a mod shipping art (`ART:` includes of `.w3x` files), every
    offline answer said `stale: true` with the art file "changed since the snapshot", and `freshness: strict`
    refused: the look for changes walked only `.xml` files, so the indexed `.w3x` counted as gone."""
    mod_xml = minimod.mod / "Data" / "Mod.xml"
    mod_xml.write_text(
        mod_xml.read_text("utf-8").replace(
            "<Includes>", '<Includes><Include type="all" source="ART:TkModel.w3x"/>'
        ),
        "utf-8",
    )
    minimod.write(
        "Art/Tk/TkModel.w3x",
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset"><W3DHierarchy id="TkModel_SKL"/></AssetDeclaration>',
    )
    service = SageService(minimod.mod, minimod.sdk, use_cache=False)
    index = service.open_sync()
    assert str(minimod.mod / "Art" / "Tk" / "TkModel.w3x") in index.files
    service.write_snapshot_sync()
    async with Client(bridge(minimod)) as client:
        fresh = await client.call_tool("sage_find_asset", {"id": "tank", "freshness": "strict"})
        assert not fresh.is_error, fresh.structured_content
        assert fresh.structured_content["index"]["stale"] is False


@pytest.mark.security
@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
def test_the_records_cache_and_the_snapshots_are_owner_only(minimod: Any) -> None:
    # They name every file, asset and reference of a person's mod: another local user reads none of it, whatever
    # the umask made of the folders above (pvf's history and index are kept the same way).
    import stat

    from deskbridge.kinds.sage.settings import deskbridge_dirs

    old = os.umask(0o022)
    try:
        service = SageService(minimod.mod, minimod.sdk, use_cache=True)
        service.open_sync()
        service.save_cache()
        service.write_snapshot_sync()
    finally:
        os.umask(old)
    dirs = deskbridge_dirs()
    assert any((dirs.cache / "sage").rglob("records.marshal")), "the records cache was written"
    assert any((dirs.data / "sage" / "snapshots").rglob("*.json*")), "the snapshot was written"
    for folder in (dirs.cache / "sage", dirs.data / "sage"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
