"""The stable launcher client configs point at: `<config dir>/bin/deskbridge-mcp` (`.cmd` on Windows).

Client configs outlive installations: a pipx upgrade, a new venv or a moved checkout changes where deskbridge's
Python is. The configs name this launcher instead, and every `deskbridge setup`, `doctor`, `skill` and `serve`
run rewrites it to point at the Python that is running now (seed ra3-mod-xml §4.3).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from deskbridge.settings import Dirs, deskbridge_dirs

WINDOWS = sys.platform == "win32"


def launcher_path(dirs: Dirs | None = None) -> Path:
    name = "deskbridge-mcp.cmd" if WINDOWS else "deskbridge-mcp"
    return (dirs or deskbridge_dirs()).config / "bin" / name


def launcher_text(python: str | None = None) -> str:
    """The script: run `deskbridge mcp` with this installation's Python, passing every argument on."""
    python = python or sys.executable
    home = os.environ.get("DESKBRIDGE_HOME")
    if WINDOWS:  # pragma: no cover - exercised on Windows only
        env = f'set "DESKBRIDGE_HOME={home}"\r\n' if home else ""
        return f'@echo off\r\n{env}"{python}" -m deskbridge mcp %*\r\n'
    quoted = python.replace("'", "'\\''")
    env = "DESKBRIDGE_HOME='" + home.replace("'", "'\\''") + "' " if home else ""
    return (
        "#!/bin/sh\n"
        "# Written by deskbridge (refreshed on every `deskbridge setup`, `doctor`, `skill` and `serve`).\n"
        f"exec env {env}'{quoted}' -m deskbridge mcp \"$@\"\n"
    )


def client_command(launcher: Path) -> tuple[str, list[str], dict[str, str]]:
    """What a client's config runs: command, the arguments before `--project`, and environment.

    The launcher itself where it is a script a client can start. A Windows batch file is not: Node (Claude Code,
    Claude Desktop, Cursor, VS Code) refuses to spawn a `.cmd` without a shell since the CVE-2024-27980 fix
    ("spawn EINVAL"; anthropics/claude-code issues #25019 and #68221), so there the entry runs this installation's
    Python (an .exe) directly, with the DESKBRIDGE_HOME the launcher would have set.
    """
    if launcher.suffix.lower() not in (".cmd", ".bat"):
        return str(launcher), [], {}
    home = os.environ.get("DESKBRIDGE_HOME")
    return sys.executable, ["-m", "deskbridge", "mcp"], ({"DESKBRIDGE_HOME": home} if home else {})


def write_launcher(dirs: Dirs | None = None) -> Path:
    """Create or refresh the launcher; unchanged content is not rewritten."""
    path = launcher_path(dirs)
    text = launcher_text()
    with contextlib.suppress(OSError):
        if path.read_text("utf-8") == text:
            return path
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, "utf-8", newline="")
    os.chmod(tmp, 0o755)
    os.replace(tmp, path)
    return path


def launcher_problem(dirs: Dirs | None = None) -> str | None:
    """What is wrong with the launcher (None when it exists and points at this installation)."""
    path = launcher_path(dirs)
    try:
        text = path.read_text("utf-8")
    except OSError:
        return f"no launcher at {path}"
    if text != launcher_text():
        return f"the launcher at {path} points at another installation"
    if not WINDOWS and not os.access(path, os.X_OK):
        return f"the launcher at {path} is not executable"
    return None
