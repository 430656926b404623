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
