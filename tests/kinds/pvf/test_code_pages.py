"""Pack text is written in Windows' code pages, so other tools and the game read what we wrote.

Python's `cp950` carries the ETEN extensions at 0xC6A1–0xC7FC that Microsoft's code page 950 lacks
(unicode.org `VENDORS/MICSFT/WINDOWS/CP950.TXT`; GNU libiconv `cp950.h` lists the difference), Python's
`gbk` lacks Windows 936's 0x80 = €; cp949 and cp932 are checked where Windows differs from the national
standards."""

from __future__ import annotations

import io

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import build_classic
from deskbridge.kinds.pvf.strings.encodings import ETEN_950, WINDOWS_936, WINDOWS_950, resolve_encoding
from deskbridge.kinds.pvf.strings.stringtable import build_stringtable

SCRIPT = b"\xb0\xd0" + bytes([2, 1, 0, 0, 0])


def _archive(encoding: str, table: list[bytes] | None = None):
    out = io.BytesIO()
    build_classic(out, [("stringtable.bin", build_stringtable(table or [])), ("a.equ", SCRIPT)])
    return open_archive(out.getvalue(), encoding=encoding)


def test_tw_is_windows_code_page_950_without_the_eten_row():
    assert resolve_encoding("tw") == resolve_encoding("cp950") == resolve_encoding("big5") == WINDOWS_950
    assert len(ETEN_950) == 249 and set("ヾ々あいう①②") <= set(ETEN_950)
    for ch in ETEN_950:  # every one sits in the ETEN row, and nowhere else in Python's table
        code = ch.encode("cp950")
        assert 0xC6A1 <= int.from_bytes(code, "big") <= 0xC7FC
        with pytest.raises(UnicodeEncodeError):
            ch.encode(WINDOWS_950)
        with pytest.raises(UnicodeDecodeError):
            code.decode(WINDOWS_950)
    # CP950.TXT's own points are kept: its changes to Big5, the F9D6–F9FE row, the euro sign
    for code, ch in (
        (b"\xa1\x45", "\u2027"),
        (b"\xa1\xc3", "\uffe3"),
        (b"\xf9\xfe", "\u2593"),
        (b"\xa3\xe1", "€"),
    ):
        assert code.decode(WINDOWS_950) == ch and ch.encode(WINDOWS_950) == code
    assert "裝備的劍".encode(WINDOWS_950) == "裝備的劍".encode("cp950")


def test_a_tw_script_with_kana_is_refused_naming_the_character_and_where():
    ar = _archive("tw")
    with pytest.raises(BridgeError) as err:
        ar.stage_text("a.equ", "#PVF_File\n[name]\n\t`劍あ`\n")
    e = err.value
    assert (
        e.code == ErrorCode.ENCODING_MISMATCH
        and e.data["character"] == "あ"
        and e.data["codepoint"] == "U+3042"
    )
    assert (e.data["line"], e.data["column"]) == (3, 4)
    assert "Windows code page 950" in e.message and "Replace 'あ'" in e.hint
    assert not ar.staged()


def test_a_tw_text_file_with_circled_digits_is_refused():
    ar = _archive("tw")
    with pytest.raises(BridgeError) as err:
        ar.stage_text("etc/x.str", "k1>正常\r\nk2>第①章\r\n")
    assert (
        err.value.data["character"] == "①"
        and err.value.data["line"] == 2
        and err.value.data["path"] == "etc/x.str"
    )


def test_eten_bytes_already_in_a_tw_pack_stay_byte_exact_in_the_raw_typed_form():
    ar = _archive("tw", [b"\xc6\xa6"])  # あ in the ETEN row
    ar.stage("a.equ", b"\xb0\xd0" + bytes([7, 0, 0, 0, 0]))
    text = ar.read_text("a.equ")
    assert "{7=0}" in text and ar.text_to_payload("a.equ", text) == ar.read("a.equ")


@pytest.mark.parametrize(
    ("encoding", "fine", "bad"),
    [
        ("cn", "骑士的长剑€", "한"),  # GBK (+ € at 0x80 as in Windows 936)
        ("kr", "기사의 장검 똠①", "骑"),  # Unified Hangul Code: every syllable, not only KS X 1001's 2,350
        ("jp", "騎士の長剣ポーション", "한"),
        ("tw", "騎士團的長劍", "あ"),
    ],
)
def test_each_code_page_takes_its_text_and_names_what_it_cannot_hold(encoding, fine, bad):
    ar = _archive(encoding)
    ar.stage_text("a.equ", f"#PVF_File\n[name]\n\t`{fine}`\n")
    assert fine in ar.read_text("a.equ")
    with pytest.raises(BridgeError) as err:
        ar.stage_text("b.equ", f"#PVF_File\n[name]\n\t`x{bad}`\n")
    assert err.value.code == ErrorCode.ENCODING_MISMATCH and err.value.data["character"] == bad


def test_windows_936_points_that_differ_from_gb2312():
    # Windows maps A1A4 and A1AA to U+00B7 and U+2014 (GB2312: U+30FB, U+2015) and adds € at 0x80
    assert resolve_encoding("cn") == resolve_encoding("gbk") == WINDOWS_936
    assert "·—€".encode(WINDOWS_936) == b"\xa1\xa4\xa1\xaa\x80"
    assert b"\xa1\xa4\x80\xb0\x80".decode(WINDOWS_936) == "·€皜"  # 0x80 as a trail byte stays GBK
    with pytest.raises(UnicodeEncodeError):
        "\u30fb".encode(WINDOWS_936)  # GB2312's A1A4 (Windows: U+00B7); U+2015 moved to A844, as in CP936.TXT
    assert "\u2015".encode(WINDOWS_936) == b"\xa8\x44"
    assert resolve_encoding("gb18030") == "gb18030" and "あ①한".encode("gb18030").decode("gb18030") == "あ①한"


def test_windows_949_is_unified_hangul_code():
    # outside KS X 1001: Windows 949 has it at 8C63 (a UHC lead byte); EUC-KR only as an 8-byte jamo sequence
    assert "똠".encode(resolve_encoding("kr")) == b"\x8c\x63" and len("똠".encode("euc-kr")) == 8
