"""`pvf synth --annotated`: the annotation fixtures in both families, registered in the archive's own lists
(dir-relative, or root-relative under list/ for the paged variant), deterministic, and off by default."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.nkpi_lists import read_list
from deskbridge.kinds.pvf.synth import synth
from deskbridge.kinds.pvf.synth.annotated import NEW_LISTS, REGISTERED, fixture_files

FIXTURES = [lf.path for lf in fixture_files()]


def _registry(ar, path):  # type: ignore[no-untyped-def]
    return ar.registry(path) if ar.family == "classic" else read_list(ar, path)


@pytest.mark.parametrize("family", ["classic", "nkpi"])
def test_annotated_archives_carry_and_register_the_fixtures(tmp_path: Path, family: str) -> None:
    p = tmp_path / "a.pvf"
    synth(p, family=family, files=80, seed=2, annotated=True)
    ar = open_archive(p)
    for path in FIXTURES:
        text = ar.read_text(path)
        assert "[name]" in text, path
    for folder, entries in REGISTERED.items():
        reg = _registry(ar, f"{folder}/{folder}.lst")
        for item_id, rel in entries:
            assert reg.resolve(item_id) == f"{folder}/{rel}"
    for lst, entries in NEW_LISTS.items():
        reg = _registry(ar, lst)
        assert [reg.resolve(i) for i, _ in entries] == [f"{lst.rsplit('/', 1)[0]}/{r}" for _, r in entries]
    plain = tmp_path / "plain.pvf"
    synth(plain, family=family, files=80, seed=2)
    assert not open_archive(plain).exists(FIXTURES[0])


def test_paged_variant_registers_root_relative(tmp_path: Path) -> None:
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    p = tmp_path / "p.pvf"
    synth_nkpi(p, 40, 3, "paged", annotated=True)
    ar = open_archive(p, keys=Path(f"{p}.keys.json"))
    reg = read_list(ar, "list/stackable.lst")
    assert reg.root_relative and reg.resolve(900301) == "stackable/annotated/material.stk"
    assert read_list(ar, "list/quest.lst").resolve(900701) == "n_quest/annotated/first.qst"


def test_cli_flag_is_deterministic(tmp_path: Path) -> None:
    runner = CliRunner()
    outs = []
    for name in ("one.pvf", "two.pvf"):
        out = tmp_path / name
        result = runner.invoke(app, ["pvf", "synth", "-o", str(out), "--files", "60", "--annotated", "-q"])
        assert result.exit_code == 0, result.output
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert open_archive(tmp_path / "one.pvf").exists("skill/swordmanskill.lst")
