"""The sage kind served by `deskbridge serve`: a real MCP client queries the real RA3 data over HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


async def test_find_asset_and_references_over_http(shared_data: Path) -> None:
    sage = shared_data / "sage"
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(sage / "mods" / "RA3Afterdash", options=options) as srv, srv.client() as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {
            "sage_get_status",
            "sage_find_asset",
            "sage_find_references",
            "sage_get_asset_references",
        } <= names
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert all(tool.annotations.read_only_hint for tool in tools.values())
        found = await client.call_tool(
            "sage_find_asset", {"id": "AlliedAntiVehicleVehicleTech1", "waitForIndex": True}
        )
        assert not found.is_error, found.structured_content
        item = found.structured_content["items"][0]
        assert item["type"] == "GameObject" and item["file"].endswith("AlliedAntiVehicleVehicleTech1.xml")
        assert found.structured_content["index"]["complete"] is True
        missing = await client.call_tool(
            "sage_get_definition", {"type": "GameObject", "id": "NoSuchUnit_xyz"}
        )
        assert missing.is_error and missing.structured_content["code"] == "NOT_FOUND"


async def test_every_sage_tool_answers_over_http(shared_data: Path) -> None:
    sage = shared_data / "sage"
    unit = {"type": "GameObject", "id": "AlliedAntiVehicleVehicleTech1"}
    calls = {  # in order; the first waits for the index to be complete
        "sage_find_asset": {"id": unit["id"], "waitForIndex": True},
        "sage_get_status": {},
        "sage_list_projects": {},
        "sage_get_usage_guide": {},
        "sage_find_references": {"id": unit["id"]},
        "sage_get_definition": unit,
        "sage_get_effective_asset": {**unit, "limit": 20},
        "sage_get_inheritance_chain": unit,
        "sage_get_asset_references": {**unit, "depth": 2, "maxEdges": 50},
        "sage_list_assets_by_type": {"type": "WeaponTemplate", "limit": 5},
        "sage_find_define": {"name": "$BASE_SPEED"},
        "sage_unreferenced": {"limit": 5},
        "sage_resolve_include": {"source": "DATA:static.xml", "from": "Data/Mod.xml"},
        "sage_is_file_active": {"path": "Data/Mod.xml"},
        "sage_list_diagnostics": {"limit": 5},
    }
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(sage / "mods" / "RA3Afterdash", options=options) as srv, srv.client() as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert listed == set(calls), listed ^ set(calls)
        for name, args in calls.items():
            result = await client.call_tool(name, args)
            content = result.structured_content
            if result.is_error:  # a business answer is fine for a define that may not exist; nothing else
                assert name == "sage_find_define" and content["code"] == "NOT_FOUND", (name, content)
            else:
                assert "index" in content or name in ("sage_list_projects", "sage_get_usage_guide"), (
                    name,
                    content,
                )


@pytest.mark.security
async def test_a_hostile_mod_cannot_make_the_tools_read_outside_it(shared_data: Path, tmp_path: Path) -> None:
    """Issue 8 over the real transport: includes that leave the mod, a FIFO and a /dev/zero link are
    diagnostics, and path arguments outside the roots get one refusal whether or not the file exists."""
    import sys
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kinds" / "sage"))
    from test_sage_security import hostile_mod

    sage = shared_data / "sage"
    mod, outside = hostile_mod(tmp_path, SimpleNamespace(mod=sage / "mods" / "RA3Afterdash"))
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(mod, options=options) as srv, srv.client() as client:
        diags = await client.call_tool(
            "sage_list_diagnostics", {"code": "include-outside-roots", "waitForIndex": True}
        )
        assert not diags.is_error, diags.structured_content
        assert diags.structured_content["total"] == 7
        stolen = await client.call_tool("sage_find_asset", {"id": "Stolen_abs"})
        assert stolen.structured_content["total"] == 0
        refusals = []
        for tool, args in [
            ("sage_is_file_active", {"path": "/etc/passwd"}),
            ("sage_is_file_active", {"path": "/etc/no-such-file"}),
            ("sage_is_file_active", {"path": str(outside / "abs.xml")}),
            ("sage_is_file_active", {"path": "Data/Link.xml"}),
            ("sage_resolve_include", {"source": "/etc/shadow"}),
            ("sage_resolve_include", {"source": "DATA:../../../../../../../../etc/no-such"}),
        ]:
            result = await client.call_tool(tool, args)
            content = result.structured_content
            assert result.is_error and content["code"] == "ACCESS_DENIED", (tool, content)
            given = next(iter(args.values()))
            refusals.append(content["message"].replace(repr(given), "<given>"))
            assert "sage_get_status" in content["hint"]
        assert len(set(refusals)) == 1, refusals


KW_FIXTURES = Path(__file__).resolve().parents[1] / "kinds" / "sage" / "fixtures"


async def _every_tool(client, calls: dict) -> dict:
    listed = {tool.name for tool in (await client.list_tools()).tools}
    assert listed == set(calls), listed ^ set(calls)
    out = {}
    for name, args in calls.items():
        result = await client.call_tool(name, args)
        assert not result.is_error, (name, result.structured_content)
        out[name] = result.structured_content
    return out


async def test_the_whole_tool_set_on_kanes_wrath_over_http(shared_data: Path) -> None:
    """Issue 12: every sage tool over MCP against EA's Kane's Wrath XML opened as the project, then against
    a small KW mod (tests/kinds/sage/fixtures/kw-mod) that references the game's static and global streams."""
    kw = shared_data / "sage" / "kw-sdk"
    pred = {"type": "GameObject", "id": "GDIPredator"}
    calls = {
        "sage_find_asset": {"id": "GDIPredator", "freshness": "final"},
        "sage_get_status": {},
        "sage_list_projects": {},
        "sage_get_usage_guide": {},
        "sage_find_references": {"id": "GDIPredatorTankRailgun", "type": "WeaponTemplate"},
        "sage_get_definition": pred,
        "sage_get_effective_asset": {**pred, "limit": 500},
        "sage_get_inheritance_chain": pred,
        "sage_get_asset_references": {**pred, "targetTypes": ["WeaponTemplate"], "depth": 2},
        "sage_list_assets_by_type": {"type": "WeaponTemplate", "prefix": "GDIPredator"},
        "sage_find_define": {"name": "PLATFORM_SPECIFIC_MAX_AMBIENT_STREAMS"},
        "sage_unreferenced": {"type": "WeaponTemplate", "limit": 5},
        "sage_resolve_include": {"source": "DATA:global.xml"},
        "sage_is_file_active": {"path": "SageXml/GDI/Units/GDIPredator.xml"},
        "sage_list_diagnostics": {"limit": 5},
    }
    async with running_server(kw, kind="sage", options={"sdk": str(kw)}) as srv, srv.client() as client:
        got = await _every_tool(client, calls)
    assert got["sage_find_asset"]["items"][0]["file"] == "SageXml/GDI/Units/GDIPredator.xml"
    assert set(got["sage_get_status"]["streams"]) == {"static", "global"}
    assert "GameObject" in got["sage_get_status"]["assetTypes"]
    assert any(s["from"]["id"] == "GDIPredator" for s in got["sage_find_references"]["items"])
    assert got["sage_get_definition"]["excerpt"].lstrip().startswith("<GameObject")
    assert [c["id"] for c in got["sage_get_inheritance_chain"]["chain"]][:2] == ["GDIPredator", "BaseVehicle"]
    weapons = {e["to"]["id"] for e in got["sage_get_asset_references"]["edges"] if e["to"]}
    assert {"GDIPredatorTankCannon", "GDIPredatorTankRailgun"} <= weapons
    assert got["sage_get_effective_asset"]["chain"][1]["id"] == "BaseVehicle"
    assert got["sage_find_define"]["items"][0]["value"] == "2"
    assert got["sage_resolve_include"]["resolved"] == "SageXml/global.xml"
    assert got["sage_is_file_active"]["compiled"] is True

    mod = KW_FIXTURES / "kw-mod"
    unit = {"type": "GameObject", "id": "GDIRailPredator"}
    calls.update(
        {
            "sage_find_asset": {"id": "GDIRailPredatorRailgun", "freshness": "final"},
            "sage_find_references": {"id": "GDIRailPredatorDeathWeapon"},
            "sage_get_definition": unit,
            "sage_get_effective_asset": {**unit, "limit": 500},
            "sage_get_inheritance_chain": unit,
            "sage_get_asset_references": {**unit, "targetTypes": ["WeaponTemplate"], "depth": 3},
            "sage_list_assets_by_type": {"type": "W3DContainer", "prefix": "GURail"},
            "sage_find_define": {"name": "$RAIL_PREDATOR_COST"},
            "sage_unreferenced": {},
            "sage_resolve_include": {
                "source": "ART:GURailPred_SKN.w3x",
                "from": "Data/Units/GDIRailPredator.xml",
            },
            "sage_is_file_active": {"path": "Data/Drafts/RailPredatorDraft.xml"},
        }
    )
    async with running_server(mod, options={"sdk": str(kw)}) as srv, srv.client() as client:
        got = await _every_tool(client, calls)
    found = got["sage_find_asset"]
    assert [i["origin"] for i in found["items"]] == ["project", "inactive"] and found["live"] == 1
    assert sorted(r["from"]["id"] for r in got["sage_find_references"]["items"]) == [
        "GDIRailMammoth",
        "GDIRailPredator",
    ]
    assert got["sage_list_assets_by_type"]["items"][0]["file"] == "Art/GU/GURailPred_SKN.w3x"
    assert got["sage_resolve_include"]["resolved"] == "Art/GU/GURailPred_SKN.w3x"
    assert got["sage_is_file_active"]["active"] is False
    eff = got["sage_get_effective_asset"]
    assert eff["removed"][0]["id"] == "ModuleTag_LaserState"
    assert got["sage_find_define"]["items"][0]["value"] == "1500"
    assert got["sage_get_status"]["index"]["state"] == "ready"


async def test_an_include_naming_a_folder_says_it_names_that_folder(
    shared_data: Path, tmp_path: Path
) -> None:
    """QA: `<Include source="DATA:GlobalData"/>` (a folder of EA's SageXml) and `<xi:include href="Units"/>`
    (a folder of the mod) said only "does not resolve to a file"; they name the folder now, and
    sage_resolve_include says so too. A folder outside the mod and SDK is still only 'outside'."""
    sage = shared_data / "sage"
    mod = tmp_path / "mods" / "FolderMod"
    (mod / "Data" / "Units").mkdir(parents=True)
    (mod / "Data" / "Units" / "Tank.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n<AssetDeclaration xmlns="uri:ea.com:eala:asset"/>\n'
    )
    (mod / "Data" / "Mod.xml").write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset" xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        "  <Includes>\n"
        '    <Include type="all" source="DATA:GlobalData"/>\n'
        '    <Include type="all" source="units\\"/>\n'
        '    <Include type="all" source="/etc"/>\n'
        '    <Include type="all" source="Units/Missing.xml"/>\n'
        "  </Includes>\n"
        '  <GameObject id="Carrier"><xi:include href="Units"/></GameObject>\n'
        "</AssetDeclaration>\n"
    )
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(mod, options=options) as srv, srv.client() as client:
        found = await client.call_tool(
            "sage_list_diagnostics", {"code": "include-not-found", "waitForIndex": True}
        )
        assert not found.is_error, found.structured_content
        messages = sorted(d["message"] for d in found.structured_content["items"])
        sdk_folder = str((sage / "ra3-sdk" / "SageXml" / "GlobalData").resolve())
        assert messages == [
            f"all include 'DATA:GlobalData' names a folder ({sdk_folder}), not a file: an include reads one "
            "XML file; name a file in that folder",
            "all include 'Units/Missing.xml' does not resolve to a file",
            "all include 'units\\\\' names a folder (Data/Units), not a file: an include reads one XML file; "
            "name a file in that folder",
            "xi:include include 'Units' names a folder (Data/Units), not a file: an include reads one XML "
            "file; name a file in that folder",
        ]
        outside = await client.call_tool("sage_list_diagnostics", {"code": "include-outside-roots"})
        assert [d["message"] for d in outside.structured_content["items"]] == [
            "all include '/etc' leads outside the mod and SDK folders; it was not read"
        ]
        resolved = await client.call_tool(
            "sage_resolve_include", {"source": "DATA:GlobalData", "from": "Data/Mod.xml"}
        )
        content = resolved.structured_content
        assert content["resolved"] is None and content["folder"] == sdk_folder
        assert "names a folder" in content["hint"] and sdk_folder in content["hint"]


async def test_a_mod_folder_moved_away_while_served_says_the_folder_is_gone(
    shared_data: Path, tmp_path: Path
) -> None:
    """QA: moving the whole mod folder away while `deskbridge serve` had it open was reported as "an include
    or a file was probably lost in the last save"; the status now says the project folder is gone, where it
    was, and what to do."""
    import asyncio
    import shutil

    sage = shared_data / "sage"
    mod = tmp_path / "mods" / "RA3Afterdash"
    shutil.copytree(sage / "mods" / "RA3Afterdash", mod)
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(mod, options=options) as srv, srv.client() as client:
        ready = await client.call_tool("sage_find_asset", {"id": "AlliedScoutInfantry", "waitForIndex": True})
        assert not ready.is_error and ready.structured_content["total"] > 0
        mod.rename(tmp_path / "mods" / "Moved")
        status: dict = {}
        for _ in range(300):  # the watcher's batch, then a rebuild
            status = (await client.call_tool("sage_get_status", {})).structured_content["index"]
            if status["state"] == "degraded":
                break
            await asyncio.sleep(0.1)
        assert status["state"] == "degraded", status
        [why] = status["degraded"]
        assert f"the project folder {mod} is gone" in why and "last save" not in why
        assert "put the folder back" in why and "deskbridge serve" in why


async def test_get_status_takes_freshness_like_every_index_backed_tool(shared_data: Path) -> None:
    """QA: `sage_get_status {"freshness": "final"}` was refused ("takes no arguments") though every other
    sage tool takes it. It is accepted with the same meaning: `final` reports once the index is final."""
    sage = shared_data / "sage"
    options = {"sdk": str(sage / "ra3-sdk")}
    async with running_server(sage / "mods" / "RA3Afterdash", options=options) as srv, srv.client() as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert "freshness" in tools["sage_get_status"].input_schema["properties"]
        final = await client.call_tool("sage_get_status", {"freshness": "final"})
        assert not final.is_error, final.structured_content
        index = final.structured_content["index"]
        assert index["complete"] is True and index["stale"] is False and index["state"] == "ready"
        assert final.structured_content["stats"]["assetCount"] > 0
        newest = await client.call_tool("sage_get_status", {"freshness": "newest"})
        assert not newest.is_error and newest.structured_content["index"]["state"] == "ready"
        strict = await client.call_tool("sage_get_status", {"freshness": "strict"})
        assert not strict.is_error, strict.structured_content
        wrong = await client.call_tool("sage_get_status", {"freshness": "soon"})
        assert wrong.is_error and wrong.structured_content["code"] == "INVALID_ARGUMENT"
        guide = await client.call_tool("sage_get_usage_guide", {})
        assert "`sage_get_status` takes it too" in guide.structured_content["guide"]
