"""The untrusted-bytes parsers: records extractor, shallow art scan, manifest reader — examples and fuzzing."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.fuzz import sage as fuzz
from deskbridge.kinds.sage.manifest import ManifestError, build_manifest, parse_manifest
from deskbridge.kinds.sage.records import extract_records, shallow_scan

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
