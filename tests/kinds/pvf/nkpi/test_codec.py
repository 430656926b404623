"""The nkpi script codec and UTF-16 text files: every form of token prints and compiles back exactly."""

from __future__ import annotations

import struct

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.nkpi_cipher import LEGACY
from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools
from deskbridge.kinds.pvf.script import nkpi_codec as codec


@pytest.fixture()
def pools() -> StringPools:
    a = b"\0[name]\0[/name]\0word\0two words\0a`b\0[name]\0"
    w = "\0巨剑\0".encode("utf-16-le")
    return StringPools(
        bytes(8), a, w, PoolKeys(LEGACY.pool_a, LEGACY.pool_w, LEGACY.mask_a, LEGACY.mask_w), "utf-8"
    )


def _f32(x: float) -> int:
    return struct.unpack("<i", struct.pack("<f", x))[0]


def test_each_token_type_has_its_text_form(pools):
    off = {s: pools.find(s) for s in ("[name]", "word", "two words", "a`b", "巨剑")}
    payload = codec.pack_records(
        [
            (3, off["[name]"]),
            (6, off["巨剑"]),
            (0, -7),
            (2, _f32(8000.0)),
            (2, _f32(0.1)),
            (3, off["word"]),
            (3, off["two words"]),
            (5, off["a`b"]),
            (7, off["word"]),
            (8, off["word"]),
            (10, off["word"]),
            (9, 12345),
        ]
    )
    text = codec.decompile(payload, pools)
    assert text == (
        "[name]\n\t`巨剑`\t-7\t8000.0\t0.1\tword\n\t{3=`two words`}\n\t{5=`a``b`}\n\t{7=`word`}\n"
        "\t{8=`word`}\n\t{10=`word`}\t{9=12345}\n"
    )
    assert codec.compile_text(text, pools) == payload


def test_nan_and_infinity_floats_keep_their_bits(pools):
    payload = codec.pack_records([(2, 0x7FC00001), (2, _f32(float("inf"))), (2, _f32(-0.0))])
    text = codec.decompile(payload, pools)
    assert "{2=2143289345}" in text and "-0.0" in text
    assert codec.compile_text(text, pools) == payload


def test_a_duplicate_string_offset_prints_raw_and_recompiles_exactly(pools):
    first, second = 2, pools.raw_a().rfind(b"[name]") * 2  # "[name]" is stored twice
    payload = codec.pack_records([(3, first), (3, second)])
    text = codec.decompile(payload, pools)
    assert text.endswith(f"{{3={second}}}\n")
    assert codec.compile_text(text, pools, original=payload) == payload


def test_invalid_offsets_and_unknown_types_survive(pools):
    payload = codec.pack_records([(6, 999999), (1, 5), (255, -1)])
    assert codec.compile_text(codec.decompile(payload, pools), pools) == payload


def test_new_strings_are_added_and_links_refused(pools):
    payload = codec.compile_text("[new]\n`新しい`\n", pools)
    recs = codec.records(payload).tolist()
    assert pools.resolve(recs[0][1]) == "[new]" and recs[1][1] % 2 == 1
    with pytest.raises(BridgeError) as err:
        codec.compile_text("<3::key`text`>", pools)
    assert err.value.code is ErrorCode.SCRIPT_SYNTAX


def test_utf16_text_keeps_crlf_and_nul_padding():
    payload = "a>b\r\nc>巨剑\r\n\0\0\0".encode("utf-16-le")
    text, mojibake = codec.decode_utf16_text(payload)
    assert text == "a>b\r\nc>巨剑\r\n\0\0\0" and not mojibake
    assert codec.encode_utf16_text(text) == payload


def test_korean_mojibake_shows_as_korean_and_is_painted_back():
    korean = "name_1>한국어 아이템\r\nname_2>검\r\n"
    painted = korean.encode("cp949").decode("cp437")
    payload = painted.encode("utf-16-le")
    text, mojibake = codec.decode_utf16_text(payload)
    assert mojibake and text == korean
    assert codec.encode_utf16_text(text, mojibake=True) == payload
    edited = text.replace("검", "방패")
    assert codec.decode_utf16_text(codec.encode_utf16_text(edited, mojibake=True)) == (edited, True)
