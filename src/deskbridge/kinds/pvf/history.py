"""Version history of PVF archives: every save records a commit in a per-archive journal, and `deskbridge pvf log`.

Layout under the platform data folder (`<data>/pvf-history/<sha256 of the archive's real path>/`):

* `commits/<seq>-<id>.json` — one file per commit, written once with `core.files.publish_new`:
  `{id, seq, time, source (ui / mcp / cli), caller, archive, revision, files: [{path, action, before, after}]}`
  where `before` / `after` are content hashes (None for a file that did not exist / was deleted);
* `blobs/<sha256>` — the contents, stored once each (content-addressed, so an unchanged file costs nothing).

The journal outlives the workspace: the export sources `working` (every change since the first recorded commit)
and `commit` (one commit) read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import time
from pathlib import Path
from typing import Any

import typer

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.terminal import json_text
from deskbridge.settings import private_dir

BLOB_MAX_BYTES = 256 * 1024 * 1024


def journal_dir(data_dir: Path, archive: Path) -> Path:
    real = os.path.realpath(archive)
    return data_dir / "pvf-history" / hashlib.sha256(real.encode("utf-8")).hexdigest()[:32]


def source_of(caller: str) -> str:
    return "ui" if caller == "ui" else "cli" if caller == "cli" else "mcp"


class Journal:
    """The commits of one archive (see the module docstring)."""

    def __init__(self, data_dir: Path, archive: Path) -> None:
        self.archive = archive
        self.root = journal_dir(data_dir, archive)

    def _private_root(self) -> None:
        """`<data>/pvf-history` owner-only (0700) before anything is stored: the blobs are the archive's files,
        and a folder made with the umask (0755) let every local user read them, whatever the archive's own
        permissions."""
        private_dir(self.root.parent)

    def _put_blob(self, data: bytes, written: list[Path]) -> str:
        """Store `data` once (not yet durable: `record` makes every new blob durable at once)."""
        digest = hashlib.sha256(data).hexdigest()
        path = self.root / "blobs" / digest
        if not path.exists():
            self._private_root()
            path.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(BridgeError):  # TARGET_EXISTS: another save stored it first
                files.publish_new(path, data, durable=False)
                written.append(path)
        return digest

    def blob(self, digest: str | None) -> bytes | None:
        if digest is None:
            return None
        return files.read_regular_file(
            self.root / "blobs" / digest, max_bytes=BLOB_MAX_BYTES, shown_as=digest
        )

    def record(
        self, changes: dict[str, tuple[str, bytes | None, bytes | None]], *, caller: str, revision: int
    ) -> dict[str, Any]:
        """Record one commit: `key → (display path, before | None, after | None)`; returns its summary."""
        entries = []
        written: list[Path] = []
        for _key, (path, before, after) in sorted(changes.items()):
            action = "add" if before is None else "delete" if after is None else "modify"
            entries.append(
                {
                    "path": path,
                    "action": action,
                    "before": None if before is None else self._put_blob(before, written),
                    "after": None if after is None else self._put_blob(after, written),
                }
            )
        # every blob durable before the commit that names them (one file-system sync, not one per blob)
        files.sync_filesystem(written)
        commits = self.root / "commits"
        self._private_root()
        commits.mkdir(parents=True, exist_ok=True)
        seq = len(self.list()) + 1
        commit = {
            "id": secrets.token_hex(6),
            "seq": seq,
            "time": time.time(),
            "source": source_of(caller),
            "caller": caller,
            "archive": str(self.archive),
            "revision": revision,
            "files": entries,
        }
        files.publish_new(
            commits / f"{seq:08d}-{commit['id']}.json", json.dumps(commit, ensure_ascii=False).encode("utf-8")
        )
        return {k: commit[k] for k in ("id", "seq", "time", "source")} | {"files": len(entries)}

    def list(self) -> list[dict[str, Any]]:
        folder = self.root / "commits"
        if not folder.is_dir():
            return []
        out = []
        for p in sorted(folder.glob("*.json")):
            with contextlib.suppress(BridgeError, ValueError):
                out.append(
                    json.loads(files.read_regular_file(p, max_bytes=64 * 1024 * 1024, shown_as=p.name))
                )
        return out

    def get(self, commit_id: str) -> dict[str, Any]:
        for c in self.list():
            if c["id"] == commit_id:
                return c
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"no commit {commit_id!r} in this archive's history",
            "List the history with pvf_history (or `deskbridge pvf log ARCHIVE`).",
        )

    def working(self) -> dict[str, tuple[str, str | None, str | None]]:
        """key → (path, first before, last after) over every commit: the net change since the first one."""
        net: dict[str, tuple[str, str | None, str | None]] = {}
        for c in self.list():
            for f in c["files"]:
                key = f["path"].replace("\\", "/").lstrip("/").lower()
                first = net[key][1] if key in net else f["before"]
                net[key] = (f["path"], first, f["after"])
        return {k: v for k, v in net.items() if v[1] != v[2]}


def log_command(
    archive: Path = typer.Argument(..., help="The .pvf archive whose history to list."),
    json_out: bool = typer.Option(False, "--json", help="One JSON object per commit."),
) -> None:
    """List the version history of ARCHIVE: every save through deskbridge, newest last."""
    from deskbridge.kinds.pvf.cli import _say  # local: the cli module registers this command
    from deskbridge.settings import deskbridge_dirs

    journal = Journal(deskbridge_dirs().data, archive.expanduser().resolve())
    commits = journal.list()
    if not commits:
        _say(f"no history for {archive}")
        return
    for c in commits:
        if json_out:
            typer.echo(json_text(c))
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(c["time"]))
        typer.echo(
            f"{c['seq']:>4} {c['id']} {when} {c['source']:<3} rev {c['revision']} {len(c['files'])} file(s)"
        )
        for f in c["files"][:20]:
            _say(f"       {f['action']:<6} {f['path']}")  # a path from the archive: escapes spelled out
        if len(c["files"]) > 20:
            typer.echo(f"       … {len(c['files']) - 20} more")
