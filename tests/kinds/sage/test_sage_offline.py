"""A SAGE mod with no server running: `deskbridge mcp --project` answers from the saved snapshot, says so, and
refuses what only the live index can answer instead of returning an empty list."""

from __future__ import annotations

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
        assert refs["total"] >= 1 and refs["items"][0]["fromId"] == "Tank"
        chain = await client.call_tool("sage_get_inheritance_chain", {"type": "GameObject", "id": "Tank"})
        assert [s["id"] for s in chain.structured_content["chain"]] == ["Tank", "BaseUnit"]
        active = (
            await client.call_tool("sage_is_file_active", {"path": "Data/Unused.xml"})
        ).structured_content
        assert active["active"] is False
        definition = await client.call_tool(
            "sage_get_definition", {"type": "WeaponTemplate", "id": "TankGun"}
        )
        assert "TankGun" in definition.structured_content["xml"]
        live_only = await client.call_tool("sage_get_asset_references", {"type": "GameObject", "id": "Tank"})
        assert live_only.is_error and live_only.structured_content["code"] == "NOT_READY"
        assert "deskbridge serve" in live_only.structured_content["hint"]
