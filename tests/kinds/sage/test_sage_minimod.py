"""Streams, include kinds, manifests, defines, references and diagnostics on a tiny synthetic mod."""

from __future__ import annotations

import os

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.sage import forward, queries
from deskbridge.kinds.sage.manifest import build_manifest
from deskbridge.kinds.sage.service import SageService


def open_mini(minimod):
    service = SageService(minimod.mod / "Data" / "Units", minimod.sdk)  # any path inside the project works
    return service, service.open_sync()


def codes(index, code):
    return [d for d in index.all_diagnostics() if d.code == code]


def test_streams_and_how_each_file_belongs(minimod):
    service, index = open_mini(minimod)
    assert service.project == minimod.mod
    assert set(index.streams) == {"static", "global:MapMetaData_Mini"}
    tank = queries.is_file_active(index, "Data/Units/Tank.xml")
    assert tank["active"] and tank["compiled"]
    assert tank["streams"] == [{"stream": "static", "how": "all"}]
    assert tank["includedBy"][0]["source"] == "units\\Tank.xml."  # backslash, case and trailing dot
    base = queries.is_file_active(index, "Data/Base/Base.xml")
    assert base["streams"] == [{"stream": "static", "how": "instance"}]
    static = queries.is_file_active(index, str(minimod.sdk / "SageXml" / "Static.xml"))
    assert static["streams"] == [{"stream": "static", "how": "reference"}]
    unused = queries.is_file_active(index, "Data/Unused.xml")
    assert not unused["active"] and unused["note"]
    assert str(minimod.mod / "Data" / "Unused.xml") in index.source_candidates


def test_reference_include_reads_the_manifest_instead_of_walking(minimod):
    _, index = open_mini(minimod)
    found = queries.find_asset(index, "manifestunit")["items"]
    assert found == [
        {
            "type": "GameObject",
            "id": "ManifestUnit",
            "file": "",
            "line": 0,
            "origin": "manifest",
            "streams": {},
            "viaInstance": False,
            "manifest": str(minimod.sdk / "BuiltMods" / "SageXml" / "global.manifest"),
            "manifestSource": "DATA:global.xml",
        }
    ]
    assert queries.find_asset(index, "NeverWalked")["total"] == 0
    edge = next(e for e in index.includes if e.source == "DATA:global.xml")
    assert edge.via_manifest.endswith("global.manifest")


def test_assets_keep_every_definition_and_ids_ignore_case(minimod):
    minimod.write(
        "Data/Units/Tank.xml",
        (minimod.mod / "Data/Units/Tank.xml")
        .read_text()
        .replace("</AssetDeclaration>", '<FXList id="fx_vanilla"/></AssetDeclaration>'),
    )
    _, index = open_mini(minimod)
    defs = queries.find_asset(index, "FX_VANILLA", "FXList")["items"]
    assert [d["origin"] for d in defs] == ["sdk", "project"]
    assert queries.find_asset(index, "tank")["items"][0]["line"] == 4


def test_typed_references_with_positions(minimod):
    _, index = open_mini(minimod)
    sites = queries.find_references(index, "TankGun", "WeaponTemplate")["items"]
    kinds = {(s["kind"], s["element"], s["attribute"]) for s in sites}
    assert kinds == {("attribute", "Weapon", "Template"), ("inheritFrom", "WeaponTemplate", "inheritFrom")}
    weapon = next(s for s in sites if s["kind"] == "attribute")
    line = (minimod.mod / "Data/Units/Tank.xml").read_text().split("\n")[weapon["line"] - 1]
    assert line[weapon["column"] - 1 : weapon["endColumn"] - 1] == "TankGun"
    assert weapon["from"] == {"type": "GameObject", "id": "Tank"}
    # content reference, list reference; `$X`, `=Y` and the Poid id are not references
    tank_refs = queries.find_references(index, "Tank")["items"]
    assert {(s["kind"], s["element"]) for s in tank_refs} == {
        ("content", "IncludeThing"),
        ("attribute", "GameObject"),
    }
    assert queries.find_references(index, "LocalFilter")["total"] == 0
    assert "hint" not in queries.find_references(index, "Orphan")  # defined, and nothing uses it: that is all
    # QA: an id nothing defines (a typo) is not answered as "nobody uses it" alone
    typo = queries.find_references(index, "TankGnu")
    assert typo["total"] == 0 and "sage_find_asset" in typo["hint"] and "no asset" in typo["hint"].lower()
    assert not [
        r for r in index.files[str(minimod.mod / "Data/Units/Tank.xml")].refs if r[2] in ("$X", "X", "=Y")
    ]


def test_defines_merge_through_every_include_kind_with_the_override_rule(minimod):
    _, index = open_mini(minimod)
    health = queries.find_define(index, "$health")["items"]
    assert [d["value"] for d in health] == ["100", "200"]
    dup = codes(index, "duplicate-define")
    assert len(dup) == 1 and "HEALTH" in dup[0].message
    assert queries.find_define(index, "ARMOR")["items"][0]["override"] is True
    assert "hint" not in queries.find_define(index, "ARMOR")
    # QA: a name nothing defines (a typo) says so, with the close names, instead of an empty list alone
    typo = queries.find_define(index, "$HELTH")
    assert typo["total"] == 0 and typo["candidates"] == ["HEALTH"] and "sage_find_define" in typo["hint"]


def test_diagnostics_for_missing_includes_cycles_and_duplicates(minimod):
    minimod.write(
        "Data/Base/Base.xml",
        minimod.mod.joinpath("Data/Base/Base.xml")
        .read_text()
        .replace(
            "<GameObject",
            '<Includes><Include type="all" source="../Mod.xml"/></Includes>\n'
            '<GameObject id="InstanceOnly"/><GameObject',
        ),
    )
    _, index = open_mini(minimod)
    missing = codes(index, "include-not-found")
    assert [d.message for d in missing] == ["all include 'Missing.xml' does not resolve to a file"]
    assert len(codes(index, "include-cycle")) == 1
    assert len(codes(index, "duplicate-instance")) == 1


def test_unresolved_references_are_reported(minimod):
    minimod.write(
        "Data/Units/Tank.xml",
        minimod.mod.joinpath("Data/Units/Tank.xml")
        .read_text()
        .replace('Template="TankGun"', 'Template="NoSuchGun"'),
    )
    _, index = open_mini(minimod)
    unresolved = codes(index, "unresolved-reference")
    assert [d.message for d in unresolved] == [
        "WeaponTemplate 'NoSuchGun' is not defined in any indexed file"
    ]


def test_inheritance_chain_and_forward_references(minimod):
    _, index = open_mini(minimod)
    chain = queries.get_inheritance_chain(index, "WeaponTemplate", "TankGunVet")
    assert [s["id"] for s in chain["chain"]] == ["TankGunVet", "TankGun"]
    out = forward.get_asset_references(
        index,
        "WeaponTemplate",
        "TankGunVet",
        target_types=["FXList", "WeaponTemplate"],
        include_inheritance=True,
    )
    fx = [e for e in out["edges"] if e["via"]["kind"] == "attribute"]
    assert fx[0]["to"]["id"] == "FX_Vanilla" and fx[0]["definedIn"] == {
        "type": "WeaponTemplate",
        "id": "TankGun",
    }
    assert any(e["via"]["kind"] == "inheritFrom" for e in out["edges"])
    out = forward.get_asset_references(index, "GameObject", "Tank", depth=2, max_edges=2)
    assert out["edgeCount"] == 2 and out["total"] > 2 and out["nextCursor"]
    rest = forward.get_asset_references(
        index, "GameObject", "Tank", depth=2, max_edges=2, cursor=out["nextCursor"]
    )
    assert rest["edges"] and rest["edges"][0] not in out["edges"]
    with pytest.raises(BridgeError) as err:
        forward.get_asset_references(index, "GameObject", "Tank", depth=4)
    assert err.value.code == "INVALID_ARGUMENT"


def test_unknown_type_suggests_the_right_spelling(minimod):
    _, index = open_mini(minimod)
    with pytest.raises(BridgeError) as err:
        queries.list_assets_by_type(index, "gameobject")
    assert err.value.code == "NOT_FOUND" and "GameObject" in err.value.data["candidates"]


def test_pagination_walks_every_item_once(minimod):
    _, index = open_mini(minimod)
    ids, cursor = [], None
    while True:
        page = queries.list_assets_by_type(index, "GameObject", cursor=cursor, limit=2)
        ids += [r["id"] for r in page["items"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert sorted(ids, key=str.casefold) == ids and len(ids) == len(set(ids)) == page["total"]
    with pytest.raises(BridgeError):
        queries.list_assets_by_type(index, "GameObject", cursor="garbage!")
    with pytest.raises(BridgeError) as err:
        queries.list_assets_by_type(index, "GameObject", limit=100_000)
    assert err.value.code == "LIMIT_EXCEEDED"


def test_get_definition_returns_the_xml_excerpt(minimod):
    _, index = open_mini(minimod)
    d = queries.get_definition(index, "GameObject", "tank")
    assert d["startLine"] == 4 and d["endLine"] == 11
    assert d["excerpt"].lstrip().startswith('<GameObject id="Tank"') and d["excerpt"].rstrip().endswith(
        "</GameObject>"
    )


def test_resolve_include_shows_the_search_paths(minimod):
    _, index = open_mini(minimod)
    service = SageService(minimod.mod, minimod.sdk)
    hit = queries.resolve_include(index, service.resolver, "DATA:GLOBALDATA\\globaldefines.xml")
    assert hit["resolved"] == str(minimod.sdk / "SageXml" / "GlobalData" / "GlobalDefines.xml")
    miss = queries.resolve_include(index, service.resolver, "DATA:nothing.xml")
    assert miss["resolved"] is None and miss["hint"]


def test_no_sdk_is_reported_once_not_as_hundreds_of_errors(minimod, monkeypatch):
    monkeypatch.delenv("DESKBRIDGE_SAGE_SDK", raising=False)
    service = SageService(minimod.mod)
    index = service.open_sync()
    assert service.sdk is None
    assert len(codes(index, "sdk-not-configured")) == 1
    # DATA:static.xml and friends are not each reported; a missing relative include still is
    assert [d.message for d in codes(index, "include-not-found")] == [
        "all include 'Missing.xml' does not resolve to a file"
    ]
    assert index.stats["suppressedIncludeNotFound"] == 3  # static, global, GlobalDefines
    assert queries.find_asset(index, "Tank")["total"] == 1


def test_art_is_scanned_in_a_second_phase(minimod):
    minimod.write(
        "Art/AU/AUTank_SKN.w3x",
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n'
        '<W3DContainer id="AUTank_SKN"><Pivots/></W3DContainer>\n<W3DMesh id="AUTank_SKN.Hull"/>\n'
        "</AssetDeclaration>\n",
    )
    minimod.write(
        "Data/Units/Tank.xml",
        minimod.mod.joinpath("Data/Units/Tank.xml")
        .read_text()
        .replace("</Includes>", '<Include type="instance" source="ART:AUTank_SKN.w3x"/></Includes>'),
    )
    service = SageService(minimod.mod, minimod.sdk)
    published = []
    index = service.build_sync(publish=lambda i: published.append((i.phase, i.complete)))
    assert published == [("xml", False), ("art", True)]  # ready_xml first, then ready
    assert index.stats["shallowScannedFiles"] == 1
    mesh = queries.find_asset(index, "autank_skn.hull")["items"]
    assert mesh[0]["type"] == "W3DMesh" and mesh[0]["file"] == "Art/AU/AUTank_SKN.w3x"
    assert mesh[0]["streams"] == {"static": "instance"}


def test_babproj_streams_and_reference_manifests_from_another_machine(minimod):
    """A `.babproj` written on Windows names `G:\\…` paths; they are mapped by their tail onto this machine."""
    (minimod.sdk / "Custom").mkdir()
    (minimod.sdk / "Custom" / "static.manifest").write_bytes(
        build_manifest([("GameObject:FromBabprojManifest", "DATA:static.xml")], 5)
    )
    minimod.write(
        "Data/AptUI/Page.xml",
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset"><GameObject id="AptThing"/></AssetDeclaration>',
    )
    minimod.write(
        "mod.babproj",
        """<?xml version="1.0"?>
<BinaryAssetBuilderProject xmlns="urn:xmlns:ea.com:babproject">
  <Stream Source="G:\\RA3 MOD SDK\\Mods\\MiniMod\\data\\mod.xml">
    <Configuration Name="" Default="true">
      <StreamReference ReferenceName="static.xml" ReferenceManifest="G:\\RA3 MOD SDK\\Custom\\static.manifest"
        ReferenceConfiguration="" />
    </Configuration>
  </Stream>
  <Stream Source="G:\\RA3 MOD SDK\\Mods\\MiniMod\\data\\aptui\\Page.xml"><Configuration Name="" /></Stream>
</BinaryAssetBuilderProject>""",
    )
    _, index = open_mini(minimod)
    assert "babproj:Page" in index.streams and "static" in index.streams
    assert queries.find_asset(index, "FromBabprojManifest")["items"][0]["origin"] == "manifest"
    assert queries.find_asset(index, "FX_Vanilla")["total"] == 0  # static.xml was not walked
    assert queries.is_file_active(index, "Data/AptUI/Page.xml")["streams"] == [
        {"stream": "babproj:Page", "how": "all"}
    ]


def test_a_schema_change_invalidates_the_records_cache(minimod):
    first = SageService(minimod.mod, minimod.sdk)
    first.open_sync()
    assert first.save_cache()
    assert SageService(minimod.mod, minimod.sdk).open_sync().stats["parsedFiles"] == 0
    xsd = minimod.sdk / "Schemas/xsd/CnC3Types.xsd"
    xsd.write_text(
        xsd.read_text().replace('name="FireFX" type="FXListRef"', 'name="FireFX" type="xs:string"')
    )
    again = SageService(minimod.mod, minimod.sdk).open_sync()
    assert again.stats["parsedFiles"] == again.stats["indexedFiles"]
    assert queries.find_references(again, "FX_Vanilla")["total"] == 0  # FireFX is no longer a reference


def test_persisted_include_answers_are_dropped_when_a_folder_changes(minimod, monkeypatch):
    monkeypatch.setattr("deskbridge.kinds.sage.paths.RACY_DIR_NS", 0)  # trust folders made just now
    first = SageService(minimod.mod, minimod.sdk)
    first.open_sync()
    assert first.save_cache()
    warm = SageService(minimod.mod, minimod.sdk)
    warm.open_sync()
    assert first.resolver.calls > first.resolver.memo_hits  # the cold build resolved from scratch
    assert warm.resolver.memo_hits == warm.resolver.calls > 0  # all from the cache
    # A mod file now shadows the SDK's static.xml (DATA: tries the mod's Data before SageXml).
    minimod.write(
        "Data/STATIC.xml",
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset"><GameObject id="ModStatic"/></AssetDeclaration>',
    )
    again = SageService(minimod.mod, minimod.sdk)
    index = again.open_sync()
    edge = next(e for e in index.includes if e.source == "DATA:static.xml")
    assert edge.target == str(minimod.mod / "Data" / "STATIC.xml")
    assert queries.find_asset(index, "ModStatic")["total"] == 1


def test_edits_to_unreached_files_change_nothing_but_new_files_rebuild(minimod):
    service = SageService(minimod.mod, minimod.sdk)
    before = service.open_sync()
    unused = minimod.mod / "Data/Unused.xml"
    unused.write_text(unused.read_text().replace("Orphan", "StillOrphan"))
    edited = service.reindex_sync([str(unused)])
    # Nothing includes it: the live index is the same; only its `origin: inactive` definitions moved.
    assert edited.assets is before.assets and edited.by_id is before.by_id
    found = queries.find_asset(edited, "StillOrphan")
    assert found["live"] == 0 and [i["origin"] for i in found["items"]] == ["inactive"]
    assert "no effect in game" in found["items"][0]["warning"]
    assert queries.find_asset(edited, "Orphan")["total"] == 0
    fresh = minimod.write("Data/Units/Fresh.xml", '<AssetDeclaration xmlns="uri:ea.com:eala:asset"/>')
    after = service.reindex_sync([str(fresh)])
    assert after is not edited and str(fresh) in after.source_candidates


def test_a_patched_file_keeps_its_include_diagnostics_on_their_new_lines(minimod):
    service = SageService(minimod.mod, minimod.sdk)
    before = service.open_sync()
    mod_xml = minimod.mod / "Data" / "Mod.xml"
    [missing] = [d for d in codes(before, "include-not-found")]
    mod_xml.write_text(mod_xml.read_text().replace("<Includes>", "\n\n<Includes>"))  # two lines down
    after = service.reindex_sync([str(mod_xml)])
    assert after.stats.get("patchedFiles") == 1
    [moved] = [d for d in codes(after, "include-not-found")]
    assert moved.line == missing.line + 2 and moved.message == missing.message
    edge = next(e for e in after.includes if e.source == "Missing.xml")
    assert edge.line == moved.line


def test_root_level_xi_include_splices_assets_in(minimod):
    """XInclude at the document root: without xpointer the target's root element becomes an asset; with
    `xpointer(/n:X/child::*)` the children of X do."""
    minimod.write(
        "Data/Units/Spliced.xml",
        '<GameObject xmlns="uri:ea.com:eala:asset" id="RootSpliced" '
        'inheritFrom="BaseUnit"><Behaviors><WeaponSetUpdate><WeaponSlotHardpoint>'
        '<Weapon Template="TankGun"/></WeaponSlotHardpoint></WeaponSetUpdate></Behaviors></GameObject>',
    )
    minimod.write(
        "Data/Units/Pack.xml",
        '<UnitPack xmlns="uri:ea.com:eala:asset">\n'
        '<WeaponTemplate id="PackGun" FireFX="FX_Vanilla"/>\n<FXList id="PackFX"/>\n</UnitPack>',
    )
    minimod.write(
        "Data/Units/Tank.xml",
        minimod.mod.joinpath("Data/Units/Tank.xml")
        .read_text()
        .replace(
            "</AssetDeclaration>",
            '<xi:include href="Spliced.xml"/>\n'
            '<xi:include href="Pack.xml" xpointer="xmlns(n=uri:ea.com:eala:asset) xpointer(/n:UnitPack/child::*)"/>\n'
            "</AssetDeclaration>",
        ),
    )
    _, index = open_mini(minimod)
    root = queries.find_asset(index, "RootSpliced")["items"]
    assert [(a["type"], a["file"], a["line"]) for a in root] == [("GameObject", "Data/Units/Spliced.xml", 1)]
    pack = queries.find_asset(index, "PackGun")["items"]
    assert [(a["type"], a["file"], a["line"]) for a in pack] == [("WeaponTemplate", "Data/Units/Pack.xml", 2)]
    assert queries.find_asset(index, "PackFX")["total"] == 1
    assert queries.find_asset(index, "UnitPack")["total"] == 0  # the container is not an asset
    # references inside spliced assets belong to them
    users = queries.find_references(index, "TankGun", "WeaponTemplate")["items"]
    assert {"type": "GameObject", "id": "RootSpliced"} in [u["from"] for u in users]
    fx = [u for u in queries.find_references(index, "FX_Vanilla")["items"] if u["file"].endswith("Pack.xml")]
    assert [u["from"] for u in fx] == [{"type": "WeaponTemplate", "id": "PackGun"}]
    chain = queries.get_inheritance_chain(index, "GameObject", "RootSpliced")
    assert [s["id"] for s in chain["chain"]] == ["RootSpliced", "BaseUnit"]
    edges = forward.get_asset_references(index, "GameObject", "RootSpliced", target_types=["WeaponTemplate"])
    assert [e["to"]["id"] for e in edges["edges"] if e["via"]["kind"] == "attribute"] == ["TankGun"]


def test_a_windows_1252_file_shows_its_own_letters_and_columns(minimod):
    """QA: Windows-authored XML declaring `encoding="windows-1252"` (XML 1.0 §4.3.3: the declaration names
    the encoding) is shown and located in that encoding, not as UTF-8: the excerpt keeps `ä` (not U+FFFD,
    which an agent would copy into its edit), and `Ã¼` — two letters in windows-1252 that are also the UTF-8
    bytes of one `ü` — counts as two columns."""
    text = (
        '<?xml version="1.0" encoding="windows-1252"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n'
        '  <WeaponTemplate id="Pänzer" FireFX="FX_Vanilla"/>\n'
        '  <WeaponTemplate id="BrÃ¼cke" FireFX="FX_Vanilla"/>\n'
        "</AssetDeclaration>\n"
    )
    (minimod.mod / "Data/Units/Tank.xml").write_bytes(text.encode("cp1252"))
    _, index = open_mini(minimod)
    shown = queries.get_definition(index, "WeaponTemplate", "pänzer")
    assert shown["excerpt"] == '  <WeaponTemplate id="Pänzer" FireFX="FX_Vanilla"/>'
    line = text.split("\n")[3]
    sites = [s for s in queries.find_references(index, "FX_Vanilla")["items"] if s["line"] == 4]
    assert [s["column"] for s in sites] == [line.index("FX_Vanilla") + 1]


def test_a_looping_or_dangling_link_is_named_as_such_where_it_is_included(minimod):
    """QA: an include that names a symbolic link looping onto itself, or one whose target is gone, said
    "the file vanished while indexing" — a modder would look for a deleted file. It now says what the link
    is (never where it points) and what to do."""
    data = minimod.mod / "Data"
    os.symlink("Loop.xml", data / "Loop.xml")
    os.symlink("Gone/Nowhere.xml", data / "Dangling.xml")
    mod_xml = data / "Mod.xml"
    mod_xml.write_text(
        mod_xml.read_text().replace(
            "<Includes>",
            '<Includes><Include type="all" source="Loop.xml"/><Include type="all" source="Dangling.xml"/>',
        )
    )
    _, index = open_mini(minimod)
    found = {d.file.rpartition("/")[2]: d for d in index.all_diagnostics() if "Data/" in d.file}
    loop, dangling = found["Loop.xml"], found["Dangling.xml"]
    assert loop.code == "unreadable-file" and "loops" in loop.message and "vanished" not in loop.message
    assert dangling.code == "unreadable-file" and "target is gone" in dangling.message
    assert "Nowhere" not in dangling.message
    active = queries.is_file_active(index, "Data/Loop.xml")  # included, yet nothing of it is indexed
    assert active["active"] and "loops" in active["unreadable"] and "could not be read" in active["note"]
    assert "unreadable" not in queries.is_file_active(index, "Data/Units/Tank.xml")


def test_the_mods_own_diagnostics_come_before_the_sdks(minimod):
    """QA: with a KW or RA3 SDK, thousands of vanilla warnings (art EA does not ship) came first, so the first
    page of sage_list_diagnostics showed nothing of the mod's own problems. The mod's rows come first now,
    each row says its origin, and `origin` filters them."""
    static = minimod.sdk / "SageXml/Static.xml"
    static.write_text(
        static.read_text().replace(
            "<Includes>", '<Includes><Include type="all" source="ART:NotShipped.w3x"/>'
        )
    )
    _, index = open_mini(minimod)
    rows = queries.list_diagnostics(index)["items"]
    origins = [r["origin"] for r in rows]
    assert origins == sorted(origins, key=lambda o: o != "project") and origins[-1] == "sdk"
    assert rows[0]["file"].startswith("Data/") and any("Missing.xml" in r["message"] for r in rows[:5])
    sdk_only = queries.list_diagnostics(index, origin="sdk")["items"]
    assert sdk_only and {r["origin"] for r in sdk_only} == {"sdk"}
    no_sdk = SageService(minimod.mod, None).open_sync()  # a diagnostic about the project itself, no file
    [note] = queries.list_diagnostics(no_sdk, "sdk-not-configured", origin="project")["items"]
    assert note["file"] == ""
    with pytest.raises(BridgeError) as err:
        queries.list_diagnostics(index, origin="mod")
    assert err.value.code == "INVALID_ARGUMENT" and "project" in err.value.hint


def test_file_arguments_in_another_letter_case_find_the_file_as_windows_tools_do(minimod):
    """QA: a Windows modder (or an agent copying an include source) writes `data\\units\\TANK.xml`. The
    answers named that path as given — a path that does not open on Linux — and the diagnostics filter
    and a relative include's `from` found nothing. They now match the file case-insensitively."""
    _, index = open_mini(minimod)
    unused = queries.is_file_active(index, "data\\UNUSED.xml")  # a file no stream includes
    assert unused["path"] == "Data/Unused.xml" and not unused["active"]
    minimod.write("Data/Units/Broken.xml", "<AssetDeclaration")
    mod_xml = minimod.mod / "Data/Mod.xml"
    mod_xml.write_text(
        mod_xml.read_text().replace("<Includes>", '<Includes><Include type="all" source="Units/Broken.xml"/>')
    )
    _, index = open_mini(minimod)
    assert queries.list_diagnostics(index, "parse-error", "data/units/BROKEN.XML")["total"] >= 1
    resolved = queries.resolve_include(index, _resolver(minimod), "Tank.xml", "DATA\\units\\broken.xml")
    assert resolved["from"] == "Data/Units/Broken.xml" and resolved["resolved"] == "Data/Units/Tank.xml"


def _resolver(minimod):
    service, _ = open_mini(minimod)
    return service.resolver


def test_an_absolute_windows_include_says_it_is_one_and_how_to_write_it(minimod):
    """QA: `source="C:\\Mods\\MiniMod\\Data\\Units\\Tank.xml"` (the author's own disk) was reported as leading
    outside the mod — true here, but a Windows modder reads it as a wrong folder. It says what it is now."""
    mod_xml = minimod.mod / "Data/Mod.xml"
    mod_xml.write_text(
        mod_xml.read_text().replace(
            "<Includes>",
            '<Includes><Include type="all" source="C:\\Mods\\MiniMod\\Data\\Units\\Tank.xml"/>'
            '<Include type="all" source="\\\\server\\share\\Tank.xml"/>',
        )
    )
    _, index = open_mini(minimod)
    found = codes(index, "include-outside-roots")
    assert len(found) == 2 and all("absolute Windows path" in d.message for d in found)
    assert all("DATA:" in d.message for d in found)


def test_a_crlf_files_excerpt_ends_with_the_element_not_a_stray_carriage_return(minimod):
    """QA: a Windows (CRLF) file's excerpt kept its line breaks as written but ended in a lone '\\r'."""
    tank = minimod.mod / "Data/Units/Tank.xml"
    tank.write_bytes(tank.read_bytes().replace(b"\n", b"\r\n"))
    _, index = open_mini(minimod)
    shown = queries.get_definition(index, "GameObject", "Tank")
    assert shown["excerpt"].endswith("</GameObject>") and "\r\n" in shown["excerpt"]
    assert shown["endLine"] - shown["startLine"] == shown["excerpt"].count("\n")


def test_a_broken_sdk_schema_is_a_diagnostic_and_degrades_the_index(minimod):
    """QA: a modder who edits the SDK's XSDs (to add a module) and leaves one malformed, or deletes an
    included one, got `references 0` and no word why: the compile skipped what it could not parse. It is
    now a `schema-error` diagnostic naming the file, and the state is degraded — also on a warm start."""
    ref_xsd = minimod.sdk / "Schemas/xsd/Includes/Ref.xsd"
    ref_xsd.write_text(ref_xsd.read_text()[:300])  # cut mid-way, as a failed save leaves it
    for _attempt in ("cold", "warm"):
        service, index = open_mini(minimod)
        found = codes(index, "schema-error")
        assert found and all(d.file == str(ref_xsd) for d in found), [d.message for d in found]
        assert service.status()["state"] == "degraded"
        assert any("schema-error" in why for why in service.status()["degraded"])
        service.save_cache()
    ref_xsd.unlink()
    _, index = open_mini(minimod)
    [missing] = codes(index, "schema-error")
    assert "includes/Ref.xsd" in missing.message and missing.file.endswith("CnC3Types.xsd")


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() == 0,
    reason="root reads a chmod 000 file anyway: permission bits cannot make a file unreadable for it",
)
def test_a_file_without_read_permission_is_unreadable_file_and_the_rest_is_indexed(minimod):
    """An included file the user may not read (chmod 000, a file copied from another account) is an
    `unreadable-file` diagnostic saying why; the other files are indexed."""
    tank = minimod.mod / "Data/Units/Tank.xml"
    tank.chmod(0)
    try:
        _, index = open_mini(minimod)
    finally:
        tank.chmod(0o644)
    [err] = [d for d in codes(index, "unreadable-file") if d.file == str(tank)]
    assert "cannot be opened" in err.message and "Data/Units/Tank.xml" in err.message
    assert queries.find_asset(index, "InstanceOnly")["total"] == 1
