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
        assert {"sage_get_status", "sage_find_asset", "sage_find_references", "sage_get_asset_references"} <= names
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert all(tool.annotations.read_only_hint for tool in tools.values())
        found = await client.call_tool("sage_find_asset",
                                       {"id": "AlliedAntiVehicleVehicleTech1", "waitForIndex": True})
        assert not found.is_error, found.structured_content
        item = found.structured_content["items"][0]
        assert item["type"] == "GameObject" and item["file"].endswith("AlliedAntiVehicleVehicleTech1.xml")
        assert found.structured_content["index"]["complete"] is True
        missing = await client.call_tool("sage_get_definition", {"type": "GameObject", "id": "NoSuchUnit_xyz"})
        assert missing.is_error and missing.structured_content["code"] == "NOT_FOUND"
