"""Offsets: code points, UTF-16 and UTF-8 agree on every position, as a browser and Python count them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.offsets import OffsetMap, utf16_len

# Text alphabet mixing ASCII, CJK, an emoji outside the BMP and line breaks.
texts = st.text(alphabet=st.sampled_from([*list("ab \n#中文é"), "😀", "𝄞"]), max_size=60)


def js_length(s: str) -> int:
    return len(s.encode("utf-16-le")) // 2


def test_emoji_is_one_code_point_two_utf16_units_four_bytes():
    om = OffsetMap("a😀b")
    assert om.length_cp == 3
    assert om.length_utf16 == 4
    assert om.cp_to_utf16(2) == 3
    assert om.utf16_to_cp(3) == 2
    assert om.cp_to_utf8(2) == 5


def test_offset_inside_a_surrogate_pair_is_refused():
    with pytest.raises(BridgeError) as err:
        OffsetMap("a😀b").utf16_to_cp(2)
    assert err.value.code is ErrorCode.INVALID_ARGUMENT
    assert "surrogate" in err.value.message


def test_line_and_column_are_one_based_in_code_points():
    om = OffsetMap("# 标题\n😀x\n")
    assert om.cp_to_line_col(0) == (1, 1)
    assert om.line_col_to_cp(2, 2) == 6  # after the emoji on line 2
    assert om.line_count == 3
    with pytest.raises(BridgeError):
        om.line_col_to_cp(4, 1)
    with pytest.raises(BridgeError):
        om.line_col_to_cp(1, 9)


@settings(deadline=None)  # shared CI machines: no per-example time limit
@given(texts, st.data())
def test_utf16_round_trip_matches_javascript_counting(text, data):
    om = OffsetMap(text)
    assert om.length_utf16 == js_length(text) == utf16_len(text)
    cp = data.draw(st.integers(0, len(text)))
    u16 = om.cp_to_utf16(cp)
    assert u16 == js_length(text[:cp])
    assert om.utf16_to_cp(u16) == cp


@settings(deadline=None)  # shared CI machines: no per-example time limit
@given(texts, st.data())
def test_utf8_round_trip(text, data):
    om = OffsetMap(text)
    cp = data.draw(st.integers(0, len(text)))
    b = om.cp_to_utf8(cp)
    assert b == len(text[:cp].encode())
    assert om.utf8_to_cp(b) == cp


@settings(deadline=None)  # shared CI machines: no per-example time limit
@given(texts, st.data())
def test_line_column_round_trip(text, data):
    om = OffsetMap(text)
    cp = data.draw(st.integers(0, len(text)))
    line, col = om.cp_to_line_col(cp)
    assert line == text[:cp].count("\n") + 1
    assert om.line_col_to_cp(line, col) == cp
