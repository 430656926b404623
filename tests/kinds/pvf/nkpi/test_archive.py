"""Opening every nkpi variant, editing, and saving: byte-identical no-op saves, dirty-chunk-only rewrites."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import content_digest
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi


def _open(path: Path):
    keys = Path(str(path) + ".keys.json")
    return open_nkpi(path, keys=keys if keys.exists() else None)


@pytest.mark.parametrize("variant", ["legacy", "guard", "protected", "paged"])
def test_each_variant_is_detected_and_readable(small_archives, variant):
    with _open(small_archives[variant]) as ar:
        assert ar.family == "nkpi"
        assert ar.variant == variant
        paths = ar.paths()
        assert len(paths) == 300
        assert paths[0] == "n_string.lst"
        text = ar.read_text(paths[1])
        assert text.startswith("[name]\n\t`")
        assert ar.text_to_payload(paths[1], text) == ar.read(paths[1])


def test_synth_is_deterministic(synth_dir):
    a, b = synth_dir / "det-a.pvf", synth_dir / "det-b.pvf"
    synth_nkpi(a, 120, 5, "legacy")
    synth_nkpi(b, 120, 5, "legacy")
    assert a.read_bytes() == b.read_bytes()


@pytest.mark.parametrize("variant", ["legacy", "paged"])
def test_noop_save_is_byte_identical(small_archives, tmp_path, variant):
    src = small_archives[variant]
    with _open(src) as ar:
        report = ar.save_copy(tmp_path / "out.pvf")
    assert report.byte_identical
    assert (tmp_path / "out.pvf").read_bytes() == src.read_bytes()


def _chunk_ciphers(ar) -> list[bytes]:
    return [ar._chunk_cipher(i) for i in range(len(ar.grpi))]


@pytest.mark.parametrize("variant", ["legacy", "protected", "paged"])
def test_one_file_edit_rewrites_only_its_chunk(small_archives, tmp_path, variant):
    src = tmp_path / "edit.pvf"
    shutil.copy(small_archives[variant], src)
    if variant == "paged":
        shutil.copy(str(small_archives[variant]) + ".keys.json", str(src) + ".keys.json")
    with _open(src) as ar:
        before = _chunk_ciphers(ar)
        target = ar.paths()[40]
        chunk = ar.file_info(target).extra["chunk"]
        text = ar.read_text(target).replace("[name]\n\t`", "[name]\n\t`Edited ", 1)
        ar.stage_text(target, text)
        expected = ar.read(target)
        report = ar.save(backup=True)
        assert report.changed == (target,) and report.verified == 1
        assert (
            report.backup is not None and report.backup.read_bytes() == small_archives[variant].read_bytes()
        )
        # The identity recorded for the next save is the hash of what is on disk (kernel copies included).
        assert ar._last_written.sha256 == content_digest(src.read_bytes())
    with _open(src) as again:
        assert again.read(target) == expected
        assert again.read_text(target).startswith("[name]\n\t`Edited ")
        after = _chunk_ciphers(again)
        assert len(after) == len(before)
        changed = [i for i, (x, y) in enumerate(zip(before, after, strict=True)) if x != y]
        assert changed == [chunk]


def test_new_files_go_to_one_appended_chunk_and_cjk_to_the_utf16_pool(small_archives, tmp_path):
    src = tmp_path / "add.pvf"
    shutil.copy(small_archives["legacy"], src)
    with open_nkpi(src) as ar:
        chunks = len(ar.grpi)
        size_w = ar.pools.size_w
        ar.stage_text("equipment/new/a.equ", "[name]\n`全新的剑`\n[grade]\n3\n")
        ar.stage_text("equipment/new/b.equ", "[name]\n`Brand New Sword`\n[attack speed]\n1.5\n")
        ar.stage_text("equipment/new/c.str", "name_1>全新\r\n\0\0")
        deleted = ar.paths()[10]
        ar.stage(deleted, None)
        ar.save()
        assert len(ar.grpi) == chunks + 1
        assert ar.pools.size_w > size_w  # the CJK string went to sTrW (PF CHANGELOG v0.5.0)
        info = [ar.file_info(f"equipment/new/{n}").extra for n in ("a.equ", "b.equ", "c.str")]
        assert {i["chunk"] for i in info} == {chunks}
        assert [i["data_type"] for i in info] == [1, 1, 3]
        assert not ar.exists(deleted)
        assert len(ar.paths()) == 302
        tok = ar.read("equipment/new/a.equ")
        assert ar.string(int.from_bytes(tok[6:10], "little", signed=True)) == "全新的剑"
        assert int.from_bytes(tok[6:10], "little") % 2 == 1  # odd magic offset = UTF-16 pool
        assert ar.read_text("equipment/new/c.str") == "name_1>全新\r\n\0\0"  # NUL padding kept


def test_existing_strings_are_reused(small_archives, tmp_path):
    src = tmp_path / "reuse.pvf"
    shutil.copy(small_archives["legacy"], src)
    with open_nkpi(src) as ar:
        ar.stage_text("etc/x.etc", "[name]\n[grade]\n`n_string.lst`\n")
        assert not ar.pools.dirty


def test_paged_archive_without_keys_asks_for_them(small_archives):
    with pytest.raises(BridgeError) as err:
        open_nkpi(small_archives["paged"])
    assert err.value.code is ErrorCode.KEY_REQUIRED


def test_paged_archive_with_wrong_keys_is_refused(small_archives):
    from deskbridge.kinds.pvf.archive.nkpi_paged import NkpiKeys

    with pytest.raises(BridgeError) as err:
        open_nkpi(small_archives["paged"], keys=NkpiKeys((bytes(32),)))
    assert err.value.code is ErrorCode.UNSUPPORTED_VARIANT


def test_read_is_case_insensitive_and_accepts_backslashes(small_archives):
    with open_nkpi(small_archives["legacy"]) as ar:
        p = ar.paths()[7]
        assert ar.read(p.upper().replace("/", "\\")) == ar.read(p)
        with pytest.raises(BridgeError) as err:
            ar.read("equipment/nope.equ")
        assert err.value.code is ErrorCode.NOT_FOUND


def test_a_repeated_path_resolves_to_its_first_entry(small_archives):
    from deskbridge.kinds.pvf.archive.base import norm_path
    from deskbridge.kinds.pvf.archive.nkpi_index import PathIndex

    with open_nkpi(small_archives["legacy"]) as ar:
        files = ar.files.copy()
        key = norm_path(ar.paths()[150])
        files["name"][40:260] = files["name"][150]  # 220 entries share one path: a long run of equal hashes
        files["path"][40:260] = files["path"][150]
        index = PathIndex(files, ar.pools)
        assert index.find(key) == 40
        assert index.shadowed() == set(range(41, 260))
        assert index.find(norm_path(ar.paths()[30])) == 30  # the others still resolve


@pytest.mark.parametrize("variant", ["legacy", "protected"])
def test_every_synthetic_file_round_trips_through_text(small_archives, variant):
    with _open(small_archives[variant]) as ar:
        for p in ar.paths():
            assert ar.text_to_payload(p, ar.read_text(p)) == ar.read(p), p
        assert not ar.pools.dirty


def test_open_archive_dispatches_to_nkpi_with_keys(nkpi_vectors, small_archives):
    from deskbridge.kinds.pvf.archive import open_archive

    for path, _ in nkpi_vectors:
        with open_archive(path) as ar:
            assert ar.family == "nkpi"
    paged = small_archives["paged"]
    with open_archive(paged, keys=str(paged) + ".keys.json") as ar:
        assert ar.variant == "paged"
        assert len(ar.paths()) == 300


@pytest.mark.parametrize("variant", ["legacy", "paged"])
def test_non_ascii_and_mixed_case_paths_list_and_resolve(small_archives, tmp_path, variant):
    src = tmp_path / "names.pvf"
    shutil.copy(small_archives[variant], src)
    if variant == "paged":
        shutil.copy(str(small_archives[variant]) + ".keys.json", str(src) + ".keys.json")
    with _open(src) as ar:
        ar.stage_text("equipment/新しい/Item_Ä.equ", "[name]\n`x`\n")
        ar.stage_text("Equipment/UPPER/Case.EQU", "[name]\n`y`\n")
        ar.save()
    with _open(src) as again:
        paths = again.paths()
        # stored in the one normalised form (kinds/pvf/paths.py), looked up in any case
        assert paths[-2:] == ["equipment/新しい/item_ä.equ", "equipment/upper/case.equ"]
        assert again.read_text("EQUIPMENT/新しい/item_ä.equ") == "[name]\n\t`x`\n"
        assert again.read_text("equipment/upper/case.equ") == "[name]\n\t`y`\n"
        assert len(paths) == 302


def test_save_reports_progress_up_to_the_written_size(small_archives, tmp_path):
    with _open(small_archives["legacy"]) as ar:
        calls: list[tuple[int, int]] = []
        ar.stage_text(ar.paths()[4], "[name]\n`p`\n")
        report = ar.save_copy(tmp_path / "p.pvf", progress=lambda d, t: calls.append((d, t)))
    assert calls and calls[-1][0] == calls[-1][1] == report.bytes_written
    assert all(a[0] <= b[0] for a, b in itertools.pairwise(calls))


def test_a_staged_script_edit_keeps_the_entrys_kind(small_archives):
    # A compiled nkpi script has no magic bytes: the staged payload must not turn the file into "binary"
    # (a second .pvf.js run on a file an applied plan had changed refused `setText` as binary).
    with _open(small_archives["legacy"]) as ar:
        path = ar.paths()[1]
        assert ar.file_info(path).kind == "script"
        ar.stage(path, ar.text_to_payload(path, ar.read_text(path) + "\n[x]\n`y`\n"))
        info = ar.file_info(path)
        assert info.staged and info.kind == "script"
        assert ar.read_text(path).endswith("`y`\n")


def test_keystream_word_at_is_the_word_of_the_whole_keystream():
    from deskbridge.kinds.pvf.archive.nkpi_cipher import (
        MAGIC_DATA,
        MAGIC_POOL,
        keystream_word_at,
        keystream_words,
    )

    for seed in (0, 12345, 0xDEADBEEF):
        for magic in (MAGIC_DATA, MAGIC_POOL):
            words = keystream_words(seed, 140_000, magic)
            for k in (0, 1, 2, 65_535, 65_536, 65_537, 131_071, 139_999):
                assert keystream_word_at(seed, k, magic) == int(words[k])


@pytest.mark.parametrize("variant", ["legacy", "guard", "protected", "paged"])
def test_open_reads_two_words_of_the_hash_table_not_all_of_it(small_archives, variant, monkeypatch):
    """Opening confirms the hash table's key from its two size words (nothing reads the rest until a save
    writes a new table); damaged tables are still refused (`test_hostile`: the whole table is then read)."""
    from deskbridge.kinds.pvf.archive import nkpi

    reads: list[tuple[int, int]] = []
    real = nkpi._Source.read
    monkeypatch.setattr(nkpi._Source, "read", lambda self, at, n: reads.append((at, n)) or real(self, at, n))
    with _open(small_archives[variant]) as ar:
        h = ar.header
        assert (h.hash_table_offset, h.hash_table_size) not in reads
        assert ar.read(ar.paths()[7]) == ar.read_entry(ar._entry(norm_path(ar.paths()[7])))
