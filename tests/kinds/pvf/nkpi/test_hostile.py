"""Truncated, hostile and corrupted nkpi input gives typed errors — never a crash, hang or huge allocation."""

from __future__ import annotations

import contextlib
import struct
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.fuzz import pvf_nkpi as fz
from deskbridge.kinds.pvf.archive import nkpi_header as hdr
from deskbridge.kinds.pvf.archive.nkpi import NkpiArchive, open_nkpi
from deskbridge.kinds.pvf.archive.nkpi_cipher import LEGACY, MAGIC_DATA, crypt
from deskbridge.kinds.pvf.script import nkpi_codec as codec

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def legacy_bytes(small_archives) -> bytes:
    return small_archives["legacy"].read_bytes()


def _rewrite_header(data: bytes, **fields: int) -> bytes:
    h = hdr.decrypt(data[:48], LEGACY)
    assert h is not None
    return hdr.encrypt(h.with_sizes(**fields), LEGACY) + data[48:]


def _rewrite_grpi(data: bytes, index: int, comp_end: int, raw: int) -> bytes:
    h = hdr.decrypt(data[:48], LEGACY)
    plain = bytearray(crypt(data[h.grpi_offset : h.body_offset], LEGACY.grpi, MAGIC_DATA))
    struct.pack_into("<ii", plain, 8 * index, comp_end, raw)
    return data[: h.grpi_offset] + crypt(bytes(plain), LEGACY.grpi, MAGIC_DATA) + data[h.body_offset :]


def _code(data: bytes) -> ErrorCode:
    with pytest.raises(BridgeError) as err:
        ar = NkpiArchive(data)
        for p in ar.paths():
            ar.read(p)
    return err.value.code


def test_truncated_archive_is_corrupt_with_an_offset(legacy_bytes):
    for cut in (0, 10, 47, 48, 200, len(legacy_bytes) // 2, len(legacy_bytes) - 1):
        with pytest.raises(BridgeError) as err:
            NkpiArchive(legacy_bytes[:cut])
        assert err.value.code in (
            ErrorCode.PVF_CORRUPT,
            ErrorCode.UNSUPPORTED_VARIANT,
            ErrorCode.KEY_REQUIRED,
        )
        if err.value.code is ErrorCode.PVF_CORRUPT:
            assert "offset" in err.value.data


def test_a_4gb_chunk_in_a_small_file_is_refused_before_allocation(legacy_bytes):
    data = _rewrite_grpi(legacy_bytes, 0, 20, 0x7FFFFFFF)
    with pytest.raises(BridgeError) as err:
        NkpiArchive(data)
    assert err.value.code is ErrorCode.PVF_CORRUPT
    assert "GRPI entry 0" in err.value.message


def test_header_sizes_must_add_up_to_the_file(legacy_bytes):
    for field in ("file_count", "hash_table_size", "name_table_size", "body_size", "group_count"):
        data = _rewrite_header(legacy_bytes, **{field: 0x7FFFFFFF})
        with pytest.raises(BridgeError) as err:
            NkpiArchive(data)
        assert err.value.code is ErrorCode.PVF_CORRUPT
        assert err.value.data["offset"] == 0


def test_file_entry_outside_its_chunk_is_corrupt_at_that_entry(legacy_bytes):
    data = bytearray(legacy_bytes)
    struct.pack_into("<i", data, 48 + 24 * 5 + 16, 10_000_000)  # DataSize of entry 5
    with pytest.raises(BridgeError) as err:
        NkpiArchive(bytes(data))
    assert err.value.code is ErrorCode.PVF_CORRUPT
    assert err.value.data["offset"] == 48 + 24 * 5


def test_a_chunk_that_inflates_to_the_wrong_length_is_corrupt(legacy_bytes):
    h = hdr.decrypt(legacy_bytes[:48], LEGACY)
    data = bytearray(legacy_bytes)
    last = h.body_offset + h.body_size - 3
    data[last] ^= 0xFF  # damage the last chunk's deflate stream / adler32
    ar = NkpiArchive(bytes(data), recover=False)
    with pytest.raises(BridgeError) as err:
        for p in ar.paths():
            ar.read(p)
    assert err.value.code is ErrorCode.PVF_CORRUPT


def test_random_bytes_are_not_an_archive():
    assert _code(b"\x00" * 100) in (ErrorCode.UNSUPPORTED_VARIANT, ErrorCode.PVF_CORRUPT)
    # big and opaque, but no plaintext file table after the first page guard: not a PVF (issue: a random
    # file must not ask for sk.dat); a named .pvf or one with sk.dat beside it still does (test_messages.py)
    assert _code(bytes(range(256)) * 64) is ErrorCode.UNSUPPORTED_VARIANT


def test_script_payload_with_trailing_bytes_is_a_typed_error():
    with pytest.raises(BridgeError) as err:
        codec.records(b"\x00\x01\x00\x00\x00\x07")
    assert err.value.code is ErrorCode.PVF_CORRUPT


def test_bounded_inflate_refuses_a_zip_bomb():
    bomb = zlib.compress(bytes(50_000_000))
    assert len(bomb) < 100_000
    from deskbridge.kinds.pvf.archive.nkpi_recover import inflate_exact

    assert inflate_exact(bomb, 1000) is None


@FUZZ
@given(st.data())
def test_mutated_archives_only_raise_typed_errors(legacy_bytes, data):
    buf = bytearray(legacy_bytes)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(buf) - 1))
        buf[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del buf[data.draw(st.integers(0, len(buf))) :]
    with contextlib.suppress(BridgeError):
        fz.fuzz_archive(bytes(buf))


@FUZZ
@given(st.lists(st.tuples(st.integers(0, 255), st.integers(-(2**31), 2**31 - 1)), max_size=60))
def test_any_token_stream_decompiles_and_compiles_back(recs):
    fz.fuzz_script(codec.pack_records(recs))


@FUZZ
@given(st.text(max_size=200))
def test_any_text_either_compiles_stably_or_is_a_syntax_error(text):
    try:
        fz.fuzz_text(text.encode("utf-8"))
    except BridgeError as err:
        assert err.code is ErrorCode.SCRIPT_SYNTAX


@FUZZ
@given(st.binary(max_size=400))
def test_tables_and_pools_parsers_only_raise_typed_errors(raw):
    for target in (
        fz.fuzz_hash_table,
        fz.fuzz_grpi,
        fz.fuzz_pools,
        fz.fuzz_pool_strings,
        fz.fuzz_header,
        fz.fuzz_utf16,
    ):
        with contextlib.suppress(BridgeError):
            target(raw)


def test_open_nkpi_refuses_a_missing_file(tmp_path):
    with pytest.raises(BridgeError) as err:
        open_nkpi(tmp_path / "nope.pvf")
    assert err.value.code is ErrorCode.NOT_FOUND


@FUZZ
@given(st.binary(max_size=2000))
def test_mutated_plaintext_sections_only_raise_typed_errors(mask):
    """Mutations under the encryption: file table, hash table, pools, GRPI and chunk contents."""
    with contextlib.suppress(BridgeError):
        fz.fuzz_archive_plain(mask)


def test_one_damaged_chunk_leaves_the_rest_readable(legacy_bytes):
    h = hdr.decrypt(legacy_bytes[:48], LEGACY)
    data = bytearray(legacy_bytes)
    data[h.body_offset + 2] ^= 0xFF  # inside chunk 0's deflate stream
    ar = NkpiArchive(bytes(data), recover=False)
    bad = [p for p in ar.paths() if ar.file_info(p).extra["chunk"] == 0]
    good = [p for p in ar.paths() if ar.file_info(p).extra["chunk"] == 1]
    assert ar.read_text(good[0]).startswith("[name]")
    with pytest.raises(BridgeError) as err:
        ar.read(bad[0])
    assert err.value.code is ErrorCode.PVF_CORRUPT and err.value.data["offset"] == h.body_offset
