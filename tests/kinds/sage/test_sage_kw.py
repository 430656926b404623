"""Kane's Wrath: EA's KW XML opened as a project, a KW mod that references the game's streams (with art), and
a mod in WrathEd's layout (`Data/Static.xml`, no `Data/Mod.xml`). Nothing here is Red Alert 3 data."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from deskbridge.kinds.sage import forward, queries
from deskbridge.kinds.sage.indexer import ProjectIndexer
from deskbridge.kinds.sage.project import find_project_root, looks_like_project

SAGE_DATA = Path(__file__).resolve().parents[3] / "../shared/data/sage"
FIXTURES = Path(__file__).parent / "fixtures"
KW_MOD = FIXTURES / "kw-mod"
WRATHED_MOD = FIXTURES / "wrathed-mod"


def kw_sdk() -> Path:
    sdk = (SAGE_DATA / "kw-sdk").resolve()
    if not (sdk / "SageXml").is_dir():
        pytest.skip(f"Kane's Wrath data not found at {sdk}")
    return sdk


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("sage-kw-home")
    mp.setenv("DESKBRIDGE_HOME", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def kw_project(home):
    sdk = kw_sdk()
    indexer = ProjectIndexer(sdk, sdk)
    return indexer, indexer.open_sync()


@pytest.fixture(scope="module")
def kw_mod(home):
    indexer = ProjectIndexer(KW_MOD, kw_sdk())
    return indexer, indexer.open_sync()


def test_the_sdk_opens_as_a_project_with_the_games_streams(kw_project):
    indexer, index = kw_project
    sdk = kw_sdk()
    assert indexer.project == sdk and looks_like_project(sdk / "SageXml" / "GDI" / "Units")
    assert index.streams == {
        "static": str(sdk / "SageXml/Static.xml"),
        "global": str(sdk / "SageXml/global.xml"),
    }
    assert index.stats["assetCount"] > 13000 and index.complete
    pred = queries.find_asset(index, "GDIPredator", "GameObject")["items"]
    assert [(p["file"], p["line"], p["origin"], p["streams"]) for p in pred] == [
        ("SageXml/GDI/Units/GDIPredator.xml", 40, "project", {"static": "all"})
    ]
    sites = queries.find_references(index, "GDIPredatorTankRailgun", "WeaponTemplate")["items"]
    site = next(s for s in sites if s["file"] == "SageXml/GDI/Units/GDIPredator.xml")
    assert (site["line"], site["element"], site["attribute"], site["from"]["id"]) == (
        383,
        "Weapon",
        "Template",
        "GDIPredator",
    )
    chain = queries.get_inheritance_chain(index, "GameObject", "GDIPredator")["chain"]
    assert [c["id"] for c in chain][:2] == ["GDIPredator", "BaseVehicle"]
    weapons = forward.get_asset_references(
        index, "GameObject", "GDIPredator", target_types=["WeaponTemplate"]
    )
    assert {"GDIPredatorTankCannon", "GDIPredatorTankRailgun"} <= {
        e["to"]["id"] for e in weapons["edges"] if e["to"]
    }
    active = queries.is_file_active(index, "SageXml/GlobalData/Weapon.xml")
    assert active["compiled"] and {"stream": "static", "how": "all"} in active["streams"]
    assert (
        queries.resolve_include(index, indexer.resolver, "DATA:global.xml")["resolved"]
        == "SageXml/global.xml"
    )


def test_a_reference_written_with_spaces_around_the_equals_sign(kw_project):
    """Issue 12 defect 4 on EA's KW data: `FX = "FX_RailAtBoneFX"` (GlobalData/FXListGDI.xml:3098) was
    reported at the tag's end line with column 0."""
    _indexer, index = kw_project
    sites = queries.find_references(index, "FX_RailAtBoneFX", "FXList")["items"]
    site = next(s for s in sites if s["file"] == "SageXml/GlobalData/FXListGDI.xml" and s["line"] == 3098)
    assert (site["column"], site["endColumn"], site["attribute"]) == (11, 26, "FX")


def test_a_kw_mod_with_art_against_the_games_streams(kw_mod):
    _indexer, index = kw_mod
    assert set(index.streams) == {"static", "global:MapMetaData_RailMod"}
    assert index.complete and index.phase == "art"
    mine = sorted((d.type, d.id) for defs in index.by_id.values() for d in defs if d.origin == "project")
    assert mine == [
        ("GameObject", "GDIRailMammoth"),
        ("GameObject", "GDIRailPredator"),
        ("W3DContainer", "GURailPred_SKN"),
        ("W3DHierarchy", "GURailPred_SKL"),
        ("W3DMesh", "GURailPred_SKN.CHASSIS"),
        ("WeaponTemplate", "GDIRailModGlobalWeapon"),
        ("WeaponTemplate", "GDIRailPredatorDeathWeapon"),
        ("WeaponTemplate", "GDIRailPredatorRailgun"),
    ]
    # vanilla static is walked as `reference`: visible, not compiled into the mod's stream
    pred = queries.find_asset(index, "GDIPredator", "GameObject")["items"][0]
    assert pred["origin"] == "sdk" and pred["streams"] == {"static": "reference"}
    assert [d for d in index.all_diagnostics() if d.file.startswith(str(index.project))] == []
    # art: the two-letter ART: rule found Art/GU/, and the draw's Model names the container
    art = queries.find_asset(index, "GURailPred_SKN", "W3DContainer")["items"][0]
    assert art["file"] == "Art/GU/GURailPred_SKN.w3x" and art["streams"] == {"static": "all"}
    model = queries.find_references(index, "GURailPred_SKN")["items"]
    assert [(m["element"], m["attribute"], m["from"]["id"]) for m in model] == [
        ("Model", "Name", "GDIRailPredator")
    ]


def test_kw_mod_weapons_fragments_and_inactive_drafts(kw_mod):
    _indexer, index = kw_mod
    out = forward.get_asset_references(
        index, "GameObject", "GDIRailPredator", target_types=["WeaponTemplate"], max_edges=1000
    )
    by_id = {}
    for e in out["edges"]:
        if e["to"]:
            by_id.setdefault(e["to"]["id"], e)
    railgun = by_id["GDIRailPredatorRailgun"]
    assert railgun["source"] == {"file": "Data/Units/GDIRailPredator.xml", "line": 37, "column": 19}
    assert railgun["definedIn"] is None
    inherited = by_id["GDIPredatorTankCannon"]  # written on the vanilla parent
    assert inherited["definedIn"] == {"type": "GameObject", "id": "GDIPredator"}
    death = by_id["GDIRailPredatorDeathWeapon"]
    assert death["source"]["file"] == "Data/Includes/RailPredatorDeath.xml"
    assert death["includedAt"] == {"file": "Data/Units/GDIRailPredator.xml", "line": 43}
    # the shared fragment belongs to both units that include it
    users = queries.find_references(index, "GDIRailPredatorDeathWeapon", "WeaponTemplate")["items"]
    assert sorted(u["from"]["id"] for u in users) == ["GDIRailMammoth", "GDIRailPredator"]
    # a draft no stream includes: found with a warning, never live
    draft = queries.find_asset(index, "GDIRailPredatorDraft")
    assert draft["live"] == 0 and draft["items"][0]["origin"] == "inactive" and draft["items"][0]["warning"]
    railguns = queries.find_asset(index, "GDIRailPredatorRailgun", "WeaponTemplate")
    assert [i["origin"] for i in railguns["items"]] == ["project", "inactive"] and railguns["live"] == 1
    assert queries.get_definition(index, "WeaponTemplate", "GDIRailPredatorRailgun")["file"] == (
        "Data/Weapons/RailWeapons.xml"
    )
    assert queries.find_define(index, "RAIL_PREDATOR_COST")["items"][0]["value"] == "1500"


def test_the_cli_index_reports_both_phases_on_a_cold_run(tmp_path):
    """Issue 12 item 6: `deskbridge index` printed only the art phase's parsed count on a cold run."""
    env = {"DESKBRIDGE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    if "PYTHONDONTWRITEBYTECODE" in os.environ:
        # Kept: without it this run wrote `.pyc` files into the source tree, and SAGE-COLD's figures then
        # changed by the compile time depending on whether this test had run since the last edit.
        env["PYTHONDONTWRITEBYTECODE"] = os.environ["PYTHONDONTWRITEBYTECODE"]
    out = subprocess.run(
        [sys.executable, "-m", "deskbridge", "index", str(KW_MOD), "--sdk", str(kw_sdk())],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    files = next(line for line in out.splitlines() if line.startswith("files"))
    total, parsed = files.split()[1], files.split("(")[1].split()[0]
    assert total == parsed and int(total) > 1400, out


def test_a_wrathed_mod_starts_its_static_stream_at_data_static_xml(home):
    """WrathEd's layout: `Data/Static.xml` is the static stream and writes `DATA:static.xml` for the game's
    own static stream — which its own Data folder would shadow (it used to be indexed as one asset)."""
    assert find_project_root(WRATHED_MOD / "Data" / "Units") == WRATHED_MOD
    assert looks_like_project(WRATHED_MOD)
    indexer = ProjectIndexer(WRATHED_MOD, kw_sdk())
    index = indexer.open_sync()
    assert index.streams["static"] == str(WRATHED_MOD / "Data" / "Static.xml")
    edge = next(
        e for e in index.includes if e.file == str(WRATHED_MOD / "Data/Static.xml") and e.kind == "reference"
    )
    assert edge.target == str(kw_sdk() / "SageXml" / "Static.xml")
    assert index.stats["assetCount"] > 13000
    fast = queries.find_asset(index, "GDIFastPredator", "GameObject")["items"]
    assert [(f["file"], f["streams"]) for f in fast] == [
        ("Data/Units/GDIFastPredator.xml", {"static": "all"})
    ]
    chain = queries.get_inheritance_chain(index, "GameObject", "GDIFastPredator")
    assert [c["id"] for c in chain["chain"]][:3] == ["GDIFastPredator", "GDIPredator", "BaseVehicle"]
    assert not [d for d in index.all_diagnostics() if d.file.startswith(str(WRATHED_MOD))]
    json.dumps(queries.find_references(index, "GDIPredatorTankCannon"))
