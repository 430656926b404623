"""The untrusted-bytes parsers: records extractor, shallow art scan, manifest reader — examples and fuzzing."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.fuzz import sage as fuzz
from deskbridge.kinds.sage.manifest import ManifestError, build_manifest, parse_manifest
from deskbridge.kinds.sage.records import (
    begin_records,
    extract_records,
    finish_records,
    locate_refs,
    shallow_scan,
)
from deskbridge.kinds.sage.store import RecordStore

DOC = fuzz._DOC


def test_records_of_a_document():
    rec = extract_records(DOC, fuzz._MODEL)
    assert rec.root == "AssetDeclaration"
    assert rec.assets == [("GameObject", "A", 1)]
    assert rec.includes == [("all", "DATA:a.xml", 1)]
    assert rec.defines == [("X", "1", 1, False)]
    assert rec.xincludes == [("DATA:f.xml", "", 1, True)]
    assert rec.joins == [("Weapon", "Replace", 1)]
    kinds = sorted((r[1], r[2], r[6]) for r in rec.refs)
    assert kinds == [
        ("GameObject", "A", "content"),
        ("GameObject", "B", "inheritFrom"),
        ("GameObject", "C", "attribute"),
        ("WeaponTemplate", "W", "attribute"),
    ]


def test_encodings_and_bom_give_the_same_records():
    plain = extract_records(DOC, fuzz._MODEL)
    for data in fuzz.SEEDS["records"][1:3]:  # BOM, UTF-16
        other = extract_records(data, fuzz._MODEL)
        assert other.assets == plain.assets and [r[:3] for r in other.refs] == [r[:3] for r in plain.refs]


def test_broken_xml_becomes_diagnostics_not_exceptions():
    rec = extract_records(
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><GameObject id="A"><Behaviors></GameObject>',
        fuzz._MODEL,
    )
    assert rec.assets == [("GameObject", "A", 1)]
    assert [d[0] for d in rec.diagnostics][:1] == ["parse-error"]
    assert extract_records(b"", None).diagnostics[0][0] == "parse-error"
    assert extract_records(b"\x00\xff garbage", None).diagnostics


def test_assets_without_id_and_includes_outside_includes_are_reported():
    rec = extract_records(
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><GameObject/>'
        b'<Include type="all" source="x.xml"/><GameObject id="a"/><GameObject id="A"/>'
        b'<WeaponTemplate id="a" xmlns:xai="uri:ea.com:eala:asset:instance" '
        b'xai:joinAction="Merge"/></AssetDeclaration>',
        None,
    )
    assert [d[0] for d in rec.diagnostics] == [
        "missing-id",
        "include-outside-includes",
        "duplicate-instance",
        "invalid-join-action",
    ]


def test_fragment_files_are_typed_by_their_root_element():
    rec = extract_records(
        b'<Behaviors xmlns="uri:ea.com:eala:asset"><Weapon Template="W"/></Behaviors>', fuzz._MODEL
    )
    assert rec.root == "Behaviors" and rec.assets == []
    assert [(r[0], r[1], r[2]) for r in rec.refs] == [(-1, "WeaponTemplate", "W")]


def test_shallow_scan_reads_only_top_level_assets():
    art = (
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><Includes><Include type="instance" '
        b'source="ART:tex.xml"/></Includes><W3DMesh id="M1"><Vertices><V id="no"/></Vertices></W3DMesh>'
        b'\n<W3DContainer id="C1"/></AssetDeclaration>'
    )
    rec = shallow_scan(art)
    assert rec.shallow and rec.assets == [("W3DMesh", "M1", 1), ("W3DContainer", "C1", 2)]
    assert rec.includes == [("instance", "ART:tex.xml", 1)]


@pytest.mark.parametrize("version", [5, 6, 7])
@pytest.mark.parametrize("big", [False, True])
def test_manifest_versions(version, big):
    data = build_manifest(
        [
            ("GameObject:Tank", "DATA:units.xml"),
            ("W3DContainer:W3DContainer:AUTANK_SKN", "ART:AUTank_SKN.w3x"),
        ],
        version,
        big,
    )
    m = parse_manifest(data)
    assert m.version == version and m.big_endian == big
    assert [(a.type, a.id, a.source) for a in m.assets] == [
        ("GameObject", "Tank", "DATA:units.xml"),
        ("W3DContainer", "AUTANK_SKN", "ART:AUTank_SKN.w3x"),
    ]


def test_damaged_manifests_raise_manifest_error():
    good = build_manifest([("GameObject:Tank", "x")], 6)
    with pytest.raises(ManifestError):
        parse_manifest(good[:-3])
    with pytest.raises(ManifestError, match="version"):
        parse_manifest(struct.pack("<IH", 0, 9) + bytes(60))
    huge = bytearray(good)
    struct.pack_into("<I", huge, 4 + 8, 0xFFFFFFFF)  # asset count
    with pytest.raises(ManifestError):
        parse_manifest(bytes(huge))


SLOW_OK = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW_OK
@given(st.binary(max_size=2048))
def test_fuzz_every_target_on_random_bytes(data):
    for target in fuzz.TARGETS.values():
        target(data)


@SLOW_OK
@given(
    st.sampled_from(fuzz.SEEDS["records"] + fuzz.SEEDS["manifest"]),
    st.integers(0, 4000),
    st.binary(min_size=1, max_size=8),
)
def test_fuzz_mutated_seeds(seed, pos, patch):
    pos = pos % len(seed)
    data = seed[:pos] + patch + seed[pos + len(patch) :]
    for target in fuzz.TARGETS.values():
        target(data)
    fuzz.fuzz_records(seed[:pos])  # every truncation too


# Multi-line start tags, spaces around `=`, a list attribute, element content and a fragment: every shape the
# locator handles.
_LOCATED_DOCS = [
    *fuzz.SEEDS["records"],
    b'<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n<GameObject id="A"\n  inheritFrom = "B"\n'
    b'  Upgrades="U1  GameObject:U2 $X U3">\n<Behaviors>\n<Weapon\n Template = "W"/>\n</Behaviors>\n'
    b"<Filter><IncludeThing>\n  T1\n</IncludeThing><IncludeThing>T2</IncludeThing></Filter>\n"
    b'</GameObject>\n<GameObject id="Z" Upgrades="A"/></AssetDeclaration>',
    "<AssetDeclaration xmlns='uri:ea.com:eala:asset'><GameObject id='\u00e9' Upgrades='\u00e9 B'/>"
    "</AssetDeclaration>".encode("utf-16"),
]


def _lazy(data: bytes):
    return finish_records(begin_records(data), fuzz._MODEL, locate=False)


@pytest.mark.parametrize("data", _LOCATED_DOCS)
def test_unlocated_rows_locate_to_the_rows_extraction_gives(data):
    """A cold build's workers leave reference rows unlocated; located from the same bytes they are the rows
    `extract_records` gives, in the same order, and nothing else of the records differs."""
    eager, lazy = extract_records(data, fuzz._MODEL), _lazy(data)
    assert lazy.located is (not eager.refs)
    assert locate_refs(lazy.raw_refs, data) == eager.refs
    assert [lazy.assets, lazy.includes, lazy.defines, lazy.xincludes, lazy.joins, lazy.diagnostics] == [
        eager.assets,
        eager.includes,
        eager.defines,
        eager.xincludes,
        eager.joins,
        eager.diagnostics,
    ]
    again = lazy.from_cache(*lazy.to_cache())  # the records cache keeps them unlocated
    assert again.located is lazy.located and locate_refs(again.raw_refs, data) == eager.refs


@SLOW_OK
@given(st.sampled_from(_LOCATED_DOCS), st.integers(0, 4000), st.binary(min_size=1, max_size=8))
def test_unlocated_rows_of_mutated_documents_locate_the_same(seed, pos, patch):
    pos = pos % len(seed)
    data = seed[:pos] + patch + seed[pos + len(patch) :]
    assert locate_refs(_lazy(data).raw_refs, data) == extract_records(data, fuzz._MODEL).refs


def test_unlocated_rows_are_located_from_the_file_only_while_it_is_unchanged(tmp_path):
    """The store reads a record's text back on first use of its rows: the bytes parsed (same stat and
    SHA-1) give the located rows and make the cache worth saving again; a file changed since gives libxml2's
    lines with columns 0 (the index is stale then, and the change re-indexes the file)."""
    from deskbridge.kinds.sage._sha1 import sha1

    data = _LOCATED_DOCS[-2]
    eager = extract_records(data, fuzz._MODEL)
    store = RecordStore(lambda: fuzz._MODEL, tmp_path / "cache.marshal")

    def parsed(name: str):
        path = tmp_path / name
        path.write_bytes(data)
        st_ = path.stat()
        head, blob = _lazy(data).to_cache()
        return path, store.put_parsed(
            str(path), st_.st_size, st_.st_mtime_ns, st_.st_ctime_ns, sha1(data).hexdigest(), head, blob
        )

    _same, rec = parsed("same.xml")
    store.dirty = False
    assert not rec.located and rec.ref_count == len(eager.refs)
    assert rec.refs == eager.refs and rec.located
    assert store.dirty  # located rows are saved with the cache
    changed, rec = parsed("changed.xml")
    changed.write_bytes(data.replace(b"Template", b"Templat_"))
    rows = rec.refs
    assert [r[:3] + r[6:] for r in rows] == [r[:3] + r[6:] for r in eager.refs]
    assert all(r[4] == 0 and r[5] == 0 for r in rows)


def test_multiline_start_tags_open_on_the_same_line_in_utf8_and_utf16():
    """Asset, include and define lines are where each start tag opens, whatever the encoding: the locator
    searches the bytes (UTF-8) or the decoded text (UTF-16) — non-ASCII text, a lookalike `<GameObjectX`
    and a name inside a comment on an earlier line must not move them."""
    text = (
        '<?xml version="1.0"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n'
        "  <Includes>\n"
        '    <Include\n      type="all"\n      source="DATA:ä.xml" />\n'
        "  </Includes>\n"
        '  <Defines><Define name="X"\n    value="1"/></Defines>\n'
        '  <!-- <GameObject id="Old"> -->\n'
        '  <GameObjectX id="Y"/>\n'
        '  <GameObject\n    id="A" Name="Ünïcode"\n\n    Side="x">\n  </GameObject>\n'
        "</AssetDeclaration>\n"
    )
    for data in (text.encode(), "\ufeff".encode() + text.encode(), text.encode("utf-16")):
        rec = extract_records(data, fuzz._MODEL)
        assert rec.includes == [("all", "DATA:ä.xml", 4)]
        assert rec.defines == [("X", "1", 8, False)]
        assert rec.assets == [("GameObjectX", "Y", 11), ("GameObject", "A", 12)]


@pytest.mark.parametrize(
    "filler",
    [
        '  <GameObject id="F{0}" Side="x"/>\n',  # 2.5 MB: its newlines are counted before the parse
        '<GameObject id="F{0}"/>\n',  # 1.8 MB: parsed without blank nodes, then again with them
    ],
)
def test_lines_beyond_65535_are_the_real_lines(filler):
    """libxml2 keeps an element's line in 16 bits and, past 65,535, finds it in the text node next to it:
    the parser must keep whitespace-only text (KW's FXParticleSystem.xml has assets past line 80,000),
    in a text large enough for its newlines to be counted first and in one below
    `BLANKS_COUNTED_FROM_BYTES`, whose parse without them reaches that line."""
    from deskbridge.kinds.sage import records

    head = '<?xml version="1.0"?>\n<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n'
    body = "".join(filler.format(i) for i in range(70_000))
    tail = '  <GameObject id="Far"\n    inheritFrom="F1" Upgrades="F2">\n  </GameObject>\n'
    data = (head + body + tail + "</AssetDeclaration>\n").encode()
    assert (len(data) >= records.BLANKS_COUNTED_FROM_BYTES) == filler.startswith(" ")
    far_line = 2 + 70_000 + 1
    located = extract_records(data, fuzz._MODEL)
    unlocated = finish_records(begin_records(data), fuzz._MODEL, locate=False)
    for rec in (located, unlocated):
        assert rec.assets[-1] == ("GameObject", "Far", far_line)
        assert len({line for _t, _i, line in rec.assets[66_000:-2]}) == len(rec.assets[66_000:-2])
    rows = [r for r in located.refs if r[0] == len(located.assets) - 1]
    assert rows == [r for r in locate_refs(unlocated.raw_refs, data) if r[0] == len(unlocated.assets) - 1]
    assert {(r[2], r[3]) for r in rows} == {("F1", far_line + 1), ("F2", far_line + 1)}


_PIECES = st.sampled_from(
    ["<A", "<A ", "<A>", "<A/>", "<AB", "<B", "\n", "\r\n", "\t", " ", "x", "<!-- <A -->", "ä", "<A\n"]
)


@given(
    st.lists(_PIECES, max_size=400).map("".join),
    st.lists(st.tuples(st.integers(-2, 520), st.sampled_from(["A", "B", "AB"])), max_size=40),
    st.booleans(),
)
def test_start_line_cursor_answers_as_the_search_up_from_the_line(text, questions, in_order):
    """`_Locator.start_line` goes forward through each name's openers with a cursor when asked in document
    order, and searches the lines up from `line` (at most 200) otherwise: both answer as that search does,
    for any text, question order, and a text whose lines run past 200 between openers."""
    from deskbridge.kinds.sage.records import _ENDS, _Locator, _opener_line

    data = text.encode() + b"\n" * (len(questions) * 7) + text.encode()
    if in_order:
        questions = sorted(questions)
    locator = _Locator(data)
    lines = data.split(b"\n")
    for line, name in questions:
        assert locator.start_line(line, name) == _opener_line(lines, line, b"<" + name.encode(), _ENDS)


_LONG_PIECES = st.sampled_from(
    ["<A", "<A ", "<A/>", "<AB", "<B>", "\n", "<!-- <A -->", "x" * 300, "\u00e4" * 700, "<A\n", "<p:A "]
)


@given(
    st.lists(_LONG_PIECES, max_size=200).map("".join),
    st.lists(st.tuples(st.integers(-2, 320), st.sampled_from(["A", "B", "AB"])), max_size=40),
    st.booleans(),
)
def test_opener_line_answers_as_the_search_up_from_the_line(text, questions, in_order):
    """`_Locator.opener_line` (one cursor for every name, windows that grow past 1 KB) answers as the
    search up from `line` does — in document order, which `begin_records` asks in, and in any other order
    (where it falls back to `start_line`), also when an opener is in a comment, prefixed, or cut by a
    window's edge."""
    from deskbridge.kinds.sage.records import _ENDS, _Locator, _opener_line

    data = text.encode() + b"\n" * (len(questions) * 7) + text.encode()
    if in_order:
        questions = sorted(questions)
    locator = _Locator(data)
    lines = data.split(b"\n")
    for line, name in questions:
        assert locator.opener_line(line, name) == _opener_line(lines, line, b"<" + name.encode(), _ENDS)


def test_join_actions_are_every_element_carrying_one_in_document_order():
    """`rec.joins` (found through the attribute, `//@xai:joinAction/..`) lists every element with an
    `xai:joinAction`, at any depth, once, in document order — what walking every element finds."""
    from lxml import etree

    text = (
        '<?xml version="1.0"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset" xmlns:xai="uri:ea.com:eala:asset:instance">\n'
        '  <GameObject id="A" xai:joinAction="Replace">\n'
        '    <Behaviors><Physics id="P" xai:joinAction="Remove"/>\n'
        '      <Body xai:joinAction="replace"><Armor xai:joinAction="Bogus" joinAction="x"/></Body>\n'
        "    </Behaviors>\n"
        "  </GameObject>\n"
        '  <GameObject id="B" joinAction="Replace"><Draws xai:joinAction="Append"/></GameObject>\n'
        "</AssetDeclaration>\n"
    )
    data = text.encode()
    rec = extract_records(data, fuzz._MODEL)
    xai = "{uri:ea.com:eala:asset:instance}joinAction"
    every = [
        (etree.QName(el).localname, el.get(xai), el.sourceline)
        for el in etree.fromstring(data).iter()
        if el.get(xai) is not None
    ]
    assert rec.joins == every
    assert [j[1] for j in rec.joins] == ["Replace", "Remove", "replace", "Bogus", "Append"]
    assert [d[0] for d in rec.diagnostics] == ["invalid-join-action"]


def test_xincludes_are_found_in_utf8_and_utf16_and_only_where_the_namespace_is_declared():
    """The `xi:include` walk is skipped when the bytes never name the XInclude namespace (UTF-16 text, where
    they would not show, is always walked): both encodings give the same includes, and an element that
    only looks like one (no namespace declared) is none."""
    text = (
        '<?xml version="1.0"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset" xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        '  <xi:include href="DATA:Root.xml" xpointer="xpointer(/n:Frag/child::*)"/>\n'
        '  <GameObject id="A"><Behaviors>\n'
        '    <xi:include\n      href="DATA:Includes/Die.xml"/>\n'
        "  </Behaviors></GameObject>\n"
        "</AssetDeclaration>\n"
    )
    want = [
        ("DATA:Root.xml", "xpointer(/n:Frag/child::*)", 3, False),
        ("DATA:Includes/Die.xml", "", 5, True),
    ]
    for data in (text.encode(), text.encode("utf-16")):
        assert extract_records(data, fuzz._MODEL).xincludes == want
    bare = text.replace(' xmlns:xi="http://www.w3.org/2001/XInclude"', "").replace("xi:include", "include")
    assert extract_records(bare.encode(), fuzz._MODEL).xincludes == []


def _both_ways(data: bytes, monkeypatch: Any) -> tuple[Any, Any]:
    """The records of `data` parsed with its blank text nodes and without them."""
    from deskbridge.kinds.sage import records

    out = []
    for below in (0, 10**9):  # 0: every text keeps its blank nodes; 10**9: every text drops them
        monkeypatch.setattr(records, "BLANKS_DROPPED_BELOW_LINES", below)
        rec = extract_records(data, fuzz._MODEL)
        out.append([rec.to_cache()[0][2:], rec.assets, rec.refs, rec.spliceable])
    return out[0], out[1]


@SLOW_OK
@given(st.sampled_from(_LOCATED_DOCS), st.integers(0, 4000), st.binary(min_size=1, max_size=8))
def test_records_are_the_same_with_or_without_blank_text_nodes(seed, pos, patch):
    """Short texts are parsed without their blank text nodes (`BLANKS_DROPPED_BELOW_LINES`): whatever the
    bytes (mutated, malformed), the records — assets, lines, references, diagnostics — are the same."""
    pos = pos % len(seed)
    data = seed[:pos] + patch + seed[pos + len(patch) :]
    with pytest.MonkeyPatch.context() as mp:
        kept, dropped = _both_ways(data, mp)
    assert kept == dropped


def test_real_files_give_the_same_records_with_or_without_blank_text_nodes(sage_data, monkeypatch):
    """Every XML file of RA3Afterdash and of EA's RA3 SageXml, typed by the real schemas: the same records
    parsed with and without blank text nodes (issue 12, SAGE-COLD: the cold build drops them)."""
    from deskbridge.kinds.sage.project import schema_entry
    from deskbridge.kinds.sage.schema import compile_schema

    model = compile_schema(schema_entry(sage_data.sdk))
    from deskbridge.kinds.sage import records

    paths = sorted(
        p
        for root in (sage_data.mod, sage_data.sdk / "SageXml")
        for p in root.rglob("*")
        if p.suffix.lower() == ".xml"
    )
    assert len(paths) > 1000
    for path in paths:
        data = path.read_bytes()
        got = []
        for below in (0, 10**9):
            monkeypatch.setattr(records, "BLANKS_DROPPED_BELOW_LINES", below)
            rec = extract_records(data, model)
            got.append([rec.to_cache()[0][2:], rec.assets, rec.refs, rec.spliceable])
        assert got[0] == got[1], path


def test_a_declaration_saying_utf_16_over_8_bit_text_says_so():
    """QA: a file re-saved as UTF-8 by a Windows editor that kept `encoding="utf-16"` in its declaration
    (no byte-order mark) gave only libxml2's 'Blank needed here'. It now says what is wrong and what to do
    (.NET's XmlReader, which BAB uses, refuses such a file too: no byte order mark to switch to Unicode)."""
    text = '<?xml version="1.0" encoding="utf-16"?>\n<AssetDeclaration xmlns="uri:ea.com:eala:asset"/>\n'
    rec = extract_records(text.encode(), None)
    messages = [d[3] for d in rec.diagnostics if d[0] == "parse-error"]
    assert 'encoding="utf-16"' in messages[0] and "byte-order mark" in messages[0] and "utf-8" in messages[0]
    good = extract_records(text.encode("utf-16"), None)  # the same text really in UTF-16: no such message
    assert not any("byte-order mark" in d[3] for d in good.diagnostics)


def test_windows_1252_bytes_in_a_utf_8_file_say_what_to_do():
    """QA: a file declared UTF-8 (or with no declaration) but edited in an editor's ANSI mode holds a
    windows-1252 `ä`: libxml2 says only 'Invalid bytes in character encoding'. BAB's .NET reader stops at
    such a byte, so the modder must learn what it is and what to change."""
    text = '<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n<!-- Pänzer -->\n<GameObject id="A"/>\n</AssetDeclaration>'
    rec = extract_records(text.encode("cp1252"), None)
    [err] = [d for d in rec.diagnostics if d[0] == "parse-error"]
    assert err[2] == 2 and "not UTF-8" in err[3] and 'encoding="windows-1252"' in err[3]
    assert [a[1] for a in rec.assets] == ["A"]  # what follows is still indexed


def test_each_model_types_the_references_with_its_own_tables():
    """The typed walk keeps per-type tables made from the model it walks with (`records._plans`); the same
    document extracted with one model, another where the same element means something else, and the first
    again gives each model's own references."""
    from deskbridge.kinds.sage.schema import SchemaModel

    doc = (
        b'<AssetDeclaration xmlns="uri:ea.com:eala:asset">'
        b'<Unit id="U" Weapon="W1"><Turret Weapon="W2"><!-- c --><Barrel Weapon="W3"/></Turret></Unit>'
        b"</AssetDeclaration>"
    )

    def model(barrel: bool) -> SchemaModel:
        children = {"UnitType": {"Turret": "TurretType"}, "TurretType": {"Barrel": "BarrelType"}}
        refs = {"UnitType": {"Weapon": ("WeaponTemplate", False)}}
        refs["BarrelType" if barrel else "TurretType"] = {"Weapon": ("WeaponTemplate", False)}
        return SchemaModel(
            asset_types={"Unit": "UnitType"},
            children=children,
            attr_refs=refs,
            with_refs={"UnitType", "TurretType", "BarrelType"},
        )

    def targets(m: SchemaModel) -> list[tuple[str, str, str]]:
        return sorted((r[2], r[7], r[8]) for r in extract_records(doc, m).refs)

    turret, barrel = model(False), model(True)
    assert targets(turret) == [("W1", "Unit", ""), ("W2", "Turret", "Unit")]
    assert targets(barrel) == [("W1", "Unit", ""), ("W3", "Barrel", "Turret")]
    assert targets(turret) == [("W1", "Unit", ""), ("W2", "Turret", "Unit")]
