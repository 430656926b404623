"""Messages that say what was found, where and what to do; string links that never fail silently; synthetic
packs in all five encodings; stale temp files of a killed save cleaned on the next open."""

from __future__ import annotations

import os
import re
import time
import zipfile

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.strings.encodings import resolve_encoding
from deskbridge.kinds.pvf.synth.classic import synth_classic

runner = CliRunner()


@pytest.fixture
def tw(tmp_path):
    path = tmp_path / "Script.pvf"
    synth_classic(path, 80, seed=9)
    return path


def _linked(ar):
    for p in ar.paths():
        if p.endswith(".equ"):
            text = ar.read_text(p)
            m = re.search(r"<(\d+)::(name_\d+)`([^`]*)`>", text)
            if m:
                return p, text, m
    raise AssertionError("no linked script")


def test_editing_a_link_text_updates_its_str_entry(tw, tmp_path):
    ar = open_archive(tw)
    path, text, m = _linked(ar)
    ar.stage_text(path, text.replace(m.group(0), f"<{m.group(1)}::{m.group(2)}`新的名字`>"))
    staged = {p.lower() for p in ar.staged()}
    assert "equipment/equipment.chn.str" in staged
    ar.save()
    again = open_archive(tw)
    assert f"<{m.group(1)}::{m.group(2)}`新的名字`>" in again.read_text(path)
    assert f"{m.group(2)}>新的名字" in again.read_text("equipment/equipment.chn.str")


def test_two_texts_for_one_link_key_are_refused(tw):
    ar = open_archive(tw)
    path, text, m = _linked(ar)
    link = m.group(0)
    twice = text.replace(link, f"<{m.group(1)}::{m.group(2)}`甲`>\n\t<{m.group(1)}::{m.group(2)}`乙`>")
    with pytest.raises(BridgeError) as err:
        ar.stage_text(path, twice)
    assert err.value.code == ErrorCode.UNSUPPORTED_CHANGE and not ar.staged()


def test_verify_and_pack_warn_about_missing_and_duplicate_keys(tw, tmp_path):
    ar = open_archive(tw)
    _path, _text, m = _linked(ar)
    strs = ar.read_text("equipment/equipment.chn.str")
    lines = [ln for ln in strs.split("\r\n") if not ln.startswith(m.group(2) + ">")]
    lines.insert(1, "name_dup>a")
    lines.insert(2, "name_dup>b")
    ar.stage_text("equipment/equipment.chn.str", "\r\n".join(lines))
    ar.save()
    res = runner.invoke(app, ["pvf", "verify", str(tw)])
    assert res.exit_code == 0, res.output  # warnings, not problems
    assert f"warning: link: <{m.group(1)}::{m.group(2)}> resolves to nothing" in res.output
    assert "duplicate key in Equipment/Equipment.chn.str: name_dup" in res.output
    tree = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(tw), "-o", str(tree)]).exit_code == 0
    res = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(tmp_path / "out.pvf")])
    assert res.exit_code == 0, res.output
    assert f"<{m.group(1)}::{m.group(2)}> has no entry in" in res.output and "name_dup" in res.output


def test_a_random_file_is_not_a_pvf_and_does_not_ask_for_keys(tmp_path):
    junk = tmp_path / "random.bin"
    junk.write_bytes(os.urandom(1 << 20))
    with pytest.raises(BridgeError) as err:
        open_archive(junk)
    assert err.value.code == ErrorCode.UNSUPPORTED_VARIANT and "not a PVF archive" in err.value.message
    z = tmp_path / "mod.zip"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("a.txt", "x" * 20000)
    with pytest.raises(BridgeError) as err:
        open_archive(z)
    assert "looks like a ZIP archive" in err.value.message
    named = tmp_path / "Script.pvf"  # the name says it may be a paged 110US archive: ask, but say both
    named.write_bytes(os.urandom(1 << 20))
    with pytest.raises(BridgeError) as err:
        open_archive(named)
    assert (
        err.value.code == ErrorCode.KEY_REQUIRED
        and "If it is not one, it is not a PVF archive" in err.value.message
    )


def test_a_classic_archive_with_a_flipped_guid_byte_opens_and_verify_says_where(tw, tmp_path):
    data = bytearray(tw.read_bytes())
    data[10] = 0x01
    bad = tmp_path / "guid.pvf"
    bad.write_bytes(bytes(data))
    ar = open_archive(bad)
    assert ar.family == "classic" and ar.warnings[0].data["offset"] == 10
    assert "GUID byte 0x01 is not ASCII" in ar.warnings[0].message
    res = runner.invoke(app, ["pvf", "verify", str(bad)])
    assert res.exit_code == 1 and "classic header damaged at offset 10" in res.output


def test_extract_with_the_wrong_encoding_warns(tw, tmp_path):
    res = runner.invoke(app, ["pvf", "extract", str(tw), "-e", "cn", "-o", str(tmp_path / "t")])
    assert "warning: ENCODING_MISMATCH" in res.output and "look like windows-950" in res.output


@pytest.mark.parametrize("encoding", ["tw", "cn", "kr", "jp", "gb18030", "utf8"])
def test_synth_writes_text_each_encoding_can_hold(encoding, tmp_path):
    path = tmp_path / f"{encoding}.pvf"
    res = runner.invoke(app, ["pvf", "synth", "-e", encoding, "--files", "120", "-o", str(path)])
    assert res.exit_code == 0, res.output
    ar = open_archive(path)
    assert ar.encoding == resolve_encoding(encoding)  # detected back from stringtable.bin
    assert runner.invoke(app, ["pvf", "verify", str(path)]).exit_code == 0


def test_stale_temps_of_a_killed_save_go_on_the_next_open_and_nothing_else(tw):
    folder = tw.parent
    old = folder / ".deskbridge-tmp-Script.pvf-0123456789ab"
    fresh = folder / ".deskbridge-tmp-Script.pvf-ba9876543210"
    foreign = folder / "Script.pvf.tmp-saving"
    for f in (old, fresh, foreign):
        f.write_bytes(b"partial")
    hours_ago = time.time() - 2 * 3600
    for f in (old, foreign):
        os.utime(f, (hours_ago, hours_ago))
    open_archive(tw).close()
    assert not old.exists() and fresh.exists() and foreign.exists()


def test_warmed_string_tables_compile_the_same_and_a_stage_meanwhile_wins(tw):
    """`ClassicStrings.warm` (a script run reads the compile's tables while its script runs) installs tables
    equal to the ones a compile reads itself, and none read before a stage of the same files."""
    import threading

    from deskbridge.kinds.pvf.archive.classic_text import STRINGTABLE

    cold = open_archive(tw)
    warm = open_archive(tw)
    try:
        p, text, _link = _linked(cold)
        lock = threading.Lock()
        warm.strings.warm(lock)
        assert warm.strings._table is not None and warm.strings._nstring is not None
        assert warm.strings._str_cache  # the .str files n_string.lst names
        new = text.replace("[", "[x", 1) + "\n`a string the table lacks`\n"
        assert warm.text_to_payload(p, new) == cold.text_to_payload(p, new)
        assert warm.read(STRINGTABLE) == cold.read(STRINGTABLE)  # the same grown table, staged
        assert warm.read_text(p) == cold.read_text(p)

        class StagingLock:
            """Stages a grown string table while the warm-up builds its tables outside the lock."""

            entered = 0

            def __enter__(self):
                lock.acquire()

            def __exit__(self, *exc):
                StagingLock.entered += 1
                if StagingLock.entered == 1:
                    late.stage(STRINGTABLE, grown)
                lock.release()

        late = open_archive(tw)
        try:
            grown = cold.read(STRINGTABLE)  # has the string cold's compile appended
            late.strings.warm(StagingLock())
            assert StagingLock.entered >= 2
            assert late.strings.table.index_of("a string the table lacks") is not None
        finally:
            late.close()
    finally:
        cold.close()
        warm.close()


def test_a_file_shorter_than_any_header_says_it_is_no_archive_and_what_to_check(tmp_path):
    # The code's general hint spoke of "the offset given" for a 3-byte file: the fix is the path, not an offset.
    tiny = tmp_path / "Script.pvf"
    tiny.write_bytes(b"abc")
    with pytest.raises(BridgeError) as err:
        open_archive(tiny)
    assert err.value.code == ErrorCode.PVF_CORRUPT and "3 bytes" in err.value.message
    assert "not a PVF archive" in err.value.hint and "check the path" in err.value.hint
    assert "offset given" not in err.value.hint
