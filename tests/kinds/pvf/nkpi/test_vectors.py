"""Interop: our reader reproduces every payload, token and string of the pvfVSCode nkpi vectors."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
from deskbridge.kinds.pvf.archive.nkpi_cipher import MAGIC_DATA, crypt
from deskbridge.kinds.pvf.archive.nkpi_tables import build_hash_table, parse_hash_table
from deskbridge.kinds.pvf.script import nkpi_codec as codec

EXPECTED_VARIANT = {"vs_jp_shared.pvf": "legacy", "vs_cn_shared.pvf": "protected"}


def test_vectors_open_with_their_variant(nkpi_vectors):
    for path, meta in nkpi_vectors:
        with open_nkpi(path) as ar:
            assert ar.variant == EXPECTED_VARIANT[path.name]
            assert ar.header.file_count == meta["header"]["file_count"]
            assert ar.paths() == [f["path"] for f in meta["files"]]  # file-table order kept


def test_every_payload_token_and_string_matches(nkpi_vectors):
    for path, meta in nkpi_vectors:
        with open_nkpi(path) as ar:
            for f in meta["files"]:
                data = ar.read(f["path"])
                assert hashlib.sha256(data).hexdigest() == f["data_sha256"], f["path"]
                info = ar.file_info(f["path"])
                assert (info.extra["chunk"], info.extra["data_offset"], info.extra["data_type"]) == (
                    f["chunk_index"],
                    f["data_offset"],
                    f["data_type"],
                )
                if f["data_type"] != 1:
                    continue
                for (t, v), tok in zip(codec.records(data).tolist(), f["tokens"], strict=True):
                    assert (t, v) == (tok["t"], tok["v"])
                    if "s" in tok:
                        assert ar.string(v) == tok["s"]


def test_decompile_compile_is_byte_identical_and_source_text_compiles(nkpi_vectors):
    for path, meta in nkpi_vectors:
        with open_nkpi(path) as ar:
            for f in meta["files"]:
                data = ar.read(f["path"])
                text = ar.read_text(f["path"])
                assert ar.text_to_payload(f["path"], text) == data, f["path"]
                if f["data_type"] == 1:
                    # the text the other tool was fed compiles to the same bytes with our compiler
                    assert ar.text_to_payload(f["path"], f["source_text"]) == data, f["path"]
            assert not ar.pools.dirty  # nothing new was needed


def test_hash_table_rebuild_matches_the_writer(nkpi_vectors):
    for path, meta in nkpi_vectors:
        with open_nkpi(path) as ar:
            ours = build_hash_table(ar.files, ar.pools)
            h = ar.header
            stored = crypt(ar._src.read(h.hash_table_offset, h.hash_table_size), ar.scheme.hash, MAGIC_DATA)
            assert ours == stored
            _pairs, ordered = parse_hash_table(ours, 0)
            assert ordered.tolist() == meta["hash_table"]["sorted_offsets"]


def test_extract_pack_extract_keeps_every_payload(nkpi_vectors, tmp_path: Path):
    for path, meta in nkpi_vectors:
        copy = tmp_path / path.name
        shutil.copy(path, copy)
        with open_nkpi(copy) as ar:
            texts = {p: ar.read_text(p) for p in ar.paths()}
            for p, text in texts.items():
                ar.stage_text(p, text)
            assert not ar.dirty  # every compile reproduced the original bytes
            ar.stage(
                "equipment/new_item.equ", ar.text_to_payload("equipment/new_item.equ", "[name]\n`New`\n")
            )
            report = ar.save()
            assert report.verified == 1
        with open_nkpi(copy) as again:
            for f in meta["files"]:
                assert hashlib.sha256(again.read(f["path"])).hexdigest() == f["data_sha256"]
            assert again.read_text("equipment/new_item.equ") == "[name]\n\t`New`\n"


@pytest.mark.parametrize("name", ["vs_jp_shared.pvf", "vs_cn_shared.pvf"])
def test_noop_save_is_byte_identical(nkpi_vectors, tmp_path: Path, name: str):
    path = next(p for p, _ in nkpi_vectors if p.name == name)
    with open_nkpi(path) as ar:
        report = ar.save_copy(tmp_path / "copy.pvf")
    assert report.byte_identical
    assert (tmp_path / "copy.pvf").read_bytes() == path.read_bytes()
