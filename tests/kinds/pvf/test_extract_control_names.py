"""`pvf extract` of an archive naming files with control characters (`\\x01`, a newline, ESC): refused before
anything is written, the name shown escaped; never written to disk, into a new folder or over one (--force)."""

from __future__ import annotations

import pytest
from hostile import with_names
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.kinds.pvf.archive import open_archive

runner = CliRunner()


def _crafted(small_classic, tmp_path, name):
    path = with_names(small_classic, tmp_path / "crafted.pvf", {name: b"hello\n"})
    assert name in open_archive(path).paths()
    return path


@pytest.mark.security
@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("etc/bad\x01name.txt", "etc/bad\\x01name.txt"),
        ("etc/two\nlines.txt", "etc/two\\x0alines.txt"),
        ("etc/\x1b[31mred.txt", "etc/\\x1b[31mred.txt"),
    ],
)
def test_extract_refuses_a_file_name_with_a_control_character(small_classic, tmp_path, name, shown):
    crafted = _crafted(small_classic, tmp_path, name)
    out = tmp_path / "tree"
    res = runner.invoke(app, ["pvf", "extract", str(crafted), "-o", str(out), "-q"])
    assert res.exit_code != 0
    assert "holds a control character" in res.output and "nothing was written" in res.output
    assert shown in res.output and name not in res.output  # escaped, never printed raw
    assert not out.exists()


@pytest.mark.security
def test_extract_over_a_folder_refuses_before_writing_anything(small_classic, tmp_path):
    crafted = _crafted(small_classic, tmp_path, "equipment/a\x01b.equ")
    out = tmp_path / "tree"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    res = runner.invoke(app, ["pvf", "extract", str(crafted), "-o", str(out), "--force", "-q"])
    assert res.exit_code != 0 and "holds a control character" in res.output
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


def test_extract_help_says_such_names_are_refused():
    res = runner.invoke(app, ["pvf", "extract", "--help"], terminal_width=200)
    assert "control character" in res.output and "refused" in res.output
