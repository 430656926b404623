"""The state folder and its subfolders are owner-only: the names in them tell which projects a person works on
(endpoint and lock files are named after the project, kept unsaved text after the document) — found by QA: the
state folder, `endpoints/` and `locks/` were 0755, so any local user could list them."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from deskbridge.integrations import endpoints

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_published_endpoint_and_a_held_lock_leave_only_owner_only_folders(tmp_path: Path) -> None:
    project = tmp_path / "secret-project"
    project.mkdir()
    old = os.umask(0o022)  # what a login shell has: folders 0755 unless asked otherwise
    publication = endpoints.Publication(
        endpoints.Endpoint(
            url="http://127.0.0.1:1",
            token_file=str(tmp_path / "token"),
            pid=os.getpid(),
            kind="markdown",
            project_dir=str(project),
            started=time.time(),
        )
    )
    lock = endpoints.WorkspaceLock(project, "test")
    lock.acquire()
    try:
        state = endpoints.state_dir()
        assert mode(state) == 0o700
        assert mode(endpoints.endpoints_dir()) == 0o700
        assert mode(endpoints.locks_dir()) == 0o700
        assert any(p.name.startswith("secret-project-") for p in endpoints.endpoints_dir().iterdir())
    finally:
        lock.release()
        publication.remove()
        os.umask(old)


def test_an_existing_world_readable_state_folder_is_made_owner_only(tmp_path: Path) -> None:
    state = endpoints.state_dir()
    state.mkdir(parents=True, mode=0o755)
    os.chmod(state, 0o755)
    endpoints.private_state_dir(state / "backups")
    assert mode(state) == 0o700 and mode(state / "backups") == 0o700
