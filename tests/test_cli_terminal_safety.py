"""REL-ATTACK, the terminal: names from untrusted data (archives, mods, a cloned project's configs, folders) print
as text, whatever they hold.

A name may carry terminal control sequences (`ESC ] 0 ; … BEL` retitles the terminal, OSC 52 writes the
clipboard, C1 `CSI` U+009B starts a sequence on terminals that take 8-bit controls) or rich markup (`[bold]`,
and an unbalanced `[/x]` made rich raise instead of printing the error at all). Every output path of the CLI
shows them escaped (`core.terminal.printable`), and JSON output spells DEL and C1 as `\\u007f` / `\\u009b`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

sys.path.insert(0, str(Path(__file__).parent / "kinds" / "pvf"))
from hostile import with_names

from deskbridge.cli import app
from deskbridge.kinds.pvf.synth.classic import synth_classic

pytestmark = pytest.mark.security

runner = CliRunner()

HOSTILE = "[bold]x[/] \x1b]0;pwned\x07 \x9b2J \x7f [/oops]"
"""Markup (balanced, and a closing tag that matches nothing), an OSC title sequence, a C1 CSI and DEL."""
SHOWN = "[bold]x[/] \\x1b]0;pwned\\x07 \\x9b2J \\x7f [/oops]"
"""How it must print: markup as it is written, every control character spelled out."""

RAW_CONTROLS = {"\x1b", "\x07", "\x9b", "\x7f"}


def shown(output: str) -> str:
    return " ".join(output.split())  # rich wraps long lines


def test_an_error_naming_a_hostile_path_prints_it_literally(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / HOSTILE
    result = runner.invoke(app, ["setup", "cursor", "--project", str(missing)])
    assert result.exit_code == 2, result.output
    assert SHOWN in shown(result.output) and "does not exist" in result.output, result.output
    assert not RAW_CONTROLS & set(result.output)


def test_a_skill_folder_with_markup_in_its_name_is_reported_as_named(home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "[red]skills[/] [/oops]"
    result = runner.invoke(app, ["skill", "install", "--target", str(folder)])
    assert result.exit_code == 0, result.output
    assert f"{folder}/deskbridge: wrote 4 file(s)" in shown(result.output), result.output


def test_doctor_shows_a_cloned_projects_config_values_escaped(home: Path, tmp_path: Path) -> None:
    """`doctor --project` reads the project's own .cursor/mcp.json: a cloned repository's file says anything."""
    project = tmp_path / "cloned"
    (project / ".cursor").mkdir(parents=True)
    entry = {"command": f"/nowhere/{HOSTILE}", "args": []}
    (project / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"deskbridge": entry}}), "utf-8")
    result = runner.invoke(app, ["doctor", "cursor", "--project", str(project)])
    assert f"/nowhere/{SHOWN} does not exist" in shown(result.output), result.output
    assert not RAW_CONTROLS & set(result.output)


def test_a_setup_diff_of_a_config_holding_escapes_shows_them_spelled_out(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "cloned"
    (project / ".vscode").mkdir(parents=True)
    config = project / ".vscode" / "mcp.json"
    config.write_text('// \x1b]0;pwned\x07 \x9b2J\r\n{"servers": {}}\r\n', "utf-8")  # a comment says anything
    result = runner.invoke(
        app, ["setup", "vscode", "--project", str(project), "--scope", "project", "--dry-run"]
    )
    assert result.exit_code == 0, result.output
    assert "// \\x1b]0;pwned\\x07 \\x9b2J" in result.output and not RAW_CONTROLS & set(result.output)
    assert "\r" not in result.output  # a CRLF file's diff reads as lines, not as `\x0d` on each


def test_pvf_json_output_spells_del_as_an_escape(tmp_path: Path) -> None:
    """`ensure_ascii=False` keeps names readable (中文 stays 中文) but let DEL through raw (C1 too: archive paths
    are CP949, which has none, so the SAGE test below shows those)."""
    archive = tmp_path / "hostile.pvf"
    synth_classic(tmp_path / "small.pvf", 20, seed=3)
    name = "npc/evil\x1b[2j\x7f中文.npc"
    with_names(tmp_path / "small.pvf", archive, {name: b""})  # as another tool could write it
    listing = runner.invoke(app, ["pvf", "ls", str(archive), "npc/evil", "--json"])
    assert listing.exit_code == 0, listing.output
    assert not RAW_CONTROLS & set(listing.output)
    assert "\\u001b" in listing.output and "\\u007f" in listing.output and "中文" in listing.output
    assert [row["path"] for row in json.loads(listing.output)] == [name]
    text = runner.invoke(app, ["pvf", "ls", str(archive), "npc/evil"])
    assert "npc/evil\\x1b[2j\\x7f中文.npc" in text.output and not RAW_CONTROLS & set(text.output)


def test_the_ctrl_c_warning_names_unsaved_documents_escaped(capsys: pytest.CaptureFixture[str]) -> None:
    """`serve` names the documents a Ctrl+C would lose: file names, which may hold anything."""
    import signal

    from starlette.applications import Starlette

    from deskbridge.web.server import BridgeServer, ShutdownSignal, server_config

    server = BridgeServer(server_config(Starlette()), ShutdownSignal())
    server.unsaved = lambda: [f"notes{HOSTILE}.md"]
    server._exit_unless_unsaved(signal.SIGINT, None)
    warning = capsys.readouterr().err
    assert f"notes{SHOWN}.md" in warning and "Ctrl+C again" in warning
    assert not RAW_CONTROLS & set(warning)


def test_the_bridge_names_kept_unsaved_documents_escaped(caplog: pytest.LogCaptureFixture) -> None:
    """`deskbridge mcp` names on stderr the documents it kept when the client left: file names, maybe a terminal."""
    from types import SimpleNamespace

    from deskbridge.mcp.bridge import keep_unsaved

    name = f"notes{HOSTILE}.md"
    row = {"docId": "d1", "dirty": True, "fileName": name, "absolutePath": f"/notes/{name}"}
    service = SimpleNamespace(list_open=lambda: [row], read=lambda doc_id: {"text": "unsaved"})
    with caplog.at_level("WARNING", logger="deskbridge"):
        (kept,) = keep_unsaved(SimpleNamespace(service=service))
    assert kept.read_text("utf-8") == "unsaved"
    (message,) = [r.getMessage() for r in caplog.records if "unsaved text is kept" in r.getMessage()]
    assert f"/notes/notes{SHOWN}.md" in message and not RAW_CONTROLS & set(message)
