"""`pvf cat/get` of a path the archive lacks names the closest files and the `pvf ls` command to run next;
`pvf ls` with a prefix nothing starts with says so instead of printing an empty listing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.kinds.pvf.archive import open_archive

runner = CliRunner()


@pytest.mark.parametrize("command", ["cat", "get"])
def test_a_near_miss_names_the_closest_files_and_the_folder_listing(small_classic, command):
    real = next(p for p in open_archive(small_classic).paths() if p.count("/") >= 1 and p[-5].isdigit())
    folder, name = real.rsplit("/", 1)
    typo = f"{folder}/{name[:-5]}{name[-4:]}"  # one digit too few
    result = runner.invoke(app, ["pvf", command, str(small_classic), typo.upper()])
    assert result.exit_code == 2, result.output
    assert f"error: NOT_FOUND: no file '{typo.upper()}'" in result.output
    assert real in result.output.split("Closest:")[1].split(". List")[0]
    assert f"`deskbridge pvf ls {small_classic} {folder}/`" in result.output
    assert "list or search first" not in result.output


def test_a_folder_that_is_not_there_points_at_the_full_listing(small_classic):
    result = runner.invoke(app, ["pvf", "cat", str(small_classic), "nope/x.equ"])
    assert result.exit_code == 2
    assert (
        "Nothing is under 'nope/'" in result.output
        and f"`deskbridge pvf ls {small_classic}`" in result.output
    )


def test_ls_with_a_prefix_nothing_starts_with_says_so(small_classic):
    result = runner.invoke(app, ["pvf", "ls", str(small_classic), "zzz"])
    assert result.exit_code == 0
    assert "no file in" in result.output and "starts with 'zzz'" in result.output
