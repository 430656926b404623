"""stringtable.bin, .str files, .lst registries, pack encodings and their detection."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.lists import Registry, build_classic_list, parse_classic_list
from deskbridge.kinds.pvf.strings.encodings import (
    detect_encoding,
    encode_korean_mojibake,
    fix_korean_mojibake,
    resolve_encoding,
)
from deskbridge.kinds.pvf.strings.strfile import StrFile
from deskbridge.kinds.pvf.strings.stringtable import StringTable, build_stringtable


def test_stringtable_layout_matches_pvf_parser_ts():
    data = build_stringtable([b"[name]", b"", "裝備".encode("cp950")])
    count, *offs = struct.unpack_from("<I4I", data)
    assert count == 3 and offs == [16, 22, 22, 26]  # relative to byte 4, first = 4*count+4
    table = StringTable.parse(data, "cp950")
    assert [table.get(i) for i in range(3)] == ["[name]", "", "裝備"]
    assert table.to_bytes() == data


def test_intern_appends_once_and_lookup_is_first_occurrence():
    table = StringTable.parse(build_stringtable([b"a", b"b", b"a"]), "cp950")
    assert table.index_of("a") == 0 and not table.is_canonical(2)
    assert table.intern("b") == 1 and table.appended == 0
    assert table.intern("新") == 3 and table.intern("新") == 3 and table.appended == 1
    again = StringTable.parse(table.to_bytes(), "cp950")
    assert again.get(3) == "新"


@pytest.mark.parametrize(
    "bad", [b"\x01", b"\x05\0\0\0\0\0\0\0", struct.pack("<3I", 1, 8, 4), struct.pack("<3I", 1, 8, 99)]
)
def test_bad_stringtables_are_pvf_corrupt(bad):
    with pytest.raises(BridgeError) as err:
        StringTable.parse(bad, "cp950")
    assert err.value.code == "PVF_CORRUPT" and "offset" in err.value.data


@given(st.binary(max_size=200))
def test_stringtable_parser_only_raises_typed_errors(data):
    try:
        StringTable.parse(data, "cp950")
    except BridgeError as exc:
        assert exc.code == "PVF_CORRUPT"


def test_str_file_keeps_padding_and_line_endings_when_editing():
    f = StrFile.from_text("// c\r\nname_1>劍\r\n\0\0\0")
    assert f.entries() == {"name_1": "劍"}
    f.set("name_2", "盾")
    f.set("name_1", "長劍")
    assert f.to_text() == "// c\r\nname_1>長劍\r\nname_2>盾\r\n\0\0\0"
    with pytest.raises(BridgeError):
        f.set("bad>key", "x")


def test_korean_mojibake_round_trip():
    painted = encode_korean_mojibake("한국어 아이템")
    assert painted != "한국어 아이템"
    assert fix_korean_mojibake(painted) == "한국어 아이템"
    assert fix_korean_mojibake("plain text") is None


@pytest.mark.parametrize(
    ("words", "codec"),
    [
        (["騎士團的制式長劍，堅固耐用。", "生命藥水", "哥布林", "恢復少量HP。"], "windows-950"),
        (["骑士团的制式长剑，坚固耐用。", "生命药水", "哥布林", "恢复少量HP。"], "windows-936"),
        (["한국어 아이템", "기사의 장검", "체력 물약이다", "이것은 고블린"], "cp949"),
        (["騎士の長剣です", "ポーション", "ゴブリン"], "cp932"),
    ],
)
def test_detection_picks_the_pack_encoding(words, codec):
    assert detect_encoding([w.encode(codec) for w in words]).encoding == codec


def test_encoding_names():
    assert [resolve_encoding(n) for n in ("TW", "cn", "kr", "JP", "utf8", "big5")] == [
        "windows-950",
        "windows-936",
        "cp949",
        "cp932",
        "utf-8",
        "windows-950",
    ]
    with pytest.raises(BridgeError):
        resolve_encoding("latin9")


def test_classic_lists_are_directory_relative():
    table = StringTable([], "cp950")
    reg = Registry("equipment/equipment.lst", [(1, "character/a.equ"), (2, "character/b.equ")])
    data = build_classic_list(reg, table)
    again = parse_classic_list("equipment/equipment.lst", data, table)
    assert again.entries == reg.entries
    assert again.resolve(2) == "equipment/character/b.equ"
    assert again.find_id("EQUIPMENT/character/A.equ") == 1
    with pytest.raises(BridgeError) as err:
        parse_classic_list("x.lst", data[:-5], table)
    assert err.value.code == "PVF_CORRUPT"


def test_cp950_duplicate_code_points_are_not_silently_rewritten():
    data = (
        "// box ".encode("cp950") + b"\xf9\xf9" + b"\r\nk>v\r\n"
    )  # F9F9 decodes to U+2550, which encodes as A2A4
    with pytest.raises(BridgeError) as err:
        StrFile.decode(data, "cp950")
    assert err.value.code == "ENCODING_MISMATCH"
    from deskbridge.kinds.pvf.archive.classic_text import decode_text

    assert decode_text(data, "cp950") is None  # so extract keeps such a file as raw bytes


def test_strings_appended_to_a_fresh_table_read_back_at_their_index():
    table = StringTable([], "windows-950")
    for s in ("a", "b", "c"):
        table.append(s)
    assert [table.get(i) for i in range(3)] == ["a", "b", "c"] and table.is_canonical(2)
