"""The cached decompile path (`classic_codec.to_tokens`) equals the record-at-a-time reference on any input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.script import classic_codec as cc
from deskbridge.kinds.pvf.strings.stringtable import StringTable

ENTRIES = [
    b"[name]",
    b"[/name]",
    b"abc",
    b"abc",
    b"\xff\xfe",
    b"name_1",
    b"a`b",
    b"[price]",
    b"x" * 300,
    b"k\ney",
]
LINKS = {(0, "name_1"): "Short Sword", (1, "abc"): "long " * 40}


def _table() -> StringTable:
    return StringTable(list(ENTRIES), "cp949")


def _link_text(table_id: int, key: str) -> str | None:
    return LINKS.get((table_id, key))


record = st.tuples(
    st.sampled_from([2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 255]),
    st.one_of(
        st.integers(0, len(ENTRIES) + 2),
        st.integers(0, 0xFFFFFFFF),
        st.sampled_from([0x7F800000, 0x7FC00000, 0x3F800000, 0x80000000, 0x7FFFFFFF]),
    ),
)


def _payload(recs: list[tuple[int, int]]) -> bytes:
    return cc.MAGIC + b"".join(struct.pack("<BI", t, v) for t, v in recs)


def _reference(data: bytes, table: StringTable) -> list:
    return cc._to_tokens_reference(data, cc.read_tokens(data), table, _link_text)


@settings(max_examples=300, deadline=None)
@given(st.lists(record, max_size=60))
def test_cached_tokens_equal_the_reference(recs: list[tuple[int, int]]) -> None:
    table = _table()
    data = _payload(recs)
    assert cc.to_tokens(data, table, _link_text) == _reference(data, table)
    # and again from a warm cache, also without link resolution
    assert cc.to_tokens(data, table, _link_text) == _reference(data, table)
    assert cc.to_tokens(data, table) == cc._to_tokens_reference(data, cc.read_tokens(data), table, None)


def test_an_index_past_the_table_is_decided_again_once_the_table_grows() -> None:
    table = _table()
    data = _payload([(7, len(ENTRIES))])
    assert cc.to_tokens(data, table)[0].kind.value == "typed"
    table.intern("grown")
    assert cc.to_tokens(data, table) == _reference(data, table)
    assert cc.to_tokens(data, table)[0].value == "grown"


def test_the_text_budget_holds_on_the_cached_path() -> None:
    table = StringTable([b"y" * 400_000], "cp949")
    data = _payload([(7, 0)] * 4)  # 22 payload bytes → a budget of ≈ 1 M characters; 1.6 M would print
    with pytest.raises(BridgeError) as fast:
        cc.to_tokens(data, table)
    with pytest.raises(BridgeError) as ref:
        _reference(data, table)
    assert fast.value.code == ref.value.code and fast.value.message == ref.value.message


# --- nkpi ------------------------------------------------------------------------------------------------


class _Pools:
    def __init__(self) -> None:
        self.strings = {0: "[name]", 7: "word", 9: "[name]", 20: "a b", 30: "\ud800", 40: "12", 50: "x" * 300}

    def resolve(self, off: int) -> str:
        return self.strings[off]

    def is_valid(self, off: int) -> bool:
        return off in self.strings

    def add(self, s: str) -> int:
        off = max(self.strings) + 10
        self.strings[off] = s
        return off


def _nkpi_reference(payload: bytes, pools: _Pools) -> list:
    """The record-at-a-time mapping of docs/pvf-script-text.md, as the cached path must reproduce it."""
    from deskbridge.kinds.pvf.archive.budget import check_text, text_budget
    from deskbridge.kinds.pvf.script import nkpi_codec as nc
    from deskbridge.kinds.pvf.script import text as d

    out, seen, chars, budget = [], {}, 0, text_budget(len(payload))
    for t, v in nc.records(payload).tolist():
        if t == nc.T_INT:
            out.append(d.int_token(v))
        elif t == nc.T_FLOAT:
            bits = v & 0xFFFFFFFF
            out.append(d.float_token(bits) if d.format_float32(bits) is not None else d.typed_token(t, v))
        elif t not in nc.STRING_TYPES or not pools.is_valid(v & 0xFFFFFFFF):
            out.append(d.typed_token(t, v))
        else:
            s = pools.resolve(v & 0xFFFFFFFF)
            chars += len(s)
            if chars > budget:
                check_text(chars, len(payload))
            first = seen.setdefault((t == nc.T_TAG, s), v)
            if first != v or not nc._string_ok(s):
                out.append(d.typed_token(t, v))
            elif t == nc.T_TAG:
                out.append(
                    d.section_token(s)
                    if d.is_section_text(s)
                    else d.word_token(s)
                    if d.is_word(s)
                    else d.typed_token(t, s)
                )
            elif t == nc.T_STRING:
                out.append(d.string_token(s))
            else:
                out.append(d.typed_token(t, s))
    return out


nkpi_record = st.tuples(
    st.sampled_from([0, 2, 3, 5, 6, 7, 8, 10, 1, 4, 200]),
    st.one_of(
        st.sampled_from([0, 7, 9, 20, 30, 40, 50, 60, -1, 0x7F800000, 0x3F800000]),
        st.integers(-(1 << 31), (1 << 31) - 1),
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(nkpi_record, max_size=60))
def test_nkpi_cached_tokens_equal_the_reference(recs: list[tuple[int, int]]) -> None:
    from deskbridge.kinds.pvf.script import nkpi_codec as nc

    pools = _Pools()
    payload = nc.pack_records(recs)
    assert nc.to_tokens(payload, pools) == _nkpi_reference(payload, pools)
    assert nc.to_tokens(payload, pools) == _nkpi_reference(payload, pools)  # warm cache
    pools.add("late")  # offset 60 becomes valid: decided again, not taken from the cache
    assert nc.to_tokens(payload, pools) == _nkpi_reference(payload, pools)
