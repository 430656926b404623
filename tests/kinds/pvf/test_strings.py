"""stringtable.bin, .str files, .lst registries, pack encodings and their detection."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
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


GB18030_ONLY = ["𠮷祥之剑", "㛃的护身符", "䲜鱼药水", "㐀字卷轴"]
"""Simplified game text with characters GBK lacks: GB18030 writes each as a 4-byte sequence (𠮷 = 95 34 B2 35)."""


def test_detection_picks_gb18030_when_the_bytes_need_its_4_byte_sequences():
    words = ["骑士团的制式长剑，坚固耐用。", "生命药水", "哥布林", "恢复少量HP。"]
    raw = [w.encode("gb18030") for w in words + GB18030_ONLY]
    detection = detect_encoding(raw)
    assert detection.encoding == "gb18030" and detection.confident
    assert [r.decode(detection.encoding) for r in raw] == words + GB18030_ONLY
    # the same text with one such string in a thousand still needs gb18030: windows-936 cannot read it
    many = [w.encode("gb18030") for w in words * 250] + [GB18030_ONLY[0].encode("gb18030")]
    assert detect_encoding(many).encoding == "gb18030"


def test_text_gbk_holds_stays_windows_936():
    """GB18030 reads every GBK byte pair alike, so text without 4-byte sequences is windows-936 (which also has
    0x80 = €, which GB18030 does not)."""
    words = ["骑士团的制式长剑，坚固耐用。", "生命药水", "哥布林", "价格：100€"]
    detection = detect_encoding([w.encode("windows-936") for w in words])
    assert detection.encoding == "windows-936"


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


# ---------------------------------------------------------------------------------- canonical by bytes

_PIECES = {
    # a few characters of each code page, with both forms of the characters cp950 / Big5 map twice
    "windows-950": [
        b"\xa2\xcc",
        b"\xa4\x51",
        b"\xa4\xca",
        b"\xa2\xce",
        b"\xf9\xf9",
        b"\xa2\xa4",
        b"\xa4\x40",
    ],
    "big5": [b"\xa1\xfe", b"\xa2\x41", b"\xa2\x40", b"\xa2\x42", b"\xa4\x40"],
    "cp949": [b"\xb0\xa1", b"\xb0\xa2", "가".encode("cp949")],
    "windows-936": [b"\x80", b"\xb0\xa1", b"\xa2\xe3"],
    "utf-8": ["é".encode(), "十".encode(), b"\xc3"],
    "cp932": [b"\x87\x90", b"\x81\xe0", b"\x82\xa0"],
}


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(_PIECES)),
    st.data(),
)
def test_the_canonical_check_by_bytes_answers_as_the_index(encoding: str, data: st.DataObject) -> None:
    """`StringTable.is_canonical` before the index is built (bytes, the entries holding a character of two
    byte forms by their texts) answers what it answers from the index of every decoded entry; `bracketed`
    finds the entries the decoded table has starting with `[`."""
    piece = st.sampled_from([b"[", b"a", b"A", b"]", b"\0", b"\xff", *_PIECES[encoding]])
    entries = data.draw(st.lists(st.lists(piece, max_size=4).map(b"".join), max_size=30))
    fresh = StringTable(list(entries), encoding)
    whole = StringTable(list(entries), encoding)
    whole.texts()  # the index built: the reference
    for i in range(-1, len(entries) + 1):
        assert fresh.is_canonical(i) == whole.is_canonical(i), (i, entries)
    assert fresh._index is None or encoding == "cp932"  # answered without decoding the table
    want = [i for i, s in enumerate(whole.texts()) if s and s[0] == "["]
    assert [i for i in StringTable(list(entries), encoding).bracketed() if whole.get(i)] == want


def test_the_code_pages_built_on_python_codecs_have_no_second_forms_of_their_own() -> None:
    """`encodings.ambiguous_chars` reads windows-950 / windows-936 by Python's cp950 / gbk: a character of
    two forms in our code page has them in that codec too (windows-936's extra 0x80 € has no second)."""
    from deskbridge.kinds.pvf.strings import encodings

    ours = encodings._doubles(encodings.WINDOWS_950)
    theirs = encodings._doubles("cp950")
    assert ours is not None and theirs is not None and ours
    assert all(set(forms) <= set(theirs[ch]) for ch, forms in ours.items())
    assert encodings._doubles(encodings.WINDOWS_936) == encodings._doubles("gbk") == {}
    assert encodings.ambiguous_chars("cp932") is None  # hundreds of NEC / IBM doubles: by the index
    assert encodings.ambiguous_chars(encodings.WINDOWS_950) == theirs
    assert encodings.ambiguous_chars("gb18030") is None


@pytest.mark.parametrize(
    ("encoding", "one", "other"),
    [
        ("windows-950", b"\xa2\xcc", b"\xa4\x51"),  # 十 twice
        ("windows-950", b"\xf9\xf9", b"\xa2\xa4"),  # ═ twice
        ("big5", b"\xa1\xfe", b"\xa2\x41"),  # ／ twice
        ("cp932", b"\x87\x90", b"\x81\xe0"),  # ≒ twice (by the index)
    ],
)
def test_a_character_of_two_byte_forms_is_one_string_either_way(
    encoding: str, one: bytes, other: bytes
) -> None:
    entries = [b"a" + one, b"[x]", b"a" + other, other, one + b"\0", one, b"a" + one]
    fresh = StringTable(list(entries), encoding)
    assert fresh.get(0) == fresh.get(2) and fresh.get(3) == fresh.get(4) == fresh.get(5)
    assert [fresh.is_canonical(i) for i in range(len(entries))] == [
        True,
        True,
        False,
        True,
        False,
        False,
        False,
    ]
    assert fresh._index is None or encoding == "cp932"  # answered without decoding the table
    assert fresh.bracketed() == [1]


def _doubles_one_at_a_time(encoding: str) -> dict[str, tuple[bytes, ...]] | None:
    """`encodings._doubles` the plain way: every one- and two-byte form decoded strictly on its own."""
    forms: dict[str, list[bytes]] = {}
    leads = []
    for b in range(256):
        try:
            ch = bytes([b]).decode(encoding)
        except UnicodeDecodeError:
            leads.append(b)
            continue
        if len(ch) != 1 or (ch.isascii() and ord(ch) != b):
            return None
        forms.setdefault(ch, []).append(bytes([b]))
    for a in leads:
        for b in range(256):
            try:
                ch = bytes([a, b]).decode(encoding)
            except UnicodeDecodeError:
                continue
            if len(ch) != 1 or ch.isascii():
                return None
            forms.setdefault(ch, []).append(bytes([a, b]))
    out = {ch: tuple(got) for ch, got in forms.items() if len(got) > 1}
    return out if len(out) <= 64 else None


@pytest.mark.parametrize(
    "encoding",
    ["cp950", "windows-950", "gbk", "windows-936", "cp949", "big5", "shift_jis", "cp932", "cp1252"],
)
def test_the_doubles_read_a_row_at_a_time_are_those_read_one_form_at_a_time(encoding: str) -> None:
    from deskbridge.kinds.pvf.strings import encodings

    assert encodings._doubles(encoding) == _doubles_one_at_a_time(encoding)
