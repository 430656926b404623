"""Opening, staging, saving and re-reading classic archives, and the typed errors for bad bytes."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import build_classic
from deskbridge.kinds.pvf.synth.classic import synth_classic


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("pvf") / "small.pvf"
    synth_classic(path, 300, seed=7)
    return path


@pytest.fixture(scope="module")
def medium(tmp_path_factory) -> Path:
    """3 MB: kernel copies longer than a copy buffer's step, several identity chunks."""
    path = tmp_path_factory.mktemp("pvf") / "medium.pvf"
    synth_classic(path, 3000, seed=7)
    return path


@pytest.fixture
def copy(small, tmp_path) -> Path:
    target = tmp_path / "Script.pvf"
    target.write_bytes(small.read_bytes())
    return target


def test_cipher_round_trips_and_hash_matches_pvfutility():
    data = bytes(range(13))
    assert cc.decrypt(cc.encrypt(data, 0x1234), 0x1234, 13) == data
    assert cc.name_hash(b"n_string.lst") == 1027731306  # value stored by pvf-parser-ts (manifest)


def test_unmodified_save_is_byte_identical(copy):
    before = copy.read_bytes()
    ar = open_archive(copy)
    report = ar.save(backup=True)
    assert report.byte_identical and copy.read_bytes() == before
    assert report.backup is not None and report.backup.read_bytes() == before


def test_edit_one_script_saves_verifies_and_reads_back(copy):
    ar = open_archive(copy)
    path = next(p for p in ar.paths() if p.endswith(".equ"))
    text = ar.read_text(path).replace("[name2]", "[name2]\n\t`全新的名字 new`", 1)
    ar.stage_text(path, text)
    assert ar.staged().keys() == {path, "stringtable.bin"}  # the new string grew the table
    report = ar.save()
    assert report.verified == 2 and not report.byte_identical
    again = open_archive(copy)
    assert "`全新的名字 new`" in again.read_text(path)
    assert again.read_text(path) == text  # the printer's own layout reads back unchanged
    others = [p for p in again.paths() if p not in (path, "stringtable.bin")]
    fresh = open_archive(copy)
    assert all(fresh.read(p) == again.read(p) for p in others[:50])


def test_a_save_whose_read_back_fails_leaves_the_file_and_the_edit_alone(copy):
    before = copy.read_bytes()
    ar = open_archive(copy)
    path = next(p for p in ar.paths() if p.endswith(".equ"))
    ar.stage(path, ar.read(path)[:-4])
    ar._write = ar._write_unchanged  # a writer that loses the edit: the verify step must catch it
    with pytest.raises(BridgeError) as err:
        ar.save(backup=True)
    assert err.value.code == "INTERNAL" and "reads back different bytes" in err.value.message
    assert copy.read_bytes() == before and not copy.with_name("Script.pvf.bak").exists()
    assert [p.name for p in copy.parent.iterdir()] == ["Script.pvf"]  # no temp file left behind
    assert ar.dirty and ar.staged().keys() == {path}


def test_unchanged_blocks_are_copied_as_ciphertext(copy):
    ar = open_archive(copy)
    path = next(p for p in ar.paths() if p.endswith(".stk"))
    before = {p: ar.file_info(p).extra["checksum"] for p in ar.paths()}
    ar.stage(path, ar.read(path) + b"")  # identical bytes: no change at all
    assert not ar.dirty
    ar.stage(path, ar.read(path)[:-5])
    ar.save()
    again = open_archive(copy)
    changed = [p for p in again.paths() if again.file_info(p).extra["checksum"] != before[p]]
    assert changed == [path]


def test_add_and_delete_files(copy):
    ar = open_archive(copy)
    victim = next(p for p in ar.paths() if p.endswith(".mob"))
    ar.stage(victim, None)
    ar.stage("etc/NEW/readme.txt", "新檔案\r\n".encode("cp950"))
    report = ar.save_copy(copy.with_name("copy.pvf"))
    assert report.verified == 2
    assert ar.dirty and ar.exists("etc/new/readme.txt")  # save_copy keeps the overlay
    again = open_archive(copy.with_name("copy.pvf"))
    assert not again.exists(victim)
    assert again.read_text("etc/new/readme.txt") == "新檔案\r\n"
    hashes = [e["name_hash"] for e in again.raw_entries()]
    assert hashes == sorted(hashes)  # tree order by name hash (pvfUtility/pvf-parser-ts rule)


def test_save_copy_onto_itself_is_refused(copy):
    with pytest.raises(BridgeError) as err:
        open_archive(copy).save_copy(copy)
    assert err.value.code == "SAME_AS_SOURCE"


def test_compile_errors_are_typed_and_leave_nothing_staged(copy):
    ar = open_archive(copy)
    path = next(p for p in ar.paths() if p.endswith(".equ"))
    with pytest.raises(BridgeError) as err:
        ar.stage_text(path, "#PVF_File\n[name]\n\tbare words\n")
    assert err.value.code == "SCRIPT_SYNTAX" and err.value.data["line"] == 3
    assert not ar.dirty


def test_unencodable_text_is_an_encoding_mismatch(copy):
    ar = open_archive(copy, encoding="tw")
    with pytest.raises(BridgeError) as err:
        ar.stage_text("etc/new.str", "key>한국어\r\n")
    assert err.value.code == "ENCODING_MISMATCH"


def test_wrong_encoding_choice_is_a_warning_on_open_not_corruption(copy):
    before = copy.read_bytes()
    ar = open_archive(copy, encoding="kr")
    [warning] = ar.warnings  # recorded by open itself, from a sample of stringtable.bin
    assert warning.code == "ENCODING_MISMATCH" and warning.data["detected"] == "windows-950"
    assert warning.data["chosen"] == "cp949" and warning.data["sampledStrings"] > 100
    assert ar.encoding == "cp949"  # the user's choice stands; nothing is re-decoded behind their back
    assert ar.read(ar.paths()[0]) and not ar.dirty
    assert ar.check_encoding().message == warning.message and len(ar.warnings) == 1  # the full check agrees
    assert copy.read_bytes() == before


@pytest.mark.parametrize("encoding", [None, "tw"])
def test_a_fitting_or_detected_encoding_opens_without_warnings(copy, encoding):
    assert open_archive(copy, encoding=encoding).warnings == []


def test_real_packs_warn_about_the_other_chinese(tmp_path):
    data = Path(__file__).resolve().parents[3] / "../shared/data/pvf"
    if not (data / "pt_tw_shared.pvf").exists():
        pytest.skip(f"real sample archives not found under {data}")
    tw = open_archive(data / "pt_tw_shared.pvf", encoding="cn")
    cn = open_archive(data / "pt_cn_shared.pvf", encoding="tw")
    assert [w.data["detected"] for w in tw.warnings] == ["windows-950"]
    assert [w.data["detected"] for w in cn.warnings] == ["windows-936"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=400), st.integers(0, 2**32 - 1))
def test_a_damaged_stringtable_never_breaks_the_open_time_encoding_check(table, count):
    table = struct.pack("<I", count) + table if count % 3 else table  # sometimes a plausible count
    ar = open_archive(_archive([("stringtable.bin", table), ("a.equ", b"\xb0\xd0")]), encoding="kr")
    assert all(w.code == "ENCODING_MISMATCH" for w in ar.warnings)


def _archive(files) -> bytes:
    import io

    out = io.BytesIO()
    build_classic(out, files)
    return out.getvalue()


@pytest.mark.parametrize("cut", [0, 3, 10, 40, 56, 70])
def test_truncated_archives_give_pvf_corrupt_with_offset(cut):
    raw = _archive([("a/b.txt", b"hello"), ("c.txt", b"world!!")])
    with pytest.raises(BridgeError) as err:
        open_archive(raw[:cut]).read("a/b.txt")
    assert err.value.code in ("PVF_CORRUPT", "UNSUPPORTED_VARIANT")
    if err.value.code == "PVF_CORRUPT":
        assert "offset" in err.value.data


def test_hostile_sizes_are_refused_before_allocation():
    raw = bytearray(_archive([("a.txt", b"x" * 8)]))
    g = 36
    struct.pack_into("<i", raw, 8 + g, 0x7FFFFFF0)  # tree length 2 GB in a tiny file
    with pytest.raises(BridgeError) as err:
        open_archive(bytes(raw))
    assert err.value.code == "PVF_CORRUPT" and err.value.data["offset"] == 8 + g


def test_unknown_bytes_name_what_was_seen():
    with pytest.raises(BridgeError) as err:
        open_archive(b"PK\x03\x04" + bytes(60))
    assert err.value.code in ("UNSUPPORTED_VARIANT", "PVF_CORRUPT")
    assert "50 4b 03 04" in err.value.message or err.value.data


@pytest.mark.parametrize("delta", [b"", b"x", b"\0\0\0\0\0\0\0"])
def test_edit_fast_path_writes_exactly_what_the_general_writer_writes(copy, monkeypatch, delta):
    import io

    ar = open_archive(copy)
    paths = ar.paths()
    for p in (paths[3], paths[100], paths[-1]):
        ar.stage(p, ar.read(p)[:-2] + delta)
    fast = io.BytesIO()
    ar._write(fast, None)
    on_disk = copy.with_name("fast.pvf")
    with open(on_disk, "wb") as fh:
        fh.write(b"x")  # not at offset 0: the kernel copy must append where the writer stands
        ar._write(fh, None)  # into a file: the unchanged runs go through os.copy_file_range
    monkeypatch.setattr(type(ar), "_write_patched", lambda self, out, progress: False)
    general = io.BytesIO()
    ar._write(general, None)
    assert fast.getvalue() == general.getvalue()
    assert on_disk.read_bytes() == b"x" + general.getvalue()


def test_edit_fast_path_counts_every_written_block_in_its_progress(copy):
    import io

    ar = open_archive(copy)
    paths = ar.paths()
    for p in (paths[3], paths[100], paths[-1]):
        ar.stage(p, ar.read(p) + b"x")
    seen: list[tuple[int, int]] = []
    ar._write(io.BytesIO(), lambda done, total: seen.append((done, total)))
    assert ar._patched_layout is not None  # the edit-only path wrote it
    # After the k-th changed block, k of 3 are written: it used to say one fewer, and never reached 3 of 3.
    assert seen == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("growth", [b"", b"abcd", b"x" * 8, b"y" * 2052])
def test_an_edit_save_reports_the_identity_a_full_hash_of_the_written_file_gives(medium, tmp_path, growth):
    # The save's identity digest reuses the source's chunk digests for the blocks it copies, also when an
    # edit moved them by a few bytes (copied through a buffer) or by none (copied in the kernel).
    from deskbridge.core import files

    copy = tmp_path / "Script.pvf"
    copy.write_bytes(medium.read_bytes())
    files.file_identity(copy)  # as a workspace does on open: the source's chunks are known
    ar = open_archive(copy)
    first = ar.paths()[2]
    ar.stage(first, ar.read(first) + growth)
    out = tmp_path / "out.pvf"
    ar.save_copy(out)
    written = ar._last_written
    files._CHUNKS._items.clear()  # what a new process, knowing nothing, computes from the bytes
    assert written is not None and written == files.file_identity(out)
    assert written.sha256 == files.content_digest(out.read_bytes())


_records = st.lists(
    st.one_of(
        st.tuples(st.sampled_from([2, 3, 4, 9]), st.integers(0, 0xFFFFFFFF)),
        st.tuples(st.sampled_from([5, 6, 7, 8, 10]), st.integers(0, 12)),
        st.tuples(st.integers(0, 255), st.integers(0, 0xFFFFFFFF)),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(_records)
def test_any_token_stream_decompiles_and_compiles_back_byte_identical(records):
    from deskbridge.kinds.pvf.script import classic_codec
    from deskbridge.kinds.pvf.strings.stringtable import StringTable, build_stringtable

    entries = [
        b"[name]",
        b"[/name]",
        b"x",
        b"x",
        "劍".encode("cp950"),
        b"\xff\xff",
        b"a`b",
        b"k\r\ney",
        b"[bad\n]",
        b"",
        b"  ",
        b"key",
        b"[name]",
    ]
    table = StringTable.parse(build_stringtable(entries), "cp950")
    data = classic_codec.MAGIC + b"".join(struct.pack("<BI", t, v) for t, v in records)
    text = classic_codec.decompile(data, table, lambda i, k: "shown`text")
    assert classic_codec.compile_text(text, table) == data
    assert table.appended == 0


def test_two_saves_in_a_row_keep_both_edits_and_a_backup_of_the_previous(copy):
    ar = open_archive(copy)
    first, second = [p for p in ar.paths() if p.endswith(".skl")][:2]
    ar.stage_text(first, ar.read_text(first) + "\n[extra one]\n\t1\n")
    ar.save()
    after_first = copy.read_bytes()
    ar.stage_text(second, ar.read_text(second) + "\n[extra two]\n\t`二`\n")
    report = ar.save(backup=True)
    assert report.backup is not None and report.backup.read_bytes() == after_first
    again = open_archive(copy)
    assert "[extra one]" in again.read_text(first) and "`二`" in again.read_text(second)
    assert not ar.dirty and ar.read_text(second) == again.read_text(second)
