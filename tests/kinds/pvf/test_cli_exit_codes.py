"""`verify`, `extract` and `pack` say what is wrong and exit non-zero: damage they find is never an exit 0."""

from __future__ import annotations

import io
import json

from hostile import with_names
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import build_classic

runner = CliRunner()


def _flip(path, offset, into):
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    into.write_bytes(bytes(data))
    return into


def test_verify_exits_1_on_a_checksum_failure_and_names_the_file(small_classic, tmp_path):
    ar = open_archive(small_classic)
    at = ar.header.data_start + ar.file_info("stringtable.bin").extra["offset"] + 6
    bad = _flip(small_classic, at, tmp_path / "bad.pvf")
    res = runner.invoke(app, ["pvf", "verify", str(bad)])
    assert res.exit_code == 1, res.output
    assert (
        "checksum: stringtable.bin" in res.output and "verify: " in res.output and "1 checksum" in res.output
    )


def test_verify_exits_1_on_a_tree_checksum_mismatch(small_classic, tmp_path):
    ar = open_archive(small_classic)
    tree_at = ar.header.data_start - ar.header.tree_len
    bad = _flip(
        small_classic, tree_at + 12, tmp_path / "tree.pvf"
    )  # inside the first path: parses, crc differs
    res = runner.invoke(app, ["pvf", "verify", str(bad)])
    assert res.exit_code == 1, res.output
    assert "structural" in res.output and "tree checksum" in res.output


def test_verify_and_extract_report_a_script_that_does_not_convert(tmp_path):
    out = io.BytesIO()
    build_classic(
        out, [("good.equ", b"\xb0\xd0" + bytes([2, 5, 0, 0, 0])), ("bad.equ", b"\xb0\xd0\x02\x01\x00")]
    )
    path = tmp_path / "cut.pvf"
    path.write_bytes(out.getvalue())
    res = runner.invoke(app, ["pvf", "verify", str(path)])
    assert res.exit_code == 1 and "conversion: bad.equ: PVF_CORRUPT" in res.output, res.output
    res = runner.invoke(app, ["pvf", "extract", str(path), "-o", str(tmp_path / "tree")])
    assert res.exit_code == 1, res.output
    assert "raw: bad.equ: PVF_CORRUPT" in res.output and "1 scripts could not be converted" in res.output
    assert (tmp_path / "tree" / "bad.equ").read_bytes() == b"\xb0\xd0\x02\x01\x00"


def test_verify_of_an_undamaged_archive_exits_0(small_classic):
    res = runner.invoke(app, ["pvf", "verify", str(small_classic)])
    assert res.exit_code == 0 and "verify: no problems" in res.output, res.output


def test_extract_refuses_a_non_empty_folder_unless_forced(small_classic, tmp_path):
    target = tmp_path / "tree"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    res = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(target)])
    assert res.exit_code == 2 and "TARGET_EXISTS" in res.output and "--force" in res.output
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]
    res = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(target), "--force"])
    assert res.exit_code == 0, res.output
    assert (target / "notes.txt").read_text() == "mine" and (target / "stringtable.bin").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(empty)]).exit_code == 0
    assert (empty / "n_string.lst").exists()


def test_pack_refuses_a_tree_whose_links_lost_n_string_lst(small_classic, tmp_path):
    tree = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(tree)]).exit_code == 0
    (tree / "n_string.lst").unlink()
    out = tmp_path / "out.pvf"
    res = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert "NOT_FOUND: n_string.lst is missing from the tree" in res.output and "string links" in res.output
    assert not out.exists()


def test_pack_warns_when_n_string_lst_points_at_a_missing_str_file(small_classic, tmp_path):
    tree = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(tree)]).exit_code == 0
    (tree / "equipment" / "equipment.chn.str").unlink()  # table 0, used by every .equ name link
    res = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(tmp_path / "out.pvf")])
    assert res.exit_code == 0, res.output
    assert "warning: n_string.lst maps table" in res.output and "not in the tree" in res.output


def test_a_missing_archive_says_to_check_its_path(tmp_path):
    # The hint was NOT_FOUND's generic "list or search first to get a valid name or id".
    res = runner.invoke(app, ["pvf", "info", str(tmp_path / "Scirpt.pvf")])
    assert res.exit_code == 2
    assert "no archive file" in res.output and "Check the path of the .pvf file" in res.output, res.output
    assert "list or search" not in res.output


def test_names_with_terminal_escapes_are_printed_escaped(small_classic, tmp_path):
    """A hostile archive's file name `ESC ] 0 ; … BEL` retitled the terminal when `pvf ls` printed it (other
    sequences clear it or write the clipboard)."""
    evil = "npc/evil\x1b]0;pwned\x07\x1b[2j.npc"
    hostile = with_names(small_classic, tmp_path / "hostile.pvf", {evil: b""})
    listing = runner.invoke(app, ["pvf", "ls", str(hostile), "npc/"])
    assert listing.exit_code == 0, listing.output
    assert not {"\x1b", "\x07"} & set(listing.output)
    assert "npc/evil\\x1b]0;pwned\\x07\\x1b[2j.npc" in listing.output
    missing = runner.invoke(app, ["pvf", "cat", str(hostile), "npc/evil\x1b[2J"])
    assert missing.exit_code == 2 and "\x1b" not in missing.output, missing.output
    # the JSON listing keeps the real name (JSON escapes control characters itself)
    assert evil.lower() in {
        r["path"] for r in json.loads(runner.invoke(app, ["pvf", "ls", str(hostile), "--json"]).output)
    }
    # and the history of a change to it (`pvf log`)
    removed = runner.invoke(app, ["pvf", "rm", str(hostile), evil])
    assert removed.exit_code == 0 and "\x1b" not in removed.output, removed.output
    log = runner.invoke(app, ["pvf", "log", str(hostile)])
    assert "delete" in log.output and "\x1b" not in log.output, log.output
