"""`deskbridge skill install | sync | uninstall`: the Agent Skill in the folders agents read skills from.

Every file we write ends with a managed marker holding the SHA-256 of what we wrote. A file whose content no
longer matches its marker was edited by the person and is never overwritten or removed; a file without a marker
is theirs. Installed copies are listed in `<state dir>/skills.json`, so `sync` refreshes them after an upgrade.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Any, Final

from deskbridge import __version__
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.integrations.endpoints import private_state_dir, state_dir
from deskbridge.integrations.project_files import file_inside
from deskbridge.integrations.skill_text import REFERENCES, SKILL_MD

SKILL_NAME: Final = "deskbridge"
MARKER: Final = re.compile(r"\n<!-- managed by deskbridge (\S+) sha256:([0-9a-f]{64}) [^\n]*-->\n?")
TARGETS: Final = ("agents", "claude", "project")


def skill_files() -> dict[str, str]:
    """Relative path → content (without the marker)."""
    return {"SKILL.md": SKILL_MD, **{f"references/{name}": text for name, text in REFERENCES.items()}}


def _with_marker(text: str) -> str:
    digest = hashlib.sha256(text.encode()).hexdigest()
    note = "edit this file freely: deskbridge then leaves it alone"
    return f"{text}\n<!-- managed by deskbridge {__version__} sha256:{digest} {note} -->\n"


SKILL_FILE_MAX_BYTES: Final = 1024 * 1024
"""Bytes of an installed skill file read back at most (ours are a few KiB; a bigger one is the person's)."""


def file_state(path: Path) -> str:
    """`missing`, `managed` (ours, unchanged), `edited` (ours, changed by the person) or `foreign` (theirs, or
    not a regular file: a FIFO named like ours blocked a plain read forever)."""
    from deskbridge.core.reading import read_regular_file

    try:
        text = read_regular_file(path, max_bytes=SKILL_FILE_MAX_BYTES).decode("utf-8")
    except BridgeError as exc:
        return "missing" if exc.code == ErrorCode.NOT_FOUND else "foreign"
    except UnicodeDecodeError:
        return "foreign"
    matches = list(MARKER.finditer(text))
    if not matches:
        return "foreign"
    match = matches[-1]
    body = text[: match.start()] + text[match.end() :]  # whatever the person added after it counts too
    return "managed" if hashlib.sha256(body.encode()).hexdigest() == match.group(2) else "edited"


def target_dir(target: str, project_dir: Path | None = None) -> Path:
    """Where the skill folder goes: ~/.agents/skills, ~/.claude/skills, the project's .agents/skills, or PATH."""
    home = Path(os.environ.get("HOME") or os.environ.get("USERPROFILE") or Path.home())
    if target == "agents":
        return home / ".agents" / "skills" / SKILL_NAME
    if target == "claude":
        return home / ".claude" / "skills" / SKILL_NAME
    if target == "project":
        return _project_folder(project_dir) / ".agents" / "skills" / SKILL_NAME
    path = Path(target).expanduser()
    if (
        not path.is_absolute()
        and not target.startswith((".", "~"))
        and os.sep not in target
        and "/" not in target
    ):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"unknown skill target {target!r}",
            hint="Use agents, claude, project, or a folder path (./skills, ~/my-skills).",
        )
    # As named, not resolved: where a link on the way leads is checked by the install (`confining_folder`).
    return Path(os.path.abspath(path)) / SKILL_NAME


def _project_folder(project_dir: Path | None) -> Path:
    base = project_dir or Path.cwd()
    return base if base.is_dir() else base.parent


def confining_folder(target: str, project_dir: Path | None = None) -> Path | None:
    """The folder an install into `target` must stay inside (integrations/project_files.py): the project for
    `project`, the current folder for a PATH below it (`.claude/skills` in a cloned repository); None for the
    person's own folders (~/.agents, ~/.claude, a PATH elsewhere), which may be links of their own making."""
    if target == "project":
        return _project_folder(project_dir)
    if target in TARGETS or Path(target).expanduser().is_absolute():
        return None
    here = Path.cwd()
    return here if target_dir(target, project_dir).is_relative_to(here) else None


# -- the install record -------------------------------------------------------------------------------------


def record_file() -> Path:
    return state_dir() / "skills.json"


def installs() -> list[dict[str, Any]]:
    try:
        data = json.loads(record_file().read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return data.get("installs", []) if isinstance(data, dict) else []


def _save(rows: list[dict[str, Any]]) -> None:
    path = record_file()
    private_state_dir(path.parent)
    tmp = path.with_name(f".skills.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"installs": rows}, indent=1), "utf-8")
    os.replace(tmp, path)


def _recorded_root(row: dict[str, Any]) -> Path | None:
    """The project folder a recorded install is confined to, or None for a folder of the person's own choosing."""
    return Path(row["root"]) if row.get("root") else None


# -- operations -----------------------------------------------------------------------------------------------


def _place(folder: Path, rel: str, root: Path | None) -> Path:
    """Where the skill file `rel` of the install in `folder` is: with `root`, the real path inside it, never through
    a link leading out (`file_inside` raises ACCESS_DENIED then)."""
    return folder / rel if root is None else file_inside(folder / rel, root)


def install_into(folder: Path, target: str, *, root: Path | None = None) -> dict[str, Any]:
    """Write the skill's files into `folder` (those the person edited or made stay as they are). With `root`,
    every file must be a regular file inside it, or nothing is written (see `confining_folder`)."""
    from deskbridge.core.files import atomic_write, make_dirs

    places = {rel: _place(folder, rel, root) for rel in skill_files()}
    written, kept = [], []
    for rel, text in skill_files().items():
        path = places[rel]
        state = file_state(path)
        if state in ("edited", "foreign"):
            kept.append(
                {"file": rel, "why": "edited by you" if state == "edited" else "not written by deskbridge"}
            )
            continue
        content = _with_marker(text)
        if state == "managed" and path.read_text("utf-8") == content:
            continue
        if root is None:
            path.parent.mkdir(parents=True, exist_ok=True)
        else:  # made inside `root`, never through a link planted meanwhile
            make_dirs(path.parent, root=Path(os.path.realpath(root)))
        # A fresh random temp name, never followed if something is there (the old `.SKILL.md.<pid>.tmp` was).
        atomic_write(path, content.encode("utf-8"))
        written.append(rel)
    rows = [r for r in installs() if r["path"] != str(folder)]
    row: dict[str, Any] = {"path": str(folder), "target": target, "version": __version__}
    if root is not None:
        row["root"] = str(root)
    rows.append(row)
    _save(rows)
    return {"path": str(folder), "target": target, "written": written, "kept": kept}


def install(target: str = "agents", *, project_dir: Path | None = None) -> dict[str, Any]:
    return install_into(target_dir(target, project_dir), target, root=confining_folder(target, project_dir))


def sync() -> list[dict[str, Any]]:
    """Refresh every recorded install (after an upgrade); edited files stay as the person left them."""
    out = []
    for row in installs():
        folder = Path(row["path"])
        if folder.is_dir():
            out.append(install_into(folder, row.get("target", str(folder)), root=_recorded_root(row)))
    return out


def uninstall(target: str | None = None, *, project_dir: Path | None = None) -> list[dict[str, Any]]:
    """Remove managed, unedited files (all recorded installs, or one target's) and the folders they leave empty."""
    chosen = str(target_dir(target, project_dir)) if target else None
    out, keep = [], []
    for row in installs():
        if chosen is not None and row["path"] != chosen:
            keep.append(row)
            continue
        folder = Path(row["path"])
        root = _recorded_root(row)
        removed, kept = [], []
        for rel in skill_files():
            try:  # a project install: only inside the project, as installed (a link planted since is not followed)
                path = _place(folder, rel, root)
            except BridgeError:
                kept.append(rel)
                continue
            state = file_state(path)
            if state == "managed":
                path.unlink()
                removed.append(rel)
            elif state != "missing":
                kept.append(rel)
        for sub in (folder / "references", folder):
            with contextlib.suppress(OSError):
                sub.rmdir()  # only when empty
        out.append({"path": str(folder), "removed": removed, "kept": kept})
    _save(keep)
    return out
