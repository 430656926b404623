"""Fuzz targets for the SAGE parsers of untrusted bytes: the XML record extractor, the art shallow scanner,
the compiled-manifest reader and the `.babproj` reader."""

from __future__ import annotations

import contextlib

from deskbridge.kinds.sage.babproj import parse_babproj
from deskbridge.kinds.sage.manifest import ManifestError, build_manifest, parse_manifest
from deskbridge.kinds.sage.records import extract_records, shallow_scan
from deskbridge.kinds.sage.schema import SchemaModel

# A hand-made model with every reference style, so fuzzing needs no SDK on disk.
_MODEL = SchemaModel(
    asset_types={"GameObject": "GameObject", "WeaponTemplate": "WeaponTemplate"},
    children={
        "GameObject": {"Behaviors": "Behaviors", "Filter": "Filter"},
        "Behaviors": {"Weapon": "WeaponSlotWeapon"},
        "Filter": {"IncludeThing": "=>GameObject"},
    },
    attr_refs={
        "WeaponSlotWeapon": {"Template": ("WeaponTemplate", False)},
        "GameObject": {"Upgrades": ("GameObject", True)},
    },
    content_refs={"=>GameObject": ("GameObject", False)},
    bases={"GameObject": "BaseAssetType"},
    fallback={"Weapon": "WeaponSlotWeapon", "IncludeThing": "=>GameObject"},
    with_refs={"GameObject", "Behaviors", "Filter", "WeaponSlotWeapon", "=>GameObject"},
)


def fuzz_records(data: bytes) -> None:
    """Extract records from arbitrary bytes; every reference must point inside the asset list and the text."""
    rec = extract_records(data, _MODEL)
    owners = rec.assets if rec.root == "AssetDeclaration" else rec.spliceable
    for r in rec.refs:
        assert -1 <= r[0] < len(owners)
        assert r[3] >= 0 and r[4] >= 0 and (r[5] >= r[4] or r[4] == 0)
    again = rec.from_cache(*rec.to_cache())
    assert again.refs == rec.refs and again.assets == rec.assets


def fuzz_records_without_schema(data: bytes) -> None:
    extract_records(data, None)


def fuzz_shallow(data: bytes) -> None:
    shallow_scan(data)


def fuzz_manifest(data: bytes) -> None:
    """Parse a manifest; damage must surface as `ManifestError`, and the asset count stays bounded."""
    with contextlib.suppress(ManifestError):
        m = parse_manifest(data)
        assert len(m.assets) <= len(data)


def fuzz_babproj(data: bytes) -> None:
    for stream in parse_babproj(data):
        assert stream.source


TARGETS = {
    "babproj": fuzz_babproj,
    "records": fuzz_records,
    "records_no_schema": fuzz_records_without_schema,
    "shallow": fuzz_shallow,
    "manifest": fuzz_manifest,
}

_DOC = (
    b'<?xml version="1.0"?><AssetDeclaration xmlns="uri:ea.com:eala:asset" '
    b'xmlns:xi="http://www.w3.org/2001/XInclude" xmlns:xai="uri:ea.com:eala:asset:instance">'
    b'<Includes><Include type="all" source="DATA:a.xml"/></Includes>'
    b'<Defines><Define name="X" value="1"/></Defines>'
    b'<GameObject id="A" inheritFrom="GameObject:B" Upgrades="C $D =E"><Behaviors>'
    b'<Weapon Template="W" xai:joinAction="Replace"/><xi:include href="DATA:f.xml"/></Behaviors>'
    b"<Filter><IncludeThing>A</IncludeThing></Filter></GameObject></AssetDeclaration>"
)

SEEDS = {
    "babproj": [
        b'<BinaryAssetBuilderProject xmlns="urn:xmlns:ea.com:babproject"><Stream Source="G:\\m\\data\\'
        b'mod.xml"><Configuration Name="" Default="true"><StreamReference ReferenceName="static.xml" '
        b'ReferenceManifest="G:\\s.manifest" ReferenceConfiguration=""/></Configuration></Stream>'
        b"</BinaryAssetBuilderProject>"
    ],
    "records": [
        _DOC,
        b"\xef\xbb\xbf" + _DOC,
        _DOC.decode().encode("utf-16"),
        b'<UnitPack xmlns="uri:ea.com:eala:asset"><GameObject id="A" inheritFrom="B"><Behaviors>'
        b'<Weapon Template="W"/></Behaviors></GameObject><Weapon Template="X"/></UnitPack>',
        b'<GameObject xmlns="uri:ea.com:eala:asset" id="R" inheritFrom="GameObject:P" Upgrades="U">'
        b"<Filter><IncludeThing>A</IncludeThing></Filter></GameObject>",
    ],
    "records_no_schema": [_DOC],
    "shallow": [_DOC],
    "manifest": [build_manifest([("GameObject:A", "DATA:a.xml")], v) for v in (5, 6, 7)]
    + [build_manifest([("W3DContainer:W3DContainer:X", "ART:x.w3x")], 6, big_endian=True)],
}
