"""Our classic reader against the archives independent tools wrote (data/pvf/manifest.json)."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import ClassicArchive
from deskbridge.kinds.pvf.script import classic_codec

DATA = Path(__file__).resolve().parents[3] / "../shared/data/pvf"


def _classic_vectors() -> list[dict]:
    manifest = DATA / "manifest.json"
    if not manifest.is_file():
        return []
    return [a for a in json.loads(manifest.read_text("utf-8"))["archives"] if a["format_family"] == "classic"]


VECTORS = _classic_vectors()
pytestmark = pytest.mark.skipif(not VECTORS, reason=f"interop vectors not found under {DATA}")


@pytest.fixture(params=VECTORS, ids=lambda a: a["archive"])
def vector(request):
    return request.param


def test_family_header_and_encoding(vector):
    ar = open_archive(DATA / vector["archive"])
    h = vector["header"]
    assert ar.family == "classic"
    assert (ar.header.guid_text, ar.header.file_version, ar.header.file_count) == (
        h["guid"],
        h["file_version"],
        h["file_count"],
    )
    expected = {"cp950": "windows-950", "big5": "windows-950", "gb18030": "windows-936"}[
        vector["encoding"].split()[0]
    ]
    assert ar.encoding == expected
    assert ar.warnings == []


def test_every_payload_and_token_list_matches(vector):
    ar = open_archive(DATA / vector["archive"])
    assert sorted(ar.paths()) == sorted(f["path"] for f in vector["files"])
    for f in vector["files"]:
        data = ar.read(f["path"])
        assert hashlib.sha256(data).hexdigest() == f["data_sha256"], f["path"]
        if f.get("tokens"):
            recs = classic_codec.read_tokens(data)
            got = list(zip(recs["t"].tolist(), recs["v"].tolist(), strict=True))
            assert got == [(t["t"], t["v"] & 0xFFFFFFFF) for t in f["tokens"]], f["path"]
            strings = {i: t["s"] for i, t in enumerate(f["tokens"]) if "s" in t}
            for i, s in strings.items():
                assert ar.strings.table.get(got[i][1]) == s


def test_every_text_converts_back_to_identical_bytes(vector):
    ar = open_archive(DATA / vector["archive"])
    for path in ar.paths():
        text = ar.read_text(path)
        assert ar.text_to_payload(path, text) == ar.read(path), path
    assert not ar.dirty  # nothing new was interned, so stringtable.bin was not staged


def test_links_stay_links_with_their_text(vector):
    ar = open_archive(DATA / vector["archive"])
    for f in vector["files"]:
        toks = f.get("tokens") or []
        if any(t["t"] == 9 for t in toks):
            text = ar.read_text(f["path"])
            assert "<" in text and "::" in text
            break
    else:
        pytest.skip("no string link in this vector")
    if vector["archive"].startswith("pt_tw"):
        assert "<0::name_2`騎士長劍`>" in ar.read_text("equipment/character/swordman/weapon/longsword.equ")


def test_checksums_of_every_writer_are_accepted(vector):
    assert open_archive(DATA / vector["archive"]).verify_checksums() == []


def test_full_rewrite_reproduces_the_tools_bytes(vector):
    raw = (DATA / vector["archive"]).read_bytes()
    ar = ClassicArchive.open(raw)
    out = io.BytesIO()
    ar._write(out, None)  # the edit path (re-sorted tree, copied ciphertext) with nothing staged
    assert out.getvalue() == raw


def test_links_and_registries_resolve_like_the_tools():
    if not (DATA / "pt_tw_shared.pvf").is_file():
        pytest.skip("pt_tw_shared.pvf not found")
    ar = open_archive(DATA / "pt_tw_shared.pvf")
    assert ar.resolve_link(1, "name_mp") == "魔力藥水"
    assert ar.resolve_link(9, "name_mp") is None
    reg = ar.registry("equipment/equipment.lst")
    assert reg.resolve(2) == "equipment/character/swordman/weapon/longsword.equ"
    assert ar.exists(reg.resolve(301))
    from deskbridge.kinds.pvf.archive import Archive

    assert isinstance(ar, Archive)
