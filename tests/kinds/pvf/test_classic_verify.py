"""The structural check of an edit-only classic save: it passes what the writer wrote and catches damage."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import ArchiveBase
from deskbridge.kinds.pvf.archive.classic import ClassicArchive
from deskbridge.kinds.pvf.archive.classic_verify import PatchedLayout, verify_patched
from deskbridge.kinds.pvf.synth.classic import synth_classic


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pvf") / "small.pvf"
    synth_classic(path, 300, seed=11)
    return path


@pytest.fixture
def copy(small, tmp_path) -> Path:
    target = tmp_path / "Script.pvf"
    target.write_bytes(small.read_bytes())
    return target


def _edited(path: Path) -> tuple[ClassicArchive, list[str]]:
    ar = open_archive(path)
    assert isinstance(ar, ClassicArchive)
    paths = ar.paths()
    picked = [paths[5], paths[len(paths) // 2]]
    ar.stage(picked[0], ar.read(picked[0]) + b"grown by a test")
    ar.stage(picked[1], ar.read(picked[1])[:-3])
    return ar, picked


def _written(ar: ClassicArchive, out: Path) -> tuple[bytes, PatchedLayout]:
    """What the edit-only writer produces, and the layout it records for the check."""
    with open(out, "wb") as fh:
        ar._write(fh, None)
    layout = ar._patched_layout
    assert layout is not None, "an edit of existing files takes the edit-only path"
    return out.read_bytes(), layout


def _tree_at(data: bytes) -> tuple[int, int, int, int]:
    g = struct.unpack_from("<i", data, 0)[0]
    _version, tree_len, crc, count = struct.unpack_from("<iiIi", data, 4 + g)
    return 20 + g, tree_len, crc, count


def _with_tree(data: bytes, change) -> bytes:  # type: ignore[no-untyped-def]
    """`data` with its plain tree changed by `change(bytearray)`, re-keyed so the tree checksum still holds:
    only the structural checks can catch what `change` did."""
    at, tree_len, crc, count = _tree_at(data)
    plain = bytearray(cc.decrypt(data[at : at + tree_len], crc))
    change(plain)
    new_crc = cc.tree_checksum(bytes(plain), count)
    head = bytearray(data[:at])
    struct.pack_into("<I", head, at - 8, new_crc)
    return bytes(head) + cc.encrypt(bytes(plain), new_crc) + data[at + tree_len :]


def test_an_edit_save_is_checked_without_reopening_and_reads_back(copy, monkeypatch):
    ar, picked = _edited(copy)
    expected = {p: ar.read(p) for p in picked}

    def no_reopen(self, path, expected):
        raise AssertionError("the edit-only save must not need the full re-open")

    monkeypatch.setattr(ArchiveBase, "_verify_written", no_reopen)
    report = ar.save()
    assert report.verified == 2 and sorted(report.changed) == sorted(picked)
    monkeypatch.undo()
    again = open_archive(copy)
    assert {p: again.read(p) for p in picked} == expected
    assert again.warnings == []


def test_the_check_passes_what_the_writer_wrote(copy, tmp_path):
    ar, _ = _edited(copy)
    _data, layout = _written(ar, tmp_path / "out.pvf")
    assert verify_patched(tmp_path / "out.pvf", layout) == 2


def _flip_changed_block(data: bytes, layout: PatchedLayout, ar: ClassicArchive) -> bytes:
    at, tree_len, _crc, _count = _tree_at(data)
    again = ClassicArchive(None, data, None)
    first = min(layout.changed)
    e = again._entries[first]
    pos = at + tree_len + e.rel
    return data[:pos] + bytes([data[pos] ^ 0x40]) + data[pos + 1 :]


def _tail(layout: PatchedLayout, i: int) -> int:
    return int(layout.tails[i])


def _unchanged(layout: PatchedLayout) -> int:
    return next(i for i in range(len(layout.tails)) if i not in layout.changed)


DAMAGE = {
    "changed block byte": (lambda d, lay, ar: _flip_changed_block(d, lay, ar), "reads back different bytes"),
    "tree byte (checksum)": (
        lambda d, lay, ar: (
            d[: _tree_at(d)[0] + 9] + bytes([d[_tree_at(d)[0] + 9] ^ 1]) + d[_tree_at(d)[0] + 10 :]
        ),
        "tree checksum",
    ),
    "unchanged path byte": (
        lambda d, lay, ar: _with_tree(
            d,
            lambda t: t.__setitem__(
                _tail(lay, _unchanged(lay)) - 1, t[_tail(lay, _unchanged(lay)) - 1] ^ 0x20
            ),
        ),
        "a path, path length or name hash in the tree differs from the source",
    ),
    "path length": (
        lambda d, lay, ar: _with_tree(
            d, lambda t: struct.pack_into("<I", t, 4, struct.unpack_from("<I", t, 4)[0] + 1)
        ),
        "path length or name hash in the tree differs from the source",
    ),
    "unchanged key": (
        lambda d, lay, ar: _with_tree(
            d, lambda t: struct.pack_into("<I", t, _tail(lay, _unchanged(lay)) + 4, 12345)
        ),
        "unchanged file's length or key",
    ),
    "block offset": (
        lambda d, lay, ar: _with_tree(
            d,
            lambda t: struct.pack_into(
                "<i",
                t,
                _tail(lay, len(lay.tails) - 1) + 8,
                struct.unpack_from("<i", t, _tail(lay, len(lay.tails) - 1) + 8)[0] + 4,
            ),
        ),
        "not contiguous",
    ),
    "changed key": (
        lambda d, lay, ar: _with_tree(
            d, lambda t: struct.pack_into("<I", t, _tail(lay, min(lay.changed)) + 4, 777)
        ),
        "wrong key",
    ),
    "bytes after the trailer": (lambda d, lay, ar: d + b"junk", "the file is"),
    "truncated": (lambda d, lay, ar: d[:-6], "the file is"),
    "header GUID": (lambda d, lay, ar: d[:4] + b"X" + d[5:], "GUID"),
}


TREE_DAMAGE = {"unchanged path byte", "path length", "unchanged key", "block offset", "changed key"}
"""Damage `_with_tree` makes: a tree that still decrypts under its (recomputed) checksum."""


@pytest.mark.parametrize("compared", [False, True], ids=["tree decrypted", "tree compared"])
@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_the_check_catches_damage(copy, tmp_path, damage, compared):
    """With the written tree known (`written_tree`, what saves record) a tree read back must be those
    bytes; without it the tree is decrypted and checked field by field. Both catch every damage, and the
    field checks (also run on the written tree) name what is wrong."""
    import dataclasses

    ar, _ = _edited(copy)
    data, layout = _written(ar, tmp_path / "out.pvf")
    assert layout.written_tree is not None
    if not compared:
        layout = dataclasses.replace(layout, written_tree=None, written_plain=None, tree_checksum=None)
    make, message = DAMAGE[damage]
    if compared and (damage in TREE_DAMAGE or damage == "tree byte (checksum)"):
        message = "the tree checksum or the tree read back is not the one written"
    bad = tmp_path / "bad.pvf"
    bad.write_bytes(make(data, layout, ar))
    with pytest.raises(BridgeError) as err:
        verify_patched(bad, layout)
    assert err.value.code == "INTERNAL" and message in err.value.message


def _refusal_when_written(bad_data: bytes, layout: PatchedLayout, tmp_path: Path) -> BridgeError:
    """What `verify_patched` says of `bad_data` on disk when the writer's layout records its tree as the one
    written (so it is read back exactly as written, and only the field checks can refuse it)."""
    import dataclasses

    at, tree_len, crc, _count = _tree_at(bad_data)
    bad = tmp_path / "bad.pvf"
    bad.write_bytes(bad_data)
    layout = dataclasses.replace(
        layout,
        written_tree=bad_data[at : at + tree_len],
        written_plain=cc.decrypt(bad_data[at : at + tree_len], crc),
        tree_checksum=crc,
    )
    with pytest.raises(BridgeError) as err:
        verify_patched(bad, layout)
    return err.value


@pytest.mark.parametrize("damage", sorted(TREE_DAMAGE))
def test_a_written_tree_that_breaks_the_layout_is_caught_by_the_field_checks(copy, tmp_path, damage):
    """The field checks run on the tree the writer wrote: a writer bug that puts a damaged tree on disk
    (read back exactly as written) is still refused, with the same message as when read back damaged."""
    ar, _ = _edited(copy)
    data, layout = _written(ar, tmp_path / "out.pvf")
    make, message = DAMAGE[damage]
    bad_data = make(data, layout, ar)
    err = _refusal_when_written(bad_data, layout, tmp_path)
    assert err.code == "INTERNAL" and message in err.message


BOUNDARY_BYTES = {
    "first byte of the tree": lambda lay: 0,
    "last path byte before a tail": lambda lay: _tail(lay, _unchanged(lay)) - 1,
    "name hash right after a tail": lambda lay: _tail(lay, _unchanged(lay)) + 12,
    "name hash after a changed entry's tail": lambda lay: _tail(lay, min(lay.changed)) + 12,
    "last path byte of the last entry": lambda lay: _tail(lay, len(lay.tails) - 1) - 1,
}


@pytest.mark.parametrize("where", list(BOUNDARY_BYTES), ids=list(BOUNDARY_BYTES))
def test_only_the_twelve_tail_bytes_of_an_entry_may_differ(copy, tmp_path, where):
    """Only `dataLen, checksum, relOffset` of each entry may differ from the source tree: the bytes either
    side of a tail — the last path byte, the next entry's name hash — are still compared."""
    ar, _ = _edited(copy)
    data, layout = _written(ar, tmp_path / "out.pvf")
    pos = BOUNDARY_BYTES[where](layout)
    bad_data = _with_tree(data, lambda t: t.__setitem__(pos, t[pos] ^ 0x01))
    err = _refusal_when_written(bad_data, layout, tmp_path)
    assert "a path, path length or name hash in the tree differs from the source" in err.message


def test_a_writer_that_damages_the_output_is_caught_before_the_rename(copy, monkeypatch):
    before = copy.read_bytes()
    ar, picked = _edited(copy)
    real = ClassicArchive._write_patched

    def sloppy(self, out, progress):
        done = real(self, out, progress)
        out.write(b"\0" * 4)  # a stray dword after the trailer
        return done

    monkeypatch.setattr(ClassicArchive, "_write_patched", sloppy)
    with pytest.raises(BridgeError) as err:
        ar.save(backup=True)
    assert err.value.code == "INTERNAL" and "verify failed" in err.value.message
    assert copy.read_bytes() == before and [p.name for p in copy.parent.iterdir()] == ["Script.pvf"]
    assert ar.dirty and set(ar.staged()) == set(picked)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_single_byte_damage_is_a_typed_error_or_outside_what_the_check_reads(copy, tmp_path, data):
    ar, _ = _edited(copy)
    out = tmp_path / "out.pvf"
    written, layout = _written(ar, out)
    pos = data.draw(st.integers(0, len(written) - 1))
    bad = bytearray(written)
    bad[pos] ^= data.draw(st.integers(1, 255))
    out.write_bytes(bytes(bad))
    try:
        verify_patched(out, layout)
    except BridgeError as err:
        assert err.code == "INTERNAL"
        return
    # Passed: the byte must lie in an unchanged file's block (a save copies those without reading them,
    # exactly like the full re-open check, which reads only the changed files).
    at, tree_len, _crc, _count = _tree_at(written)
    assert pos >= at + tree_len


def _same_as_a_fresh_open(ar: ClassicArchive, path: Path) -> None:
    fresh = open_archive(path)
    assert ar.header == fresh.header
    assert ar.raw_entries() == fresh.raw_entries()
    assert bytes(ar._entries.plain) == fresh._entries.plain  # after an edit-only save: its array
    assert all(ar.read(p) == fresh.read(p) for p in fresh.paths())


def test_save_binds_to_the_written_file_without_parsing_it_again(copy, monkeypatch):
    from deskbridge.kinds.pvf.archive import classic

    parses = []
    real_parse = classic._parse
    monkeypatch.setattr(classic, "_parse", lambda buf: parses.append(len(buf)) or real_parse(buf))
    ar, picked = _edited(copy)
    parses.clear()
    ar.save()
    assert parses == [] and not ar.dirty
    _same_as_a_fresh_open(ar, copy)
    ar.stage(picked[0], b"second edit")  # the re-bound columns carry the next edit-only save
    parses.clear()
    ar.save()
    assert parses == []
    _same_as_a_fresh_open(ar, copy)
    assert open_archive(copy).read(picked[0]) == b"second edit"


def test_save_reparses_when_the_file_on_disk_is_not_the_one_written(copy, monkeypatch):
    import dataclasses

    from deskbridge.kinds.pvf.archive import base, classic

    real_write = base.atomic_write

    def written_then_replaced(*args, **kwargs):
        result = real_write(*args, **kwargs)
        return dataclasses.replace(result, identity=dataclasses.replace(result.identity, inode=0))

    monkeypatch.setattr(base, "atomic_write", written_then_replaced)
    parses = []
    real_parse = classic._parse
    monkeypatch.setattr(classic, "_parse", lambda buf: parses.append(len(buf)) or real_parse(buf))
    ar, _picked = _edited(copy)
    parses.clear()
    ar.save()
    assert len(parses) == 1  # the full re-open
    _same_as_a_fresh_open(ar, copy)


def test_a_big_changed_file_is_encrypted_beside_the_copy_and_reads_back(copy, monkeypatch):
    import io

    from deskbridge.kinds.pvf.archive import classic

    ar, picked = _edited(copy)
    big = bytes(range(256)) * 6000 + b"odd"  # > 1 MiB, not dword-aligned
    ar.stage(picked[1], big)
    threads = []
    real_thread = classic.threading.Thread
    monkeypatch.setattr(
        classic.threading, "Thread", lambda *a, **k: threads.append(k.get("name")) or real_thread(*a, **k)
    )
    fast = io.BytesIO()
    ar._write(fast, None)
    assert threads == ["pvf-encrypt"]
    monkeypatch.setattr(ClassicArchive, "_write_patched", lambda self, out, progress: False)
    general = io.BytesIO()
    ar._write(general, None)
    assert fast.getvalue() == general.getvalue()
    monkeypatch.undo()
    ar.save()
    assert open_archive(copy).read(picked[1]) == big


def test_tail_fields_read_exactly_twelve_bytes_at_each_offset():
    """The 12-byte-item gather (`cc.tail_fields`) against struct, at unaligned offsets, back to back and at
    the very end of the buffer; as bytes it is what the verify counts differing tail bytes with."""
    import random

    import numpy as np

    rng = random.Random(3)
    raw = bytearray(rng.randbytes(4001))
    offsets = [0, 12, 25, 101, 1000, 1013, len(raw) - 12]
    arr = np.frombuffer(bytes(raw), dtype=np.uint8)
    fields = cc.tail_fields(arr, np.asarray(offsets, dtype=np.int64))
    assert fields.tolist() == [list(struct.unpack_from("<3I", raw, o)) for o in offsets]
    assert fields.view(np.uint8).tolist() == [list(raw[o : o + 12]) for o in offsets]


@pytest.mark.parametrize("count", [0, 1, 2, 7, 300])
def test_the_tree_columns_gather_matches_a_struct_walk_of_the_entries(count):
    """`cc.tail_and_next_hash` (one 16-byte gather: an entry's 12 tail bytes and the next entry's name
    hash) against walking a packed tree with struct, for trees ending exactly at the last tail."""
    import random

    import numpy as np

    rng = random.Random(count)
    tree, tails, expect_fields, expect_hashes = bytearray(), [], [], []
    for _ in range(count):
        nh, path = rng.getrandbits(32), rng.randbytes(rng.randrange(0, 40))
        size, crc, rel = rng.getrandbits(31), rng.getrandbits(32), rng.getrandbits(31)
        tree += struct.pack("<II", nh, len(path)) + path
        tails.append(len(tree))
        tree += struct.pack("<iIi", size, crc, rel)
        expect_fields.append([size, crc, rel])
        expect_hashes.append(nh)
    fields, hashes = cc.tail_and_next_hash(
        np.frombuffer(bytes(tree), dtype=np.uint8), np.asarray(tails, dtype=np.int64)
    )
    assert fields.tolist() == expect_fields and hashes.tolist() == expect_hashes
    assert fields.shape == (count, 3)


def test_columns_of_an_opened_archive_are_its_parsed_entries(copy):
    import numpy as np

    ar = open_archive(copy)
    assert isinstance(ar, ClassicArchive)
    cols = ar._columns()
    t = ar._entries
    assert cols is not None
    assert cols.sizes.tolist() == list(t.size) and cols.rels.tolist() == list(t.rel)
    assert cols.checksums.tolist() == list(t.checksum) and cols.tails.tolist() == list(t.tail)
    assert cols.tails.dtype == np.int64 and not np.shares_memory(cols.tails, np.frombuffer(t.tail, np.int64))


@pytest.mark.parametrize("size", [0, 1, 2, 3, 4, 5, 4099, (1 << 16) * 4 + 3, (1 << 20) + 6])
def test_encrypt_view_is_encrypt_without_the_copies(size):
    import os

    data = os.urandom(size)
    view = cc.encrypt_view(data, 0x1234ABCD)
    assert bytes(view) == cc.encrypt(data, 0x1234ABCD) and view.readonly
    assert bytes(cc.encrypt_view(memoryview(data), 7)) == cc.encrypt(data, 7)
    assert cc.decrypt(bytes(view), 0x1234ABCD, size) == data


@pytest.mark.parametrize("where", ["first step", "a later step", "last byte"])
def test_a_big_block_read_back_in_steps_catches_a_byte_anywhere(copy, tmp_path, where, monkeypatch):
    """The read-back compares a big changed block a step at a time into one buffer: damage in any step,
    the short last one included, is caught."""
    from deskbridge.kinds.pvf.archive import classic_verify

    monkeypatch.setattr(classic_verify, "_COMPARE_STEP", 4096)
    ar, picked = _edited(copy)
    big = bytes(range(256)) * 200 + b"odd"  # 12 steps of 4 KiB and a short one, not dword-aligned
    ar.stage(picked[1], big)
    out = tmp_path / "out.pvf"
    written, layout = _written(ar, out)
    assert verify_patched(out, layout) == 2
    i = sorted(layout.changed)[1]
    at, tree_len, _crc, _count = _tree_at(written)
    start = at + tree_len + struct.unpack_from("<i", layout.written_plain, _tail(layout, i) + 8)[0]
    n = cc.aligned(len(big))
    pos = start + {"first step": 5, "a later step": 9 * 4096 + 77, "last byte": n - 1}[where]
    bad = bytearray(written)
    bad[pos] ^= 0x40
    out.write_bytes(bytes(bad))
    with pytest.raises(BridgeError, match="reads back different bytes"):
        verify_patched(out, layout)


def test_a_tree_read_back_in_steps_catches_a_byte_in_a_later_step(copy, tmp_path, monkeypatch):
    from deskbridge.kinds.pvf.archive import classic_verify

    monkeypatch.setattr(classic_verify, "_COMPARE_STEP", 1024)
    ar, _picked = _edited(copy)
    out = tmp_path / "out.pvf"
    written, layout = _written(ar, out)
    at, tree_len, _crc, _count = _tree_at(written)
    assert tree_len > 3 * 1024
    bad = bytearray(written)
    bad[at + tree_len - 1030] ^= 1
    out.write_bytes(bytes(bad))
    with pytest.raises(BridgeError, match="tree read back is not the one written"):
        verify_patched(out, layout)


def test_the_fast_crc32_is_zlibs_crc32():
    """Keys and tree checksums are zlib's CRC-32 (research/pvf.md §1A); ISA-L's crc32 computes them."""
    import os
    import zlib

    import numpy as np

    assert cc._crc32 is not zlib.crc32  # isal is a dependency
    for size in (0, 1, 3, 4, 1000, 100_003):
        data = os.urandom(size)
        for seed in (0, 1, 0x1505, 0x81A79011, 0xFFFFFFFF):
            assert cc._crc32(data, seed) == zlib.crc32(data, seed)
            assert cc.file_checksum(data, seed) == zlib.crc32(cc.padded(data), seed)
        frozen = np.frombuffer(data, dtype=np.uint8)  # a read-only array, as the edit-only save passes
        assert cc.tree_checksum(frozen, 7) == zlib.crc32(cc.padded(data), 7)


@pytest.mark.parametrize("damage", ["hash_order", "first_offset"])
def test_an_archive_outside_the_patched_layout_gets_no_columns_and_saves_the_general_way(copy, damage):
    """The columns (one gather of each entry's tail and the next entry's name hash) must still see a
    tree that is not sorted by name hash, or whose blocks do not start at offset 0."""
    data = copy.read_bytes()

    def change(plain: bytearray) -> None:
        first_tail = 8 + struct.unpack_from("<I", plain, 4)[0]
        if damage == "hash_order":  # the second entry's hash below the first's
            second = first_tail + 12
            struct.pack_into("<I", plain, second, struct.unpack_from("<I", plain, 0)[0] - 1)
        else:
            struct.pack_into("<i", plain, first_tail + 8, 4)

    copy.write_bytes(_with_tree(data, change))
    ar = open_archive(copy)
    assert isinstance(ar, ClassicArchive)
    assert ar._columns() is None
    path = ar.paths()[-1]
    ar.stage(path, b"rewritten the general way")
    ar.save()
    assert open_archive(copy).read(path) == b"rewritten the general way"
