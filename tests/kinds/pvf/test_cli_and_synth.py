"""`deskbridge pvf` commands on a synthetic archive, and the synthetic corpus round trip (PVF-ROUNDTRIP)."""

from __future__ import annotations

import hashlib
import json

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.synth.classic import synth_classic
from deskbridge.kinds.pvf.tree import verify_archive

runner = CliRunner()


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli") / "small.pvf"
    result = runner.invoke(
        app, ["pvf", "synth", "--family", "classic", "--files", "400", "--seed", "3", "-o", str(path)]
    )
    assert result.exit_code == 0, result.output
    return path


def test_synth_is_deterministic(tmp_path, small):
    other = tmp_path / "again.pvf"
    synth_classic(other, 400, seed=3)
    assert other.read_bytes() == small.read_bytes()
    synth_classic(tmp_path / "seed4.pvf", 400, seed=4)
    assert (tmp_path / "seed4.pvf").read_bytes() != small.read_bytes()


def test_synthetic_corpus_round_trips_byte_identical(small):
    ar = open_archive(small)
    assert len(ar.paths()) == 400
    folders = {p.split("/")[0] for p in ar.paths()}
    assert {"equipment", "skill", "stackable", "monster", "dungeon", "npc", "etc"} <= folders
    report = verify_archive(ar)
    assert report["unreadable"] == [] and report["roundtrip"] == [] and report["checksum"] == []
    assert report["scripts"] > 350 and report["binary"] == 0


def test_info_and_ls_json(small):
    info = json.loads(runner.invoke(app, ["pvf", "info", str(small), "--json"]).output)
    assert info["family"] == "classic" and info["encoding"] == "windows-950" and info["files"] == 400
    rows = json.loads(runner.invoke(app, ["pvf", "ls", str(small), "skill/", "--json"]).output)
    assert rows and all(r["path"].startswith("skill/") for r in rows)


def test_info_prints_the_encoding_mismatch_found_on_open(small):
    result = runner.invoke(app, ["pvf", "info", str(small), "--encoding", "kr"])
    assert result.exit_code == 0, result.output
    assert "encoding: cp949" in result.output
    assert (
        "warning: ENCODING_MISMATCH: strings read poorly as cp949; they look like windows-950"
        in result.output
    )


def test_cat_prints_text_with_links(small):
    ar = open_archive(small)
    path = next(p for p in ar.paths() if p.endswith(".equ"))
    out = runner.invoke(app, ["pvf", "cat", str(small), path]).output
    assert out.startswith("#PVF_File") and "<0::name_" in out


def test_extract_pack_extract_keeps_every_payload(small, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    packed = tmp_path / "packed.pvf"
    assert runner.invoke(app, ["pvf", "extract", str(small), "-o", str(a)]).exit_code == 0
    assert runner.invoke(app, ["pvf", "pack", str(a), "-o", str(packed), "--like", str(small)]).exit_code == 0
    assert packed.read_bytes() == small.read_bytes()
    assert runner.invoke(app, ["pvf", "extract", str(packed), "-o", str(b)]).exit_code == 0
    orig, again = open_archive(small), open_archive(packed)
    assert {p: hashlib.sha256(orig.read(p)).digest() for p in orig.paths()} == {
        p: hashlib.sha256(again.read(p)).digest() for p in again.paths()
    }


def test_pack_compiles_an_edited_tree(small, tmp_path):
    tree = tmp_path / "t"
    runner.invoke(app, ["pvf", "extract", str(small), "-o", str(tree)])
    target = next(tree.glob("stackable/**/*.stk"))
    target.write_text(target.read_text("utf-8") + "\n[new section]\n\t`新的字串`\t1.25\n", "utf-8")
    out = tmp_path / "edited.pvf"
    result = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = open_archive(out).read_text(target.relative_to(tree).as_posix())
    assert "[new section]\n\t`新的字串`\t1.25\n" in text


def test_errors_are_reported_with_code_and_hint(tmp_path):
    bad = tmp_path / "bad.pvf"
    bad.write_bytes(b"\x24\0\0\0" + b"0" * 36 + b"\0" * 4)
    result = runner.invoke(app, ["pvf", "info", str(bad)])
    assert result.exit_code == 2
    assert "PVF_CORRUPT" in result.output and "help:" in result.output


def test_nkpi_tree_packs_onto_its_like_archive(tmp_path):
    from pathlib import Path

    vector = Path(__file__).resolve().parents[3] / "../shared/data/pvf/vs_jp_shared.pvf"
    if not vector.is_file():
        pytest.skip(f"interop vector not found: {vector}")
    tree, out = tmp_path / "tree", tmp_path / "packed.pvf"
    assert runner.invoke(app, ["pvf", "extract", str(vector), "-o", str(tree)]).exit_code == 0
    assert runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)]).exit_code == 2  # nkpi needs --like
    assert (
        runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out), "--like", str(vector)]).exit_code == 0
    )
    assert out.read_bytes() == vector.read_bytes()
