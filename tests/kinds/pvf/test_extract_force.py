"""`pvf extract --force` over an existing folder: links planted there are not followed, and an extraction
that stops part way is marked so that `pvf pack` refuses it instead of building a partial archive."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import make_dirs
from deskbridge.kinds.pvf import tree
from deskbridge.kinds.pvf.archive import open_archive

runner = CliRunner()


def _existing(tmp_path):
    folder = tmp_path / "tree"
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    return folder


@pytest.mark.security
def test_force_extract_does_not_write_through_a_planted_folder_link(small_classic, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    folder = _existing(tmp_path)
    top = sorted({p.split("/")[0] for p in open_archive(small_classic).paths() if "/" in p})[0]
    (folder / top).symlink_to(outside, target_is_directory=True)
    result = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "--force", "-q"])
    assert result.exit_code == 2, result.output
    assert "ACCESS_DENIED" in result.output
    assert list(outside.rglob("*")) == []
    # It says what is on disk: part of the tree, marked incomplete (it said "nothing was written").
    assert "nothing was written" not in result.output and "incomplete" in result.output, result.output
    assert json.loads((folder / tree.MANIFEST).read_text())["incomplete"] is True


@pytest.mark.security
def test_force_extract_does_not_write_through_a_planted_file_link(small_classic, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("keep me\n")
    folder = _existing(tmp_path)
    (folder / "n_string.lst").symlink_to(secret)
    result = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "--force", "-q"])
    assert result.exit_code == 2, result.output
    assert secret.read_text() == "keep me\n"


@pytest.mark.security
def test_make_dirs_refuses_a_link_below_the_root(tmp_path):
    root = tmp_path / "root"
    (root / "a").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    (root / "a" / "b").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.raises(BridgeError) as err:
        make_dirs(root / "a" / "b" / "c", root=root)
    assert err.value.code == ErrorCode.ACCESS_DENIED
    assert not (tmp_path / "elsewhere" / "c").exists()
    make_dirs(root / "x" / "y", root=root)
    assert (root / "x" / "y").is_dir()
    with pytest.raises(BridgeError):
        make_dirs(tmp_path / "elsewhere" / "z", root=root)


def _interrupt_after_first_file(monkeypatch):
    real = tree.extract_tree

    def stopping(ar, out, **kw):
        def first(done, total):  # called after the first file: stop there
            raise KeyboardInterrupt

        kw["progress"] = first
        return real(ar, out, **kw)

    monkeypatch.setattr(tree, "extract_tree", stopping)


def test_interrupted_force_extract_is_marked_and_pack_refuses_it(small_classic, tmp_path, monkeypatch):
    folder = _existing(tmp_path)
    _interrupt_after_first_file(monkeypatch)
    result = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "--force", "-q"])
    assert result.exit_code == 130, result.output
    assert "partial extraction" in result.output
    assert json.loads((folder / tree.MANIFEST).read_text())["incomplete"] is True
    packed = runner.invoke(app, ["pvf", "pack", str(folder), "-o", str(tmp_path / "out.pvf")])
    assert packed.exit_code == 2, packed.output
    assert "did not finish" in packed.output
    assert not (tmp_path / "out.pvf").exists()
    # finishing the extraction clears the mark, and the tree packs back to the same bytes
    monkeypatch.undo()
    again = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "--force", "-q"])
    assert again.exit_code == 0, again.output
    (folder / "notes.txt").unlink()
    packed = runner.invoke(
        app, ["pvf", "pack", str(folder), "-o", str(tmp_path / "out.pvf"), "--like", str(small_classic)]
    )
    assert packed.exit_code == 0, packed.output
    assert (tmp_path / "out.pvf").read_bytes() == small_classic.read_bytes()


def test_interrupted_fresh_extract_leaves_nothing(small_classic, tmp_path, monkeypatch):
    _interrupt_after_first_file(monkeypatch)
    target = tmp_path / "new"
    result = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(target), "-q"])
    assert result.exit_code == 130, result.output
    assert "nothing was written" in result.output
    assert not target.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_interrupted_extract_into_an_empty_folder_leaves_that_folder_as_it_was(
    small_classic, tmp_path, monkeypatch
):
    # The empty folder is taken away so the whole tree can appear in its place; a Ctrl-C removed it for good.
    _interrupt_after_first_file(monkeypatch)
    target = tmp_path / "mine"
    target.mkdir(mode=0o750)
    os.chmod(target, 0o750)
    result = runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(target), "-q"])
    assert result.exit_code == 130, result.output
    assert "nothing was written" in result.output and "still the empty folder" in result.output
    assert target.is_dir() and list(target.iterdir()) == []
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["mine"]


@pytest.mark.security
@pytest.mark.parametrize("kind", ["file", "folder"])
def test_pack_refuses_a_link_in_the_tree(small_classic, tmp_path, kind):
    folder = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "-q"]).exit_code == 0
    secret = tmp_path / "secret"
    if kind == "file":
        secret.write_text("TOPSECRET\n")
        (folder / "stolen.txt").symlink_to(secret)
    else:
        (secret / "sub").mkdir(parents=True)
        (secret / "sub" / "x.txt").write_text("TOPSECRET\n")
        (folder / "linked").symlink_to(secret, target_is_directory=True)
    out = tmp_path / "out.pvf"
    result = runner.invoke(app, ["pvf", "pack", str(folder), "-o", str(out), "--like", str(small_classic)])
    assert result.exit_code == 2, result.output
    assert "symbolic link" in result.output
    assert not out.exists()


@pytest.mark.security
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="POSIX FIFOs")
def test_pack_refuses_a_fifo_in_the_tree_instead_of_hanging(small_classic, tmp_path):
    folder = tmp_path / "tree"
    assert runner.invoke(app, ["pvf", "extract", str(small_classic), "-o", str(folder), "-q"]).exit_code == 0
    os.mkfifo(folder / "equipment.lst.fifo")
    out = tmp_path / "out.pvf"
    cmd = [
        sys.executable,
        "-m",
        "deskbridge",
        "pvf",
        "pack",
        str(folder),
        "-o",
        str(out),
        "--like",
        str(small_classic),
    ]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120
    )  # a read of the FIFO never returns
    assert done.returncode == 2, done.stderr
    assert "ACCESS_DENIED" in done.stderr and "equipment.lst.fifo" in done.stderr
    assert not out.exists()
