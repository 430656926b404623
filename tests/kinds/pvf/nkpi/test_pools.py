"""The nkpi string pools: magic offsets, the pool rule for new strings, reuse, and serialisation."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.kinds.pvf.archive.nkpi_cipher import LEGACY
from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools, _Segmented

KEYS = PoolKeys(LEGACY.pool_a, LEGACY.pool_w, LEGACY.mask_a, LEGACY.mask_w)


def _pools(a: bytes = b"\0[name]\0sword\0", w: bytes = "\0巨剑\0".encode("utf-16-le")) -> StringPools:
    return StringPools(bytes(8), a, w, KEYS, "utf-8")


def test_magic_offsets_pick_the_pool_by_parity():
    p = _pools()
    assert p.resolve(2) == "[name]"  # even: sTrA byte 1
    assert p.resolve(16) == "sword"
    assert p.resolve(3) == "巨剑"  # odd: sTrW byte 2
    assert p.find("sword") == 16 and p.find("巨剑") == 3


def test_new_strings_go_ascii_to_stra_and_cjk_to_strw_and_are_reused():
    p = _pools()
    a = p.add("new ascii")
    w = p.add("新的")
    assert a % 2 == 0 and w % 2 == 1
    assert p.add("new ascii") == a and p.add("新的") == w
    assert p.resolve(a) == "new ascii" and p.resolve(w) == "新的"
    assert p.dirty


def test_an_empty_stra_sends_everything_to_the_utf16_pool():
    p = _pools(a=b"", w=b"\0\0")
    assert p.add("ascii") % 2 == 1  # 110US keeps sTrA empty (research §1B)


def test_serialise_parse_round_trip_keeps_both_pools():
    p = _pools()
    p.add("x" * 1000)
    p.add("한국어")
    again, recovered = StringPools.parse(p.serialize(), 0, KEYS)
    assert not recovered
    assert again.raw_a() == p.raw_a() and again.raw_w() == p.raw_w()


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=40), st.binary(max_size=40), st.binary(min_size=1, max_size=6), st.integers(0, 80))
def test_segmented_find_equals_find_on_the_joined_bytes(base, tail, needle, start):
    seg = _Segmented(base)
    seg += tail
    joined = base + tail
    assert seg.find(needle, start) == joined.find(needle, start)
    assert seg[start : start + 7] == joined[start : start + 7]
    assert bytes(seg) == joined


def test_a_gbk_stra_pool_is_detected_and_warned_about(tmp_path):
    from deskbridge.core.errors import ErrorCode
    from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    path = tmp_path / "gbk.pvf"
    synth_nkpi(path, 40, 1, "legacy")
    with open_nkpi(path) as ar:
        assert ar.warnings == [] and ar.encoding == "utf-8"
        target = ar.paths()[2]
        # Write GBK bytes into sTrA the way a GBK-minded tool would (pvfVSCode's guess list, research §5.4).
        ar.pools._a += "雷霆".encode("gbk") + b"\0"
        ar.pools.dirty = True
        ar.stage(target, ar.read(target) + b"\x06" + (2 * (ar.pools.size_a - 5)).to_bytes(4, "little"))
        ar.save()
    with open_nkpi(path) as again:
        assert again.encoding == "gbk"
        assert [w.code for w in again.warnings] == [ErrorCode.ENCODING_MISMATCH]
        assert again.read_text(target).rstrip().endswith("`雷霆`")


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.text(alphabet=st.sampled_from("ab[]/_ é巨\U0001f600"), max_size=6), min_size=1, max_size=12),
    st.integers(0, 12),
)
def test_sort_offsets_orders_by_utf16_code_units(strings, frozen):
    p = _pools(a=b"\0", w=b"\0\0")
    offs = [p.add(s) for s in strings[:frozen]]
    p.freeze()
    offs += [p.add(s) for s in strings[frozen:]]
    uniq = list(dict.fromkeys(offs))
    got = [p.resolve(o) for o in p.sort_offsets(uniq).tolist()]
    assert got == sorted((p.resolve(o) for o in uniq), key=lambda s: s.encode("utf-16-be", "surrogatepass"))


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 700), st.sampled_from([1, 6, 9]))
def test_parallel_compression_is_one_valid_zlib_stream(data, segment, level):
    import zlib

    from deskbridge.kinds.pvf.archive.nkpi_pools import compress_parallel

    stream = compress_parallel(data, level, segment)
    d = zlib.decompressobj()
    assert d.decompress(stream) == data and d.eof and not d.unused_data


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 22])
def test_string_spans_match_a_plain_scan_whatever_the_block_size(block, monkeypatch):
    """Strings measured block by block (a string may span blocks) equal a byte-by-byte scan."""
    import random

    import numpy as np

    from deskbridge.kinds.pvf.archive import nkpi_pools

    monkeypatch.setattr(nkpi_pools, "SPAN_BLOCK", block)
    rng = random.Random(block)
    for _ in range(200):
        data = bytes(rng.choice([0, 0x41, 0x42, 0xC3]) for _ in range(rng.randint(1, 60)))
        starts = [rng.randrange(len(data)) for _ in range(rng.randint(0, 20))]
        lengths, ascii_only = nkpi_pools.string_spans(
            np.frombuffer(data, np.uint8), np.array(starts, np.int64)
        )
        for k, x in enumerate(starts):
            end = data.find(b"\0", x)
            end = len(data) if end < 0 else end
            assert lengths[k] == end - x and ascii_only[k] == all(c < 0x80 for c in data[x:end])
