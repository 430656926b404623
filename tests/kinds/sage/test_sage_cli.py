"""`deskbridge sage …`, `index_command` and `snapshot_command`, run the way a person runs them."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
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


@pytest.mark.security
def test_json_answers_spell_del_and_c1_controls_as_escapes(minimod):
    """A mod's XML may name an asset with C1 controls (U+009B is CSI on terminals that take 8-bit controls) and
    DEL, which `ensure_ascii=False` printed raw; they come out as JSON escapes, the rest stays readable."""
    base = minimod.mod / "Data/Base/Base.xml"
    evil = '<GameObject id="Evil&#x9b;2J&#x7f;&#x85;中"/>'
    minimod.write(
        "Data/Base/Base.xml", base.read_text("utf-8").replace("<GameObject", evil + "<GameObject", 1)
    )
    where = ["-p", str(minimod.mod), "--sdk", str(minimod.sdk)]
    out = runner.invoke(app, ["list-assets", "GameObject", "--prefix", "Evil", *where])
    assert out.exit_code == 0, out.output
    assert not {"\x9b", "\x7f", "\x85"} & set(out.output), out.output
    assert "Evil\\u009b2J\\u007f\\u0085中" in out.output
    assert [i["id"] for i in json.loads(out.output)["items"]] == ["Evil\x9b2J\x7f\x85中"]


@pytest.mark.security
def test_errors_and_the_index_summary_print_names_with_escapes_spelled_out(minimod, tmp_path):
    where = ["-p", str(minimod.mod), "--sdk", str(minimod.sdk)]
    out = runner.invoke(app, ["definition", "GameObject", "Nope\x1b]0;pwned\x07\x9b", *where])
    assert out.exit_code == 1 and "Nope\\x1b]0;pwned\\x07\\x9b" in out.output, out.output
    assert not {"\x1b", "\x07", "\x9b"} & set(out.output)
    hostile = tmp_path / "Mods" / "Evil\x1b[2J\x85"
    minimod.mod.rename(hostile)
    out = runner.invoke(app, ["index", str(hostile), "--sdk", str(minimod.sdk)])
    assert out.exit_code == 0, out.output
    assert "Evil\\x1b[2J\\x85" in out.output and not {"\x1b", "\x85"} & set(out.output), out.output
