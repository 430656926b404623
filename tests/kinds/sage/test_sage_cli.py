"""`deskbridge sage …`, `index_command` and `snapshot_command`, run the way a person runs them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from deskbridge.kinds.sage.cli import app, index_command, snapshot_command

runner = CliRunner()


def test_index_then_query_from_the_cache(minimod):
    out = runner.invoke(app, ["index", str(minimod.mod), "--sdk", str(minimod.sdk), "--json"])
    assert out.exit_code == 0, out.output
    stats = json.loads(out.output)
    assert stats["stats"]["parsedFiles"] > 0 and stats["index"]["state"] == "ready"
    out = runner.invoke(
        app, ["find-asset", "tankgun", "-p", str(minimod.mod / "Data"), "--sdk", str(minimod.sdk)]
    )
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert [i["id"] for i in body["items"]] == ["TankGun"] and body["index"]["projectDir"] == str(minimod.mod)
    out = runner.invoke(
        app,
        [
            "uses",
            "GameObject",
            "Tank",
            "--target-type",
            "WeaponTemplate",
            "-p",
            str(minimod.mod),
            "--sdk",
            str(minimod.sdk),
        ],
    )
    edges = json.loads(out.output)["edges"]
    assert any(e["to"] and e["to"]["id"] == "TankGun" for e in edges)


def test_errors_say_what_happened_and_what_to_do(minimod):
    out = runner.invoke(
        app, ["definition", "GameObject", "Nope", "-p", str(minimod.mod), "--sdk", str(minimod.sdk)]
    )
    assert out.exit_code == 1
    assert "error: No definition of GameObject 'Nope'." in out.output and "help:" in out.output
    out = runner.invoke(app, ["index", str(minimod.root / "nowhere")])
    assert out.exit_code == 1 and "does not exist" in out.output


def test_top_level_commands_can_be_mounted(minimod, deskbridge_home):
    top = typer.Typer()
    top.command("index")(index_command)
    top.command("snapshot")(snapshot_command)
    out = runner.invoke(top, ["snapshot", str(minimod.mod), "--sdk", str(minimod.sdk)])
    assert out.exit_code == 0, out.output
    path = Path(out.output.strip())
    assert path.is_relative_to(deskbridge_home) and path.name == "current.json.gz"
    assert json.loads(gzip.decompress(path.read_bytes()))["schemaVersion"] == 1


def test_effective_and_an_outside_path_from_the_command_line(minimod):
    args = ["-p", str(minimod.mod), "--sdk", str(minimod.sdk)]
    out = runner.invoke(app, ["effective", "WeaponTemplate", "TankGunVet", *args])
    assert out.exit_code == 0, out.output
    body = json.loads(out.output)
    assert [c["id"] for c in body["chain"]] == ["TankGunVet", "TankGun"]
    out = runner.invoke(app, ["active", "/etc/passwd", *args])
    assert out.exit_code == 1 and "outside the mod and SDK folders" in out.output
    assert "{tool}" not in out.output


def test_index_says_the_state_and_how_to_see_the_problems_it_counts(minimod):
    """QA: `deskbridge index` of a mod whose Data/Mod.xml is 0 bytes printed `parse-error 1` and nothing
    saying which file or how to learn more. It now prints the state and the command that lists them."""
    (minimod.mod / "Data/Mod.xml").write_bytes(b"")
    out = runner.invoke(app, ["index", str(minimod.mod), "--sdk", str(minimod.sdk)])
    assert out.exit_code == 0, out.output
    assert "state    ready" in out.output and "parse-error" in out.output
    assert f"deskbridge sage diagnostics -p {minimod.mod} --sdk {minimod.sdk} --origin project" in out.output
    listed = runner.invoke(
        app, ["diagnostics", "-p", str(minimod.mod), "--sdk", str(minimod.sdk), "--origin", "project"]
    )
    assert json.loads(listed.output)["items"][0]["file"] == "Data/Mod.xml"
