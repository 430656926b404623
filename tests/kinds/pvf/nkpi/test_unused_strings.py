"""A save writes no pool string that nothing refers to: strings a discarded change compiled into the pools
are left out of the name table, and the strings kept after them are renumbered consistently (issue 9)."""

from __future__ import annotations

import shutil

import pytest

from deskbridge.kinds.pvf.archive.nkpi import open_nkpi


def _scripts(ar) -> list[str]:
    return [p for p in ar.paths() if p.endswith(".equ")][:3]


def _pool_texts(ar) -> list[str]:
    return [ar.pools.resolve(off) for off in ar.pools.added()]


def _all_pool_text(path) -> str:
    with open_nkpi(path) as ar:
        return ar.pools.raw_a().decode("utf-8", "replace") + ar.pools.raw_w().decode("utf-16-le", "replace")


@pytest.mark.parametrize("kept_text", ["kept ascii string", "保留的字符串"])
def test_strings_of_a_discarded_change_are_not_written(small_archives, tmp_path, kept_text):
    src = tmp_path / "gc.pvf"
    shutil.copy(small_archives["legacy"], src)
    with open_nkpi(src) as ar:
        first, second, third = _scripts(ar)
        # a change compiled, then discarded (what a discarded plan leaves behind) — before the kept one,
        # so the kept strings move down when the unused ones are left out
        ar.stage_text(first, ar.read_text(first).replace("[name2]", "[name2]\n\t`discarded 丢弃的`", 1))
        ar.discard(first)
        text = ar.read_text(second).replace("[name2]", f"[name2]\n\t`{kept_text}`", 1)
        ar.stage_text(second, text)
        ar.stage_text(third, ar.read_text(third).replace("[name2]", "[name2]\n\t`also discarded`", 1))
        ar.discard(third)
        ar.stage(
            "equipment/new/gc.equ", ar.text_to_payload("equipment/new/gc.equ", f"[name]\n`{kept_text}`\n")
        )
        assert {"discarded 丢弃的", "also discarded", kept_text} <= set(_pool_texts(ar))
        report = ar.save()
        assert report.verified == 2
        assert _pool_texts(ar) == []  # re-bound: the pools are the written ones
        assert kept_text in ar.read_text(second)
    on_disk = _all_pool_text(src)
    assert "discarded" not in on_disk and "丢弃的" not in on_disk and kept_text in on_disk
    with open_nkpi(src) as again:
        assert again.read_text(second) == text
        assert f"`{kept_text}`" in again.read_text("equipment/new/gc.equ")
        assert "gc.equ" in {p.rsplit("/", 1)[-1] for p in again.paths()}


def test_a_save_whose_added_strings_are_all_unused_keeps_the_name_table(small_archives, tmp_path):
    src = tmp_path / "gc2.pvf"
    shutil.copy(small_archives["legacy"], src)
    with open_nkpi(src) as ar:
        first, second, _ = _scripts(ar)
        table_before = ar._src.read(ar.header.name_table_offset, ar.header.name_table_size)
        ar.stage_text(first, ar.read_text(first).replace("[name2]", "[name2]\n\t`never saved`", 1))
        ar.discard(first)
        ar.stage(second, b"\x00\x05\x00\x00\x00")  # one int token: a change that refers to no string
        ar.save()
    with open_nkpi(src) as again:
        assert again._src.read(again.header.name_table_offset, again.header.name_table_size) == table_before
        assert again.read(second) == b"\x00\x05\x00\x00\x00"


def test_a_discarded_change_alone_saves_byte_identical(small_archives, tmp_path):
    src = tmp_path / "gc3.pvf"
    shutil.copy(small_archives["legacy"], src)
    before = src.read_bytes()
    with open_nkpi(src) as ar:
        first = _scripts(ar)[0]
        ar.stage_text(first, ar.read_text(first).replace("[name2]", "[name2]\n\t`never saved`", 1))
        ar.discard()
        assert ar.save().byte_identical
    assert src.read_bytes() == before
