"""`sage_get_effective_asset` against a corpus of merges checked by hand in EA's Red Alert 3 and Kane's Wrath
XML (and the KW fixture mod). Every expected value below was read from the XML files named in the case —
the element lines are where each start tag opens — not produced by running the function.

BAB's rules (NodeJoiner): the parent is copied, then the asset's own XML is joined onto it; a child is
matched by `id` when the schema lets it repeat, by name when it occurs once, and a lone child of a
single-choice element (`<Body>`) is matched whatever its name; `Replace`/`Overwrite` remove the match and
put the new element where a new one goes (the end of a module list, schema order in a sequence), `Remove`
drops it, the default merges attributes and children; `+FLAG`/`-FLAG` edit an inherited flag list.
"""

from __future__ import annotations

import pytest
from test_sage_kw import KW_MOD, SAGE_DATA, kw_sdk

from deskbridge.kinds.sage.effective import get_effective_asset
from deskbridge.kinds.sage.indexer import ProjectIndexer

RA3 = "SageXml/"  # suffix test: files in the SDK are shown as absolute paths


def merged(index, asset_type, ident):
    out = get_effective_asset(index, asset_type, ident, limit=1000)
    rows = list(out["items"])
    cursor = out["nextCursor"]
    while cursor:
        more = get_effective_asset(index, asset_type, ident, cursor=cursor, limit=1000)
        rows.extend(more["items"])
        cursor = more["nextCursor"]
    by_path: dict[str, list[dict]] = {}
    for r in rows:
        by_path.setdefault(r["path"], []).append(r)
    return out, rows, by_path


def one(by_path, path):
    rows = by_path.get(path)
    assert rows and len(rows) == 1, (path, sorted(by_path))
    return rows[0]


def removed(out, element, ident):
    hits = [r for r in out["removed"] if r["element"] == element and r["id"] == ident]
    assert len(hits) == 1, out["removed"]
    return hits[0]


def at(row_or_site, suffix, line):
    assert row_or_site["file"].endswith(suffix), (row_or_site["file"], suffix)
    assert row_or_site["line"] == line, (row_or_site, line)


@pytest.fixture(scope="module")
def kw(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("DESKBRIDGE_HOME", str(tmp_path_factory.mktemp("sage-eff-home")))
    sdk = kw_sdk()
    vanilla = ProjectIndexer(sdk, sdk).open_sync()
    mod = ProjectIndexer(KW_MOD, sdk).open_sync()
    yield vanilla, mod
    mp.undo()


# --- Red Alert 3 (vanilla assets, reached through RA3Afterdash's reference to DATA:static.xml) ---------------
@pytest.mark.parametrize(
    ("unit", "file", "line", "element", "module", "base_asset", "base_file", "base_line"),
    [
        # 1. Allied/Units/AlliedAntiAirShip.xml:408 <DynamicsUpdate id=ModuleTag_DefaultDynamicsUpdate Remove>
        (
            "AlliedAntiAirShip",
            "Allied/Units/AlliedAntiAirShip.xml",
            408,
            "DynamicsUpdate",
            "ModuleTag_DefaultDynamicsUpdate",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            42,
        ),
        # 2. Allied/Units/AlliedAttackDrone.xml:158, the same module of BaseVehicle
        (
            "AlliedAttackDrone",
            "Allied/Units/AlliedAttackDrone.xml",
            158,
            "DynamicsUpdate",
            "ModuleTag_DefaultDynamicsUpdate",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            42,
        ),
        # 3. Allied/Units/AlliedCommandoTech1.xml:1065 removes BaseInfantry's SuppressionUpdate (line 177)
        (
            "AlliedCommandoTech1",
            "Allied/Units/AlliedCommandoTech1.xml",
            1065,
            "SuppressionUpdate",
            "ModuleTag_SuppressionUpdate",
            "BaseInfantry",
            "BaseObjects/BaseInfantry.xml",
            177,
        ),
        # 4. Allied/Units/AlliedMCV.xml:582 "No stances because there's no weapon"
        (
            "AlliedMCV",
            "Allied/Units/AlliedMCV.xml",
            582,
            "StancesBehavior",
            "ModuleTag_Stance",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            71,
        ),
        # 5. AlliedMiner inherits BaseMiner, which inherits BaseVehicle: the stance comes two links up
        (
            "AlliedMiner",
            "Allied/Units/AlliedMiner.xml",
            448,
            "StancesBehavior",
            "ModuleTag_Stance",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            71,
        ),
        # 6, 7. Allied/Props/AlliedSatelliteSweepShroudRevealer.xml removes two BaseVehicle modules
        (
            "AlliedSatelliteSweepShroudRevealer",
            "Allied/Props/AlliedSatelliteSweepShroudRevealer.xml",
            93,
            "StancesBehavior",
            "ModuleTag_Stance",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            71,
        ),
        (
            "AlliedSatelliteSweepShroudRevealer",
            "Allied/Props/AlliedSatelliteSweepShroudRevealer.xml",
            97,
            "DynamicsUpdate",
            "ModuleTag_DefaultDynamicsUpdate",
            "BaseVehicle",
            "BaseObjects/BaseVehicle.xml",
            42,
        ),
    ],
)
def test_ra3_remove(real_index, unit, file, line, element, module, base_asset, base_file, base_line):
    out, _rows, by_path = merged(real_index, "GameObject", unit)
    gone = removed(out, element, module)
    assert gone["from"] == base_asset
    at(gone, base_file, base_line)
    assert gone["removedBy"]["from"] == unit
    at(gone["removedBy"], file, line)
    assert not [p for p in by_path if p.endswith(f"/{element}#{module}")]


def test_ra3_append_merges_a_module(real_index):
    """8–10. AlliedAirfieldRepairDrone (Allied/Units/AlliedAirfieldRepairDrone.xml:12) inherits
    AlliedWarFactoryRepairDrone, which inherits BaseRepairDrone; its AttachUpdate (line 18, joinAction
    Append) is joined onto BaseRepairDrone's (BaseObjects/BaseRepairDrone.xml:56): its own delay wins,
    the parent's other attributes and its ObjectFilter (line 67) stay."""
    out, _rows, by_path = merged(real_index, "GameObject", "AlliedAirfieldRepairDrone")
    assert [c["id"] for c in out["chain"]][:3] == [
        "AlliedAirfieldRepairDrone",
        "AlliedWarFactoryRepairDrone",
        "BaseRepairDrone",
    ]
    attach = one(by_path, "GameObject/Behaviors/AttachUpdate#ModuleTag_Attach")
    assert (attach["how"], attach["from"], attach["line"]) == ("merged", "AlliedAirfieldRepairDrone", 18)
    assert (attach["base"]["from"], attach["base"]["line"]) == ("BaseRepairDrone", 56)
    delay = attach["attributes"]["InitialAttachDelay"]
    assert (delay["value"], delay["from"]) == ("2.0s", "AlliedAirfieldRepairDrone")
    close = attach["attributes"]["CloseEnoughRange"]
    assert (close["value"], close["from"], close["line"]) == ("20.0", "BaseRepairDrone", 56)
    flt = one(by_path, "GameObject/Behaviors/AttachUpdate#ModuleTag_Attach/ObjectFilter")
    assert (flt["how"], flt["from"], flt["line"]) == ("inherited", "BaseRepairDrone", 67)
    assert flt["attributes"]["Include"]["value"] == "VEHICLE AIRCRAFT HUGE_VEHICLE"


def test_ra3_replace_modules_of_a_veteran_projectile(real_index):
    """11–14. AlliedAttackDroneProjectile_Veteran (Allied/Props/AlliedAttackDroneProjectile.xml:53) replaces
    its parent's FXListBehavior (line 30) and ScriptedModelDraw (line 20), and writes BezierProjectile
    again without a joinAction (merged with the parent's, line 38)."""
    _out, _rows, by_path = merged(real_index, "GameObject", "AlliedAttackDroneProjectile_Veteran")
    fx = one(by_path, "GameObject/Behaviors/FXListBehavior#ModuleTag_FXList")
    assert fx["how"] == "replaced" and fx["joinAction"] == "Replace" and fx["line"] == 72
    assert (fx["base"]["from"], fx["base"]["line"]) == ("AlliedAttackDroneProjectile", 30)
    event = one(by_path, "GameObject/Behaviors/FXListBehavior#ModuleTag_FXList/Event")
    assert (
        event["attributes"]["FX"]["value"] == "FX_ALL_CenturyBomber_BombExplosion_Vet" and event["line"] == 77
    )
    draw = one(by_path, "GameObject/Draws/ScriptedModelDraw#ModuleTag_ScriptedModelDraw")
    assert (draw["how"], draw["line"], draw["base"]["line"]) == ("replaced", 57, 20)
    bone = one(
        by_path,
        "GameObject/Draws/ScriptedModelDraw#ModuleTag_ScriptedModelDraw/ModelConditionState/ParticleSysBone",
    )
    assert (
        bone["attributes"]["FXParticleSystemTemplate"]["value"] == "JapanTorpedoTrail_Vet"
        and bone["line"] == 64
    )
    bezier = one(by_path, "GameObject/Behaviors/BezierProjectile#ModuleTag_BezierProjectileBehavior")
    assert (bezier["how"], bezier["line"], bezier["base"]["line"]) == ("merged", 81, 38)
    root = one(by_path, "GameObject")
    kind = root["attributes"]["KindOf"]
    assert kind["value"] == "PROJECTILE SMALL_MISSILE DEFLECT_BY_SPECIAL_POWER NO_COLLIDE HIDE_IF_FOGGED"
    assert (kind["from"], kind["line"]) == ("AlliedAttackDroneProjectile", 12)
    assert "inheritFrom" not in root["attributes"]


@pytest.mark.parametrize("asset", ["AlliedTimeBombLvl1", "AlliedTimeBombLvl2"])
def test_ra3_a_second_display_name_is_joined_onto_the_first(real_index, asset):
    """15, 16. Allied/Props/AlliedTimeBombLvl1.xml (and …Lvl2.xml) write `<DisplayName
    xai:joinAction="Replace">Name:AlliedTimeBombLvl1</DisplayName>` (line 19, nothing inherited:
    BaseTimeBombEffect has none) and then `<DisplayName>AlliedTimeBombLvl1</DisplayName>` (line 21) with the
    default Append: it is matched by name and its text node is appended, as BAB's joiner does."""
    _out, _rows, by_path = merged(real_index, "GameObject", asset)
    name = one(by_path, "GameObject/DisplayName")
    assert name["text"]["value"] == f"Name:{asset}{asset}"
    assert (name["how"], name["line"], name["base"]["line"]) == ("merged", 21, 19)


def test_ra3_replace_with_nothing_to_replace_adds_the_element(real_index):
    """17. AlliedSatelliteSweepShroudRevealer's DisplayName (line 25) has no counterpart in BaseVehicle."""
    _out, _rows, by_path = merged(real_index, "GameObject", "AlliedSatelliteSweepShroudRevealer")
    name = one(by_path, "GameObject/DisplayName")
    assert (name["how"], name["line"], name["text"]["value"]) == (
        "own",
        25,
        "Name:AlliedSatelliteSweepShroudRevealer",
    )


def test_ra3_flag_edits_on_an_inherited_kindof(real_index):
    """18, 19. `KindOf="+TRANSPORT"` (Soviet/Units/SovietSupportBomber.xml:82) adds to the flags of
    BaseSovietSupportBomber (Soviet/Units/BaseSovietSupportBomber.xml:25); `KindOf="-PROJECTILE"`
    (Soviet/Props/OrbitalRefuseSatteliteDebris.xml:281) removes one that OrbitalRefuseProjectileBase
    inherits from BaseProjectile (BaseObjects/BaseProjectile.xml:10)."""
    _out, _rows, by_path = merged(real_index, "GameObject", "SovietSupportBomber_S07")
    kind = one(by_path, "GameObject")["attributes"]["KindOf"]
    assert kind["value"].split() == [
        "CAN_CAST_REFLECTIONS",
        "CAN_ATTACK",
        "AIRCRAFT",
        "VEHICLE",
        "SUMMONED",
        "IGNORES_SELECT_ALL",
        "NO_COLLIDE",
        "SKIRMISH_AI_DONT_CONSIDER_THREAT",
        "TRANSPORT",
    ]
    assert kind["from"] == "SovietSupportBomber_S07"
    _out, _rows, by_path = merged(real_index, "GameObject", "OrbitalRefuseMeteor")
    kind = one(by_path, "GameObject")["attributes"]["KindOf"]
    assert kind["value"].split() == ["SMALL_MISSILE", "NO_COLLIDE", "HIDE_IF_FOGGED"]


# --- Kane's Wrath (EA's KW XML as the project) ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("unit", "file", "line", "element", "module", "base_asset", "base_file", "base_line"),
    [
        # 20, 21. Alien/Units/AlienBuzzers_Slaved.xml removes two modules of AlienBuzzers (lines 227, 231)
        (
            "AlienBuzzers_Slaved",
            "Alien/Units/AlienBuzzers_Slaved.xml",
            24,
            "CombineSpecialPower",
            "ModuleTag_CombineSpecialPower",
            "AlienBuzzers",
            "Alien/Units/AlienBuzzers.xml",
            227,
        ),
        (
            "AlienBuzzers_Slaved",
            "Alien/Units/AlienBuzzers_Slaved.xml",
            30,
            "AISpecialPowerUpdate",
            "ModuleTag_AlienCombineAI",
            "AlienBuzzers",
            "Alien/Units/AlienBuzzers.xml",
            231,
        ),
        # 22–25. Alien/Units/AlienRepairDroneTower.xml removes four of BaseRepairDrone's modules, one in <AI>
        (
            "AlienRepairDroneTower",
            "Alien/Units/AlienRepairDroneTower.xml",
            157,
            "SlavedUpdate",
            "ModuleTag_SlavedUpdate",
            "BaseRepairDrone",
            "BaseObjects/BaseRepairDrone.xml",
            20,
        ),
        (
            "AlienRepairDroneTower",
            "Alien/Units/AlienRepairDroneTower.xml",
            167,
            "PassiveAreaEffectBehavior",
            "ModuleTag_PassiveAreaEffect",
            "BaseRepairDrone",
            "BaseObjects/BaseRepairDrone.xml",
            27,
        ),
        (
            "AlienRepairDroneTower",
            "Alien/Units/AlienRepairDroneTower.xml",
            189,
            "AttachUpdate",
            "ModuleTag_Attach",
            "BaseRepairDrone",
            "BaseObjects/BaseRepairDrone.xml",
            49,
        ),
        (
            "AlienRepairDroneTower",
            "Alien/Units/AlienRepairDroneTower.xml",
            213,
            "JetAIUpdate",
            "ModuleTag_JetAIUpdate",
            "BaseRepairDrone",
            "BaseObjects/BaseRepairDrone.xml",
            73,
        ),
        # 26, 27. BlackHand/Structures/BlackHandConstructionYard.xml:28 and :31 put xai:joinAction="Remove"
        # on an xi:include: the fragments NODConstructionYard includes (NOD/…/NODConstructionYard.xml:437,
        # :439) are taken out — their modules live in the fragment files, line 3.
        (
            "BlackHandConstructionYard",
            "BlackHand/Structures/BlackHandConstructionYard.xml",
            28,
            "CreateObjectDie",
            "ModuleTag_CreateOccupiedDie",
            "NODConstructionYard",
            "Includes/GenericNODBuildingDestruction.xml",
            3,
        ),
        (
            "BlackHandConstructionYard",
            "BlackHand/Structures/BlackHandConstructionYard.xml",
            31,
            "CreateObjectDie",
            "ModuleTag_CreateOccupiedSuicide",
            "NODConstructionYard",
            "Includes/ConYardNODBuildingSuicide.xml",
            3,
        ),
    ],
)
def test_kw_remove(kw, unit, file, line, element, module, base_asset, base_file, base_line):
    vanilla, _mod = kw
    out, _rows, _by_path = merged(vanilla, "GameObject", unit)
    gone = removed(out, element, module)
    assert gone["from"] == base_asset
    at(gone, base_file, base_line)
    assert gone["removedBy"]["from"] == unit
    at(gone["removedBy"], file, line)


def test_kw_a_removed_fragment_is_replaced_by_another(kw):
    """28. BlackHandConstructionYard then includes its own GenericBlackHandBuildingDestruction.xml (line 35),
    whose CreateObjectDie has the id just removed: it is added, from the fragment file."""
    vanilla, _mod = kw
    _out, _rows, by_path = merged(vanilla, "GameObject", "BlackHandConstructionYard")
    die = one(by_path, "GameObject/Behaviors/CreateObjectDie#ModuleTag_CreateOccupiedDie")
    assert die["attributes"]["CreationList"]["value"] == "OCL_GenericBlackHandBuildingDestruction"
    assert die["from"] == "BlackHandConstructionYard" and die["how"] == "own"
    at(die, "Includes/GenericBlackHandBuildingDestruction.xml", 3)
    assert die["includedAt"]["line"] == 35


def test_kw_replace_display_name_with_nothing_inherited(kw):
    """29. MarkedOfKane/Units/MarkedOfKaneImprovedCyborgInfantry.xml:217 (BaseInfantry has no DisplayName)."""
    vanilla, _mod = kw
    _out, _rows, by_path = merged(vanilla, "GameObject", "MarkedOfKaneImprovedCyborgInfantry")
    name = one(by_path, "GameObject/DisplayName")
    assert (name["text"]["value"], name["line"], name["how"]) == (
        "Name:MarkedOfKaneImprovedCyborgInfantry",
        217,
        "own",
    )


def test_kw_overwrite_in_sequences_choices_and_single_choices(kw):
    """30–34. Alien/Units/AlienGiantTiberiumRockFiringMechanism.xml (line 9) on AlienStormrider
    (Alien/Units/AlienStormrider.xml): `Overwrite` on a LocomotorSet (repeatable, no id: nothing to match, so
    it is added after the parent's two, lines 78 and 82), on the AI's JetAIUpdate (line 33, replacing line
    473: CirclesForAttack is gone), on VisionInfo (once per object: line 49 replaces line 535); the
    ActiveBody (line 45) sits in <Body>, a single choice, so it merges with the parent's whatever its id."""
    vanilla, _mod = kw
    _out, _rows, by_path = merged(vanilla, "GameObject", "AlienGiantTiberiumRockFiringMechanism")
    locos = by_path["GameObject/LocomotorSet"]
    assert [(x["from"], x["line"], x["attributes"]["Locomotor"]["value"]) for x in locos] == [
        ("AlienStormrider", 78, "AlienStormriderLocomotor"),
        ("AlienStormrider", 82, "BasicHelicopterTaxiLocomotor"),
        ("AlienGiantTiberiumRockFiringMechanism", 15, "GiantTiberiumRockLocomotor"),
    ]
    ai = one(by_path, "GameObject/AI/JetAIUpdate#ModuleTag_AI")
    assert (ai["how"], ai["line"], ai["base"]["line"]) == ("replaced", 33, 473)
    assert ai["attributes"]["AutoAcquireEnemiesWhenIdle"]["value"] == "NO"
    assert "CirclesForAttack" not in ai["attributes"]
    assert not [p for p in by_path if p.endswith("UnitAITargetChooserData")]  # commented out in the child
    vision = one(by_path, "GameObject/VisionInfo")
    assert (vision["how"], vision["line"], vision["attributes"]["VisionRange"]["value"]) == (
        "replaced",
        49,
        "0",
    )
    body = one(by_path, "GameObject/Body/ActiveBody#ModuleTag_04")
    assert body["how"] == "merged" and body["base"]["line"] == 485
    assert (body["attributes"]["MaxHealth"]["value"], body["line"]) == ("600000.0", 45)


# --- the KW fixture mod (tests/kinds/sage/fixtures/kw-mod) ----------------------------------------------------
def test_kw_mod_unit_replace_remove_fragment_and_define(kw):
    """35–39. Data/Units/GDIRailPredator.xml on GDIPredator (KW GDI/Units/GDIPredator.xml)."""
    _vanilla, mod = kw
    out, _rows, by_path = merged(mod, "GameObject", "GDIRailPredator")
    assert [c["id"] for c in out["chain"]] == ["GDIRailPredator", "GDIPredator", "BaseVehicle"]
    draw = one(by_path, "GameObject/Draws/TankDraw#ModuleTag_Draw")
    assert (draw["how"], draw["line"], draw["base"]["line"]) == ("replaced", 18, 81)
    assert "TrackMarks" not in draw["attributes"]
    gone = removed(out, "LaserState", "ModuleTag_LaserState")
    assert (gone["line"], gone["removedBy"]["line"]) == (398, 40)
    weapons = by_path[
        "GameObject/Behaviors/WeaponSetUpdate#ModuleTag_WeaponSetUpdate/WeaponSlotTurret/Weapon"
    ]
    assert [w["attributes"]["Template"]["value"] for w in weapons] == ["GDIRailPredatorRailgun"]
    death = one(by_path, "GameObject/Behaviors/FireWeaponWhenDead#ModuleTag_RailDeath")
    assert death["file"] == "Data/Includes/RailPredatorDeath.xml" and death["line"] == 2
    assert death["includedAt"] == {"file": "Data/Units/GDIRailPredator.xml", "line": 43}
    cost = one(by_path, "GameObject")["attributes"]["BuildCost"]
    assert (cost["value"], cost["from"]) == ("=$RAIL_PREDATOR_COST", "GDIRailPredator")


def test_kw_mod_weapon_attributes_override_the_vanilla_parent(kw):
    """40, 41. Data/Weapons/RailWeapons.xml: GDIRailPredatorRailgun on GDIPredatorTankRailgun
    (KW GlobalData/Weapon.xml:1985): AttackRange 350 is its own, WeaponSpeed 800 and the Nuggets inherited."""
    _vanilla, mod = kw
    _out, _rows, by_path = merged(mod, "WeaponTemplate", "GDIRailPredatorRailgun")
    attrs = one(by_path, "WeaponTemplate")["attributes"]
    assert (attrs["AttackRange"]["value"], attrs["AttackRange"]["from"]) == (
        "350.0",
        "GDIRailPredatorRailgun",
    )
    assert (attrs["WeaponSpeed"]["value"], attrs["WeaponSpeed"]["from"], attrs["WeaponSpeed"]["line"]) == (
        "800",
        "GDIPredatorTankRailgun",
        1985,
    )
    nugget = one(by_path, "WeaponTemplate/Nuggets/DamageNugget")
    assert (nugget["how"], nugget["attributes"]["Damage"]["value"]) == ("inherited", "572.0")


def test_errors_name_the_next_tool(real_index):
    from deskbridge.core.errors import BridgeError

    with pytest.raises(BridgeError) as err:
        get_effective_asset(real_index, "GameObject", "NoSuchUnitAnywhere")
    assert err.value.code == "NOT_FOUND" and "sage_find_asset" in err.value.hint
    assert SAGE_DATA.exists()
