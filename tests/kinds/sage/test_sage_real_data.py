"""The index on real data: RA3Afterdash built against EA's Red Alert 3 XML and schemas."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest
from lxml import etree

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.sage import forward, queries
from deskbridge.kinds.sage.records import extract_records
from deskbridge.kinds.sage.store import is_art


def project_counts(index):
    return collections.Counter(d.type for defs in index.by_id.values() for d in defs if d.origin == "project")


def test_the_static_stream_covers_the_mod_and_the_vanilla_tree(real_index):
    assert list(real_index.streams) == ["static"]
    assert len(real_index.files) == 1152
    assert real_index.stats["assetCount"] == 17168
    hows = collections.Counter(h for m in real_index.membership.values() for h in m.values())
    assert hows == {"all": 386, "instance": 18, "reference": 748}


def test_asset_counts_per_type_in_the_mod(real_index):
    counts = project_counts(real_index)
    assert len(counts) == 35
    assert sum(counts.values()) == 2718
    assert (counts["GameObject"], counts["WeaponTemplate"], counts["AudioEvent"], counts["FXList"]) == (
        109,
        108,
        302,
        84,
    )


def test_every_mod_asset_is_indexed_or_its_file_is_a_source_candidate(real_index, sage_data):
    """Independent count with a plain parser: 2,974 top-level assets in the mod's 393 files (research §3)."""
    total = 0
    for path in (sage_data.mod / "Data").rglob("*.xml"):
        root = etree.parse(str(path)).getroot()
        total += sum(
            1
            for c in root
            if isinstance(c.tag, str)
            and c.get("id")
            and c.tag.rpartition("}")[2] not in ("Includes", "Defines", "Tags")
        )
    assert total == 2974
    unreached = sum(
        len(real_index.files.get(p).assets)
        if p in real_index.files
        else len(extract_records(Path(p).read_bytes(), real_index.model).assets)
        for p in real_index.source_candidates
    )
    assert sum(project_counts(real_index).values()) + unreached == total
    assert any(p.endswith("Units/VAPrydwen.xml") for p in real_index.source_candidates)


def test_known_definitions(real_index, sage_data):
    dog = queries.find_asset(real_index, "alliedscoutinfantry", "GameObject")["items"]
    assert [(d["origin"], d["file"], d["line"]) for d in dog] == [
        ("sdk", str(sage_data.sdk / "SageXml/Allied/Units/AlliedScoutInfantry.xml"), 54),
        ("project", "Data/Mod/Units/Attack Dog/GameObject.xml", 7),
    ]
    assert dog[1]["streams"] == {"static": "all"} and dog[0]["streams"] == {"static": "reference"}
    base = queries.find_asset(real_index, "BaseInfantry", "GameObject")["items"]
    assert [(b["file"], b["line"], b["viaInstance"]) for b in base] == [
        (str(sage_data.sdk / "SageXml/BaseObjects/BaseInfantry.xml"), 36, True)
    ]
    d = queries.get_definition(real_index, "GameObject", "AlliedScoutInfantry")
    assert d["origin"] == "project" and d["excerpt"].lstrip().startswith("<GameObject")
    assert d["endLine"] > d["startLine"]


def test_known_reference_sites(real_index, sage_data):
    sites = queries.find_references(real_index, "AlliedScoutInfantryMaul", "WeaponTemplate")["items"]
    mod_site = next(s for s in sites if s["file"] == "Data/Mod/Units/Attack Dog/GameObject.xml")
    assert (mod_site["line"], mod_site["column"], mod_site["endColumn"]) == (561, 17, 40)
    assert (mod_site["element"], mod_site["parent"], mod_site["attribute"]) == (
        "Weapon",
        "WeaponSlotHardpoint",
        "Template",
    )
    text = (sage_data.mod / mod_site["file"]).read_text(encoding="utf-8-sig").split("\n")[560]
    assert text[16:39] == "AlliedScoutInfantryMaul"
    tanya = queries.find_references(real_index, "SovietMortarcycle", "GameObject")["items"]
    content = [s for s in tanya if s["kind"] == "content" and "Tanya" in s["file"]]
    assert {s["element"] for s in content} == {"IncludeThing", "ExcludeThing"}


def test_every_mod_include_resolves_except_art_that_is_not_shipped(real_index, sage_data):
    mod_edges = [e for e in real_index.includes if e.file.startswith(str(sage_data.mod))]
    assert len(mod_edges) == 1021
    unresolved = [e for e in mod_edges if e.target is None]
    assert unresolved and all(e.source.upper().startswith("ART:") for e in unresolved)
    assert not list(sage_data.mod.rglob("*.w3x"))  # the repository ships no art, so ART: cannot resolve
    by_source = {e.source: e.target for e in mod_edges}
    assert by_source["DATA:static.xml"] == str(sage_data.sdk / "SageXml/Static.xml")  # case differs on disk
    assert by_source["DATA:SageXml/Sounds/BaseSoundEffect.xml"] == str(
        sage_data.sdk / "SageXml/Sounds/BaseSoundEffect.xml"
    )
    assert by_source["Mod/Units.xml"] == str(sage_data.mod / "Data/Mod/Units.xml")


def test_diagnostics_on_the_known_bad_sdk_files(sage_data, real_index):
    bad = {
        "Includes/GarrisonableStructureBehaviors.xml": "Start tag expected",
        "Templates/Structure.xml": "Opening and ending tag mismatch",
        "Civilian/Mykonos_MY/Buildings/MY_Boat_01b.xml": "XML declaration allowed only at the start",
    }
    for rel, message in bad.items():
        rec = extract_records((sage_data.sdk / "SageXml" / rel).read_bytes(), real_index.model)
        errors = [d for d in rec.diagnostics if d[0] == "parse-error"]
        assert errors and message in errors[0][3], rel
    # recovery keeps what it can: the mismatched-tag file still yields its asset
    rec = extract_records((sage_data.sdk / "SageXml/Templates/Structure.xml").read_bytes(), real_index.model)
    assert rec.assets


def test_forward_references_follow_the_inheritance_chain(real_index, sage_data):
    out = forward.get_asset_references(
        real_index,
        "GameObject",
        "SovietScoutInfantry",
        target_types=["WeaponTemplate"],
        include_inheritance=True,
    )
    inherited = [
        e
        for e in out["edges"]
        if e["definedIn"] == {"type": "GameObject", "id": "BaseInfantry"} and e["via"]["kind"] == "attribute"
    ]
    assert inherited, out["edges"]
    e = inherited[0]
    assert e["to"]["id"] == "CatalystInfantryDeathWeapon" and e["to"]["type"] == "WeaponTemplate"
    assert e["source"]["file"] == str(sage_data.sdk / "SageXml/BaseObjects/BaseInfantry.xml")
    assert e["source"]["line"] == 104
    assert e["from"] == {"type": "GameObject", "id": "SovietScoutInfantry"}
    assert any(x["via"]["kind"] == "inheritFrom" and x["to"]["id"] == "BaseInfantry" for x in out["edges"])
    # a mod unit whose weapon sits on its mod parent
    vet = forward.get_asset_references(
        real_index, "GameObject", "AlliedFutureTankNeutronScramblerNode_Vet", target_types=["WeaponTemplate"]
    )
    hit = next(
        x for x in vet["edges"] if x["to"] and x["to"]["id"] == "AlliedFutureTankNeutronWeapon_OneShotWeapon"
    )
    assert hit["definedIn"]["id"] == "AlliedFutureTankNeutronScramblerNode"
    assert hit["source"]["file"] == "Data/Mod/Units/Future Tank X-1/GameObject.xml"


def test_target_types_accept_subtypes(real_index):
    """A reference typed `BaseAudioEventInfo` finds AudioEvent definitions (base-type chains)."""
    out = forward.get_asset_references(
        real_index, "WeaponTemplate", "AlliedCommandoDesertEagles", target_types=["BaseAudioEventInfo"]
    )
    assert out["edges"] and all(
        e["to"] is None or real_index.assignable(e["to"]["type"], "BaseAudioEventInfo") for e in out["edges"]
    )


def test_inheritance_chain_and_unreferenced(real_index):
    chain = queries.get_inheritance_chain(real_index, "GameObject", "AlliedScoutInfantry")
    assert [s["id"] for s in chain["chain"]] == ["AlliedScoutInfantry", "BaseInfantry", "BaseObject"]
    assert chain["stop"] == "root"
    dead = queries.unreferenced(real_index, "WeaponTemplate", limit=1000)
    assert dead["total"] > 0 and all(r["origin"] == "project" for r in dead["items"])


def test_no_art_is_deferred_for_this_mod(real_index):
    assert real_index.complete and real_index.phase == "art"
    assert not [p for p in real_index.files if is_art(p)]


def test_references_in_xi_included_fragments_belong_to_the_including_asset(real_index):
    sites = queries.find_references(real_index, "U_PowerPointReceived")["items"]
    frag = next(s for s in sites if s["file"].endswith("UIInGame/UIComponentSUDs.xml"))
    owner_file = real_index.files[real_index.fragment_owners[real_index.real_path(frag["file"])][0][0]]
    assert frag["from"]["viaFragment"].endswith("UIComponentSUDs.xml")
    assert (frag["from"]["type"], frag["from"]["id"]) == tuple(owner_file.assets[0][:2])


def test_definitions_list_their_join_actions(real_index):
    """RA3Afterdash overrides vanilla units with xai:joinAction edits; get_definition shows them."""
    for defs in real_index.assets["GameObject"].values():
        d = defs[-1]
        rec = real_index.files.get(d.file)
        if d.origin == "project" and rec is not None and rec.joins:
            out = queries.get_definition(real_index, "GameObject", d.id)
            if out["joinActions"]:
                action = out["joinActions"][0]
                assert out["startLine"] <= action["line"] <= out["endLine"]
                line = out["excerpt"].split("\n")[action["line"] - out["startLine"]]
                assert "joinAction" in line or action["element"] in line
                return
    pytest.skip("no project GameObject with xai:joinAction in this data")


def test_deep_forward_references_page_instead_of_failing(real_index):
    """Unfiltered depth 3 from a big unit has thousands of edges: pages of 1,000 with a cursor (issue 12)."""
    first = forward.get_asset_references(
        real_index, "GameObject", "JapanFortressShip", depth=3, max_edges=1000
    )
    assert first["edgeCount"] == 1000 and first["total"] > 3000 and first["nextCursor"]
    assert not first["truncated"]
    seen = list(first["edges"])
    cursor = first["nextCursor"]
    while cursor:
        page = forward.get_asset_references(
            real_index, "GameObject", "JapanFortressShip", depth=3, max_edges=1000, cursor=cursor
        )
        seen.extend(page["edges"])
        cursor = page["nextCursor"]
    assert len(seen) == first["total"]
    assert {e["depth"] for e in seen} == {1, 2, 3}
    assert all(len(e["path"]) == e["depth"] - 1 for e in seen)
    assert not any(e["via"]["kind"] == "inheritFrom" for e in seen)  # only with includeInheritance
    narrowed = forward.get_asset_references(
        real_index,
        "GameObject",
        "JapanFortressShip",
        depth=2,
        target_types=["WeaponTemplate"],
        max_edges=1000,
    )
    assert {e["to"]["type"] for e in narrowed["edges"] if e["to"]} == {"WeaponTemplate"}
    with pytest.raises(BridgeError) as err:
        forward.get_asset_references(real_index, "GameObject", "JapanFortressShip", max_edges=5000)
    assert err.value.code == "LIMIT_EXCEEDED" and "nextCursor" in err.value.hint
    assert "sage_get_asset_references" in err.value.hint


def test_target_types_filter_the_edges_not_the_walk(real_index, sage_data):
    """Issue 12 defect 2: the Giga-Fortress's airborne death weapon is three hops away — the unit's death
    ObjectCreationList spawns a dying object whose FireWeaponWhenDead fires it. A `targetTypes` filter used
    to prune the walk at the first (ObjectCreationList) hop, so no depth found it."""
    out = forward.get_asset_references(
        real_index,
        "GameObject",
        "JapanFortressShip",
        depth=3,
        target_types=["WeaponTemplate"],
        max_edges=1000,
    )
    assert {e["to"]["type"] for e in out["edges"] if e["to"]} == {"WeaponTemplate"}
    assert not any(e["via"]["kind"] == "inheritFrom" for e in out["edges"])
    e = next(
        e
        for e in out["edges"]
        if e["to"]
        and e["to"]["id"] == "JapanFortressShipAirborneDeathWeapon_Upgraded"
        and e["from"]["id"] == "JapanFortressShipAirborne_OverWater_Dying"
    )
    assert e["depth"] == 3 and e["from"]["id"] == "JapanFortressShipAirborne_OverWater_Dying"
    assert (e["via"]["element"], e["via"]["attribute"]) == ("FireWeaponWhenDead", "DeathWeapon")
    assert [(p["from"]["id"], p["to"]["type"], p["to"]["id"], p["element"]) for p in e["path"]] == [
        ("JapanFortressShip", "ObjectCreationList", "OCL_AirDeath_OverWater_OCL", "CreateObjectDie"),
        (
            "OCL_AirDeath_OverWater_OCL",
            "GameObject",
            "JapanFortressShipAirborne_OverWater_Dying",
            "CreateObject",
        ),
    ]
    assert e["path"][0]["file"] == "Data/Mod/Units/Giga-Fortress/GameObject.xml"
    # inheritFrom edges only when asked for (then all of them: they were asked for by name)
    inh = forward.get_asset_references(
        real_index,
        "GameObject",
        "JapanFortressShip",
        target_types=["WeaponTemplate"],
        include_inheritance=True,
    )
    kinds = {(x["via"]["kind"], x["to"]["type"] if x["to"] else None) for x in inh["edges"]}
    assert ("inheritFrom", "GameObject") in kinds
    assert {t for k, t in kinds if k != "inheritFrom"} <= {"WeaponTemplate", None}


def test_the_usage_guides_weapons_recipe_finds_the_three_hop_weapon(real_index):
    import json
    import re

    from deskbridge.kinds.sage.guide import USAGE_GUIDE

    recipe = re.search(
        r"What weapons does a unit have\? `sage_get_asset_references (\{.*?\})`", USAGE_GUIDE, re.S
    )
    args = json.loads(recipe.group(1).replace("<unit>", "JapanFortressShip"))
    out = forward.get_asset_references(
        real_index, args["type"], args["id"], args["depth"], args["targetTypes"], max_edges=1000
    )
    assert "JapanFortressShipAirborneDeathWeapon_Upgraded" in {e["to"]["id"] for e in out["edges"] if e["to"]}


JAPAN_SUICIDE_OWNERS = sorted(
    [
        "JapanBarracks",
        "JapanNavalYard",
        "JapanPowerPlant",
        "JapanRefinery",
        "JapanSuperWeapon",
        "JapanSuperWeaponAdvanced",
        "JapanTechStructure",
        "JapanWarFactory",
    ]
)


def test_a_fragment_shared_by_eight_structures_belongs_to_all_eight(real_index, sage_data):
    """Issue 12 defect 1: `Includes/GenericJapanBuildingSuicide.xml` (a CreateObjectDie naming
    OCL_GenericJapanBuildingSuicide) is xi:included by 8 Japan structures; each is a referrer."""
    sites = queries.find_references(real_index, "OCL_GenericJapanBuildingSuicide", "ObjectCreationList")[
        "items"
    ]
    frag = [s for s in sites if s["file"].endswith("Includes/GenericJapanBuildingSuicide.xml")]
    owners = sorted(s["from"]["id"] for s in frag)
    ids = {x.casefold() for x in owners}
    # Some of the eight may be overridden by the mod: compare case-insensitively with the real owners
    assert ids == {x.casefold() for x in JAPAN_SUICIDE_OWNERS}, owners
    for s in frag:
        assert s["from"]["viaFragment"].endswith("GenericJapanBuildingSuicide.xml")
        inc = s["from"]["includedAt"]
        assert inc["file"].endswith(f"Japan/Structures/{s['from']['id']}.xml")
        lines = Path(inc["file"]).read_text(encoding="utf-8-sig").split("\n")
        assert "<xi:include" in lines[inc["line"] - 1]
        assert "GenericJapanBuildingSuicide.xml" in " ".join(lines[inc["line"] - 1 : inc["line"] + 3])
    # forward references: every one of the eight uses the OCL
    for unit in JAPAN_SUICIDE_OWNERS:
        out = forward.get_asset_references(
            real_index, "GameObject", unit, target_types=["ObjectCreationList"], max_edges=1000
        )
        hits = [e for e in out["edges"] if e["target"]["id"] == "OCL_GenericJapanBuildingSuicide"]
        assert hits and hits[0]["includedAt"]["file"].endswith(f"{unit}.xml"), unit


def test_snapshot_text_is_exactly_the_snapshot_json(real_index):
    import json

    from deskbridge.kinds.sage.snapshot import snapshot_json, snapshot_text

    fast = json.loads(snapshot_text(real_index))
    assert fast == json.loads(json.dumps(snapshot_json(real_index)))
    assert fast["stats"]["referenceCount"] == 59699
    # A fragment shared by several assets has one row per including asset (issue 12, defect 1).
    assert len(fast["references"]) == fast["stats"]["referenceRowCount"] > 59699
    rows = [
        r
        for r in fast["references"]
        if r["id"] == "OCL_GenericJapanBuildingSuicide"
        and r["file"].endswith("GenericJapanBuildingSuicide.xml")
    ]
    assert sorted(r["fromId"] for r in rows) == JAPAN_SUICIDE_OWNERS
    assert all(r["includedAt"]["file"].endswith(f"/{r['fromId']}.xml") for r in rows)


def test_start_tags_are_located_where_they_open(real_index, sage_data):
    """Issue 12 defect 4: `<Define>`, `<Include>` and `xi:include` written over several lines were reported
    at the line where the start tag ends."""
    sdk = sage_data.sdk / "SageXml"
    rec = extract_records((sdk / "Soviet/Units_Campaign/RussianTrain.xml").read_bytes(), real_index.model)
    includes = [(src, ln) for _k, src, ln in rec.includes]
    assert ("ART:SUTrain_SKN.w3x", 7) in includes and ("DATA:BaseObjects/BaseVehicle.xml", 11) in includes
    rec = extract_records((sdk / "Sounds/SoundEffects.xml").read_bytes(), real_index.model)
    assert ("AMBIENT_VOLUME", 124) in [(n, ln) for n, _v, ln, _o in rec.defines]
    engineer = sage_data.mod / "Data/Mod/Units/Allied Engineer/GameObject.xml"
    rec = extract_records(engineer.read_bytes(), real_index.model)
    assert ("DATA:SageXml/Includes/ParachuteDrawAllied.xml", 781) in [
        (h, ln) for h, _x, ln, _n in rec.xincludes
    ]
    # The include graph and the define query carry the same lines.
    assert any(
        e.file == str(engineer) and e.line == 781 and e.kind == "xi:include" for e in real_index.includes
    )
    rows = queries.find_define(real_index, "AMBIENT_VOLUME")["items"]
    assert any(r["file"].endswith("Sounds/SoundEffects.xml") and r["line"] == 124 for r in rows) or not rows


def test_cosmetics_snapshot_counts_every_diagnostic_and_candidates_are_unique(real_index):
    """Issue 12 item 6: the snapshot's diagnosticCount omitted unresolved references; a misspelt type listed
    GameObject twice among the candidates."""
    from deskbridge.kinds.sage.snapshot import snapshot_json

    stats = snapshot_json(real_index, with_references=False)["stats"]
    unresolved = len(real_index.unresolved())
    assert unresolved > 20000
    assert stats["diagnosticCount"] == len(real_index.diagnostics) + unresolved
    with pytest.raises(BridgeError) as err:
        queries.list_assets_by_type(real_index, "gameobject")
    candidates = err.value.data["candidates"]
    assert candidates.count("GameObject") == 1 and len(candidates) == len(set(candidates))


def test_files_outside_every_stream_are_found_as_inactive_never_live(real_index):
    """Issue 12: RA3Afterdash ships a VAPrydwen unit that no include reaches. It is found, flagged, and
    counts nowhere else."""
    found = queries.find_asset(real_index, "VAPrydwen")
    assert found["live"] == 0 and found["total"] == found["inactive"] >= 1
    item = found["items"][0]
    assert item["origin"] == "inactive" and item["file"].startswith("Data/Mod/Units/VAPrydwen")
    assert "no effect in game" in item["warning"] and item["streams"] == {}
    assert "vaprydwen" not in real_index.by_id and "vaprydwen" not in real_index.assets.get("GameObject", {})
    assert real_index.stats["assetCount"] == 17168  # unchanged: inactive definitions are not counted
    with pytest.raises(BridgeError):
        queries.get_definition(real_index, "GameObject", "VAPrydwen")
    ids = queries.list_assets_by_type(real_index, "GameObject", prefix="VAPry")["items"]
    assert ids == []
    # A live asset also defined in an inactive copy lists the live one first, the copy after it.
    armor = queries.find_asset(real_index, "AlliedLegionnaireInfantryArmor", "ArmorTemplate")["items"]
    assert armor[-1]["origin"] == "inactive" and all(a["origin"] != "inactive" for a in armor[:-1])
    # References written in inactive files are not references.
    assert not any(
        p.startswith(str(real_index.project / "Data/Mod/Units/VAPrydwen"))
        for sites in real_index.refs_to.values()
        for p, _r in sites
    )
