"""The sage_* tools, called the way the MCP layer calls them: validate arguments, await the handler."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from deskbridge.core.errors import BridgeError
from deskbridge.core.tools import CallContext
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.tools import sage_tools

CTX = CallContext(caller="test")
EXPECTED = {
    "sage_get_status",
    "sage_list_projects",
    "sage_find_asset",
    "sage_find_references",
    "sage_list_assets_by_type",
    "sage_get_definition",
    "sage_get_effective_asset",
    "sage_resolve_include",
    "sage_is_file_active",
    "sage_find_define",
    "sage_unreferenced",
    "sage_get_inheritance_chain",
    "sage_get_usage_guide",
    "sage_get_asset_references",
    "sage_list_diagnostics",
}


def call(tools, tool, **raw):
    spec = tools[tool]
    return asyncio.run(spec.handler(CTX, spec.args.model_validate(raw)))


@pytest.fixture
def tools(minimod):
    service = SageService(minimod.mod, minimod.sdk)
    service.open_sync()
    return {t.name: t for t in sage_tools(service)}


def test_every_query_is_a_read_only_tool_with_described_arguments(tools):
    assert set(tools) == EXPECTED
    for spec in tools.values():
        assert spec.read_only and not spec.destructive
        schema = spec.input_schema()
        for name, prop in schema["properties"].items():
            assert prop.get("description"), f"{spec.name}.{name} has no description"


def test_answers_carry_the_index_envelope(tools, minimod):
    out = call(tools, "sage_find_asset", id="tank")
    assert out["items"][0]["file"] == "Data/Units/Tank.xml"
    env = out["index"]
    assert set(env) >= {"state", "phase", "complete", "stale", "buildId", "generatedAt", "projectDir"}
    assert env["projectDir"] == str(minimod.mod) and env["state"] == "ready"
    json.dumps(out)  # plain JSON all the way down


def test_each_tool_answers(tools):
    assert call(tools, "sage_get_status")["assetTypes"]["GameObject"] >= 4
    assert call(tools, "sage_find_references", id="TankGun", type="WeaponTemplate")["total"] == 2
    assert call(tools, "sage_list_assets_by_type", type="WeaponTemplate", prefix="tank")["total"] == 2
    assert call(tools, "sage_get_definition", type="WeaponTemplate", id="TankGun")["excerpt"]
    vet = call(tools, "sage_get_effective_asset", type="WeaponTemplate", id="TankGunVet")
    root = vet["items"][0]
    assert root["attributes"]["FireFX"]["value"] == "$FX" and [c["id"] for c in vet["chain"]] == [
        "TankGunVet",
        "TankGun",
    ]
    assert call(tools, "sage_resolve_include", source="DATA:static.xml", **{"from": "Data/Mod.xml"})[
        "resolved"
    ]
    assert call(tools, "sage_is_file_active", path="Data/Units/Tank.xml")["compiled"] is True
    assert call(tools, "sage_find_define", name="$HEALTH")["total"] == 2
    assert call(tools, "sage_unreferenced", type="GameObject")["total"] >= 1
    assert len(call(tools, "sage_get_inheritance_chain", type="GameObject", id="Tank")["chain"]) == 2
    assert "sage_find_asset" in call(tools, "sage_get_usage_guide")["guide"]
    edges = call(
        tools, "sage_get_asset_references", type="GameObject", id="Tank", targetTypes=["WeaponTemplate"]
    )
    assert [e["to"]["id"] for e in edges["edges"] if e["via"]["kind"] == "attribute"] == ["TankGun"]
    assert call(tools, "sage_list_diagnostics", code="include-not-found")["total"] == 1
    assert call(tools, "sage_list_projects")["open"][0]["state"] == "ready"


def test_business_errors_name_the_next_tool(tools):
    with pytest.raises(BridgeError) as err:
        call(tools, "sage_get_definition", type="GameObject", id="NoSuchThing")
    assert err.value.code == "NOT_FOUND" and "sage_find_asset" in err.value.hint
    with pytest.raises(ValidationError):
        call(tools, "sage_get_asset_references", type="GameObject", id="Tank", depth=9)
    with pytest.raises(ValidationError):
        call(tools, "sage_find_asset", id="Tank", surprise=True)  # unknown arguments are errors


def test_a_project_not_indexed_yet_says_not_ready(minimod):
    service = SageService(minimod.mod, minimod.sdk)
    tools = {t.name: t for t in sage_tools(service)}
    with pytest.raises(BridgeError) as err:
        call(tools, "sage_find_asset", id="Tank")
    assert err.value.code == "NOT_READY"
    assert call(tools, "sage_get_status")["index"]["state"] == "no_index"


def test_every_error_hint_names_a_sage_tool(tools):
    """Each business error tells the agent which sage tool to call next (issue 12 brief)."""
    cases = [
        ("sage_get_definition", {"type": "GameObject", "id": "NoSuchThing"}),
        ("sage_get_effective_asset", {"type": "GameObject", "id": "NoSuchThing"}),
        ("sage_get_definition", {"type": "WeaponTemplate", "id": "TankGun", "which": 7}),
        ("sage_find_asset", {"id": "Tank", "cursor": "not-a-cursor"}),
        ("sage_list_assets_by_type", {"type": "gameobject"}),
        ("sage_get_inheritance_chain", {"type": "GameObject", "id": "Nope"}),
        ("sage_get_asset_references", {"type": "GameObject", "id": "Nope"}),
        ("sage_get_asset_references", {"type": "GameObject", "id": "Tank", "cursor": "bad"}),
        ("sage_is_file_active", {"path": "/etc/passwd"}),
        ("sage_resolve_include", {"source": "/etc/passwd"}),
        ("sage_find_asset", {"id": "Tank", "waitForIndex": True, "timeoutSeconds": 999}),
        ("sage_get_asset_references", {"type": "GameObject", "id": "Tank", "maxEdges": 5000}),
        ("sage_list_diagnostics", {"limit": 5000}),
    ]
    for name, raw in cases:
        with pytest.raises(BridgeError) as err:
            call(tools, name, **raw)
        hint = err.value.hint
        assert "sage_" in hint and "{tool}" not in hint, (name, hint)


def test_the_sage_tool_list_fits_in_5k_tokens(tools):
    """tools/list as the MCP layer sends it (name, title, description, input schema, annotations)."""
    bpe = pytest.importorskip("bpe_openai")
    listed = [
        {
            "name": t.name,
            "title": t.title,
            "description": t.description,
            "inputSchema": t.input_schema(),
            "annotations": {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True},
        }
        for t in tools.values()
    ]
    tokens = len(bpe.get_encoding("o200k_base").encode(json.dumps({"tools": listed})))
    assert tokens <= 5000, tokens


def test_an_oversized_page_of_edges_points_at_the_cursor(tools):
    with pytest.raises(BridgeError) as err:
        call(tools, "sage_get_asset_references", type="GameObject", id="Tank", depth=3, maxEdges=5000)
    assert err.value.code == "LIMIT_EXCEEDED"
    assert "sage_get_asset_references" in err.value.hint and "cursor" in err.value.hint
    schema = tools["sage_get_asset_references"].input_schema()["properties"]["maxEdges"]
    assert schema["maximum"] == 1000
