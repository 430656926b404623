"""The documentation that is generated from code stays current, and the README keeps its promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_tool_reference_is_current() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_tool_reference.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr


def test_readme_names_the_two_setup_commands_and_every_client() -> None:
    readme = (ROOT / "README.md").read_text("utf-8")
    assert "make demo" in readme and "make test" in readme
    for client in ("Claude Desktop", "Claude Code", "Cursor", "VS Code", "Codex"):
        assert client in readme


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    assert "make test" in ci
