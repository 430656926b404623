"""Project discovery, SDK recognition, the deskbridge directories, path aliases and the XSD model."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.sage import schema
from deskbridge.kinds.sage.paths import CaseFoldTree, PathResolver, SearchPaths, default_search_paths
from deskbridge.kinds.sage.project import find_project_root, is_sdk, locate_sdk
from deskbridge.kinds.sage.schema import SchemaModel, compile_schema, load_schema
from deskbridge.kinds.sage.settings import deskbridge_dirs


def touch(path: Path, text: str = "<AssetDeclaration/>") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_deskbridge_home_moves_every_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("DESKBRIDGE_HOME", str(tmp_path))
    dirs = deskbridge_dirs()
    assert (dirs.cache, dirs.data, dirs.config) == (
        tmp_path / "cache",
        tmp_path / "data",
        tmp_path / "config",
    )


def test_project_root_from_any_path_nearest_marker_wins(tmp_path):
    outer = tmp_path / "outer"
    touch(outer / "DATA" / "mod.XML")
    inner = outer / "Mods" / "Inner"
    touch(inner / "Data" / "AdditionalMaps" / "MapMetaData_Inner.xml")
    deep = touch(inner / "Data" / "Units" / "Tank" / "Tank.xml")
    assert find_project_root(deep) == inner
    assert find_project_root(outer / "DATA") == outer
    babproj = tmp_path / "other"
    touch(babproj / "mod.babproj", "<BinaryAssetBuilderProject/>")
    assert find_project_root(babproj) == babproj
    assert find_project_root(tmp_path / "other") == babproj
    # from a container folder, the project below is found
    assert find_project_root(tmp_path) in (outer, babproj)
    with pytest.raises(BridgeError) as err:
        find_project_root(tmp_path / "missing")
    assert err.value.code == "NOT_FOUND"


def test_no_project_anywhere_is_a_clear_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(BridgeError, match="No SAGE mod project"):
        find_project_root(tmp_path / "empty")


def test_sdk_layouts(tmp_path, sage_data):
    assert is_sdk(sage_data.sdk)  # EA's repository layout: Schemas/CnC3Types.xsd
    sdk = tmp_path / "sdk"
    touch(sdk / "Schemas" / "xsd" / "CnC3Types.xsd")
    assert not is_sdk(sdk)  # no SageXml yet
    (sdk / "SageXml").mkdir()
    assert is_sdk(sdk)
    assert locate_sdk(sdk) == sdk
    with pytest.raises(BridgeError, match="--sdk"):
        locate_sdk(tmp_path)


@pytest.fixture
def tree(tmp_path) -> Path:
    touch(tmp_path / "sdk" / "SageXml" / "Static.xml")
    touch(tmp_path / "sdk" / "SageXml" / "Civilian" / "Tree.xml")
    touch(tmp_path / "mod" / "Data" / "Units" / "Tank.xml")
    touch(tmp_path / "mod" / "Art" / "AU" / "AUTank_SKN.w3x")
    touch(tmp_path / "mod" / "Art" / "Tanks" / "Hull.w3x")
    touch(tmp_path / "mod" / "Data" / "Mod.xml")
    return tmp_path


def test_aliases_case_backslashes_trailing_dots(tree):
    search = default_search_paths(tree / "mod", tree / "sdk")
    r = PathResolver(search)
    mod_xml = str(tree / "mod" / "Data" / "Mod.xml")
    assert r.resolve("DATA:static.xml", mod_xml) == str(tree / "sdk" / "SageXml" / "Static.xml")
    assert r.resolve("data:CIVILIAN\\tree.xml.", mod_xml) == str(
        tree / "sdk" / "SageXml" / "Civilian" / "Tree.xml"
    )
    assert r.resolve("DATA:SageXml/Static.xml", mod_xml) == str(tree / "sdk" / "SageXml" / "Static.xml")
    assert r.resolve("units/TANK.xml", mod_xml) == str(tree / "mod" / "Data" / "Units" / "Tank.xml")
    assert r.resolve("./Units/../Units/Tank.xml", mod_xml) == str(
        tree / "mod" / "Data" / "Units" / "Tank.xml"
    )
    assert r.resolve("DATA:nothing.xml", mod_xml) is None
    assert r.resolve("BOGUS:static.xml", mod_xml) is None  # unknown alias
    assert r.resolve("DATA:a:b.xml", mod_xml) is None  # more than one colon
    assert r.resolve("C:\\Games\\x.xml", mod_xml) is None


def test_art_two_letter_rule(tree):
    r = PathResolver(default_search_paths(tree / "mod", tree / "sdk"))
    base = str(tree / "mod" / "Data" / "Mod.xml")
    assert r.resolve("ART:autank_skn.w3x", base) == str(tree / "mod" / "Art" / "AU" / "AUTank_SKN.w3x")
    assert r.resolve("ART:Hull.w3x", base) is None  # no directory part: only <art>/HU/ is tried
    assert r.resolve("ART:tanks/hull.W3X", base) == str(tree / "mod" / "Art" / "Tanks" / "Hull.w3x")


def test_star_search_path_means_the_including_folder(tree):
    r = PathResolver(SearchPaths(data=["*"]))
    tank_dir_file = str(tree / "mod" / "Data" / "Units" / "Other.xml")
    assert r.resolve("DATA:tank.xml", tank_dir_file) == str(tree / "mod" / "Data" / "Units" / "Tank.xml")


def test_lookups_list_each_directory_once(tree, monkeypatch):
    calls = []
    real = CaseFoldTree.listing

    def counting(self, directory):
        if directory not in self._listings:
            calls.append(directory)
        return real(self, directory)

    r = PathResolver(default_search_paths(tree / "mod", tree / "sdk"))
    monkeypatch.setattr(CaseFoldTree, "listing", counting)
    base = str(tree / "mod" / "Data" / "Mod.xml")
    for name in ["units/tank.xml", "Units/Tank.xml", "UNITS/TANK.XML", "units/missing.xml"]:
        r.resolve(name, base)
    assert len(calls) == len(set(calls))


def test_schema_model_of_the_real_sdk(sage_data, tmp_path, monkeypatch):
    entry = sage_data.sdk / "Schemas" / "CnC3Types.xsd"
    model = compile_schema(entry)
    assert len(model.asset_types) > 250 and model.asset_types["GameObject"] == "GameObject"
    # style 1: a named *Ref simple type
    assert model.attr_refs["WeaponTemplate"]["FireFX"] == ("FXList", False)
    # style 2: xas:refType on an element typed WeakReference (simple content)
    assert ("GameObject", False) in model.content_refs.values()
    # style 3: Poid ids are names, never references
    assert "id" not in model.attr_refs.get("ObjectFilter", {})
    # base chains let a base-typed reference accept subtypes
    assert model.assignable("AudioEvent", "BaseAudioEventInfo")
    assert model.assignable("W3DContainer", "BaseRenderAssetType")
    assert not model.assignable("GameObject", "WeaponTemplate")
    targets = model.reference_targets()
    assert {"WeaponTemplate", "BaseAudioEventInfo", "W3DHierarchy"} <= targets
    never = [t for t in model.asset_types if not set(model.chain(t)) & targets]
    assert never and len(never) < len(model.asset_types)  # some types are never referenced by design
    # cached on disk by the XSD files' hashes
    first = load_schema(entry, tmp_path)
    cached = list((tmp_path / "schema").glob("*.json.gz"))
    assert len(cached) == 1 and cached[0].name.startswith(first.digest)
    again = load_schema(entry, tmp_path)
    assert again.attr_refs == first.attr_refs and again.with_refs == first.with_refs
    # In a cold build's schema process with no schema cache at all, the model is handed over before the
    # XSDs are hashed; the cache is written under the same digest as before.
    early: list[tuple[SchemaModel, str]] = []
    monkeypatch.setattr(schema, "EARLY_MODEL", lambda m: early.append((m, m.digest)))
    fresh = tmp_path / "fresh"
    made = load_schema(entry, fresh, lambda: first.digest)
    assert early == [(made, "")] and made.digest == first.digest
    assert made.attr_refs == first.attr_refs and made.with_refs == first.with_refs
    assert [p.name for p in (fresh / "schema").glob("*.json.gz")] == [cached[0].name]
    early.clear()
    assert load_schema(entry, fresh).with_refs == first.with_refs  # a cache is there: loaded, not sent
    assert early == []
    # The digest computed right after that compile hashes the bytes the compile read (no second read of
    # the ~800 files), and is the digest of the files on disk.
    known: list[int] = []

    def digest_now() -> str:
        known.append(len(schema._READ_DIGESTS or {}))
        return schema.schema_digest(entry)

    again = load_schema(entry, tmp_path / "fresh2", digest_now)
    assert again.digest == first.digest and known[0] > 0 and schema._READ_DIGESTS is None
    assert schema.schema_digest(entry) == first.digest


@pytest.mark.parametrize("home", [True, False])
def test_the_same_directories_as_the_shared_settings_module(tmp_path, monkeypatch, home):
    from deskbridge.settings import deskbridge_dirs as shared_dirs

    if home:
        monkeypatch.setenv("DESKBRIDGE_HOME", str(tmp_path))
    else:
        monkeypatch.delenv("DESKBRIDGE_HOME", raising=False)
    mine, shared = deskbridge_dirs(), shared_dirs()
    assert (mine.cache, mine.data, mine.config) == (shared.cache, shared.data, shared.config)


def test_changed_directories_sees_added_names_and_ignores_edited_files(tmp_path):
    """What `freshness: final` relies on (SageService.usable_index): a new or renamed .xml or folder in a
    listed folder counts, an editor's swap file does not, nor a file that a lookup once tried as a folder
    and that was then edited."""
    (tmp_path / "Units").mkdir()
    (tmp_path / "Units" / "Tank.xml").write_text("<a/>")
    tree = CaseFoldTree()
    assert tree.find_file(str(tmp_path), ["units", "tank.xml"]) == str(tmp_path / "Units" / "Tank.xml")
    assert tree.find(str(tmp_path), ["Units", "Tank.xml", "deeper"]) is None  # lists Tank.xml as a "folder"
    suffixes = (".xml",)
    assert tree.changed_directories(suffixes) == []
    (tmp_path / "Units" / ".Tank.xml.swp").write_text("swap")
    (tmp_path / "Units" / "Tank.xml").write_text("<b/>")  # edited in place
    assert tree.changed_directories(suffixes) == []
    (tmp_path / "Units" / "Plane.xml").write_text("<a/>")
    assert tree.changed_directories(suffixes) == [str(tmp_path / "Units")]


def test_resolve_folder_finds_what_resolve_finds_for_a_file_but_a_folder(sage_data):
    """The folder-aware variant of the resolver takes the same aliases, search order and case folding, on
    EA's RA3 SDK; it answers only folders, and `resolve` still answers only files."""
    from deskbridge.kinds.sage.paths import Scope

    search = default_search_paths(sage_data.mod, sage_data.sdk)
    resolver = PathResolver(search, scope=Scope([sage_data.mod, sage_data.sdk]))
    mod_xml = str(sage_data.mod / "Data" / "Mod.xml")
    sdk_xml = sage_data.sdk / "SageXml"
    assert resolver.resolve("DATA:globaldata", mod_xml) is None
    assert resolver.resolve_folder("DATA:globaldata", mod_xml) == str(sdk_xml / "GlobalData")
    assert resolver.resolve_folder("DATA:GlobalData\\Armor.xml", mod_xml) is None  # a file, not a folder
    assert resolver.resolve_folder("data:nothing-here", mod_xml) is None
    assert resolver.resolve_folder("/etc", mod_xml) is None  # outside the scope: not named


def test_an_include_that_found_no_file_tells_its_folder_without_searching_again(tmp_path, monkeypatch):
    """`resolve_folder` after a `resolve` that found nothing answers from that search (every include that
    found no file is asked it, on a cold build's serial tail), and answers what a search of its own finds:
    the first search path holding a folder of that name, even behind a file that excludes itself."""
    sdk, mod = tmp_path / "sdk", tmp_path / "mod"
    touch(sdk / "Units" / "Tank" / "Tank.xml")
    touch(mod / "Data" / "Units" / "Plane" / "Plane.xml")
    touch(mod / "Data" / "Self.xml")
    touch(sdk / "Self.xml" / "inside.xml")  # a folder named like the file that includes itself
    search = SearchPaths(data=[str(mod / "Data"), str(sdk)])
    asked = [
        ("DATA:units/tank", str(mod / "Data" / "Mod.xml")),  # a folder in the second search path
        ("DATA:Units", str(mod / "Data" / "Mod.xml")),  # in both: the first one's
        ("DATA:nothing", str(mod / "Data" / "Mod.xml")),
        ("DATA:Self.xml", str(mod / "Data" / "Self.xml")),  # excludes itself; a folder further on
        ("Units/Plane", str(mod / "Data" / "Mod.xml")),  # relative to the including file
        ("Units/..", str(mod / "Data" / "Mod.xml")),  # a path that ends climbing: searched again
    ]
    fresh = PathResolver(search)
    expected = [fresh.resolve_folder(source, where) for source, where in asked]
    assert expected[:4] == [
        str(sdk / "Units" / "Tank"),
        str(mod / "Data" / "Units"),
        None,
        str(sdk / "Self.xml"),
    ]
    resolver = PathResolver(search)
    for source, where in asked:
        assert resolver.resolve(source, where) is None
    searched: list[str] = []
    real = resolver.tree.find_folder

    def find_folder(base, parts):
        searched.append("/".join(parts))
        return real(base, parts)

    monkeypatch.setattr(resolver.tree, "find_folder", find_folder)
    assert [resolver.resolve_folder(source, where) for source, where in asked] == expected
    assert searched == ["Units/.."]
    resolver.invalidate()  # answers are forgotten with the files' answers
    assert resolver.resolve_folder("DATA:nothing", str(mod / "Data" / "Mod.xml")) is None
    assert searched[1:] == ["nothing", "nothing"]


def test_an_alias_include_is_answered_once_for_every_folder_that_writes_it(tmp_path):
    """`DATA:`/`ART:` sources name the same file from any including folder (no search path is `*`), so
    the second folder asking is answered from the first one's search; a relative source, or an alias
    whose search paths hold `*`, is still searched per folder."""
    touch(tmp_path / "Data" / "Armor.xml")
    touch(tmp_path / "Data" / "Units" / "Armor.xml")
    a, b = str(tmp_path / "Data" / "Mod.xml"), str(tmp_path / "Data" / "Units" / "Tank.xml")
    resolver = PathResolver(SearchPaths(data=[str(tmp_path / "Data")]))
    assert resolver.resolve("DATA:Armor.xml", a) == resolver.resolve("DATA:Armor.xml", b)
    assert resolver.memo_hits == 1
    assert resolver.resolve("Armor.xml", a) != resolver.resolve("Armor.xml", b)
    assert resolver.memo_hits == 1
    starred = PathResolver(SearchPaths(data=["*", str(tmp_path / "Data")]))
    assert starred.resolve("DATA:Armor.xml", b) == str(tmp_path / "Data" / "Units" / "Armor.xml")
    assert starred.resolve("DATA:Armor.xml", a) == str(tmp_path / "Data" / "Armor.xml")
    assert starred.memo_hits == 0
