"""REL-ATTACK: save-as TOCTOU (issue 8). A folder inside the root is swapped for a symbolic link to a folder
outside it, over and over, while save-as runs: no file may ever land outside the root, and no temp file is left.

Before the fix, a path checked by `resolve_path` was written by name later, so a swap between the check and the
write put 128 of 516 new files outside the root. Now `core.files` opens the folder once (walking the checked
real path with O_NOFOLLOW) and does every step relative to that descriptor.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.core.files import TEMP_PREFIX, atomic_write, publish_directory, publish_new
from deskbridge.core.paths import resolve_path

pytestmark = [
    pytest.mark.security,
    pytest.mark.skipif(sys.platform == "win32", reason="symbolic-link swaps are a POSIX attack here"),
]

ROUNDS = 400


@contextlib.contextmanager
def swapping(folder: Path, outside: Path) -> Iterator[list[int]]:
    """A thread that keeps replacing `folder` by a link to `outside` and putting it back."""
    stop = threading.Event()
    swaps = [0]
    moved = folder.with_name(folder.name + ".real")

    def run() -> None:
        while not stop.is_set():
            try:
                os.rename(folder, moved)
                os.symlink(outside, folder)
                time.sleep(0.0002)
                os.unlink(folder)
                os.rename(moved, folder)
                swaps[0] += 1
            except OSError:
                # A step failed half way (the code under attack raced us): put the real folder back, or every
                # later round fails at its first step and the folder stays away for the rest of the test.
                with contextlib.suppress(OSError):
                    if folder.is_symlink():
                        folder.unlink()
                with contextlib.suppress(OSError):
                    if moved.exists() and not folder.exists():
                        moved.rename(folder)
            time.sleep(0.0002)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield swaps
    finally:
        stop.set()
        thread.join(10)
        if folder.is_symlink():
            folder.unlink()
        if moved.exists():
            moved.rename(folder)


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path, Path]:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    return root, root / "sub", outside


def _everything(*folders: Path) -> list[str]:
    return sorted(str(p) for folder in folders for p in folder.rglob("*"))


@pytest.mark.parametrize("how", ["publish_new", "atomic_write", "atomic_write+backup", "publish_directory"])
def test_a_swapped_folder_never_gets_a_file_outside_the_root(tree: tuple[Path, Path, Path], how: str) -> None:
    root, sub, outside = tree
    written = refused = 0
    with swapping(sub, outside) as swaps:
        # At least ROUNDS writes, and on until the attack thread has run and both sides of the race were hit
        # (on a loaded machine the thread may get little time in ROUNDS writes), within a minute.
        deadline = time.monotonic() + 60
        for i in itertools.count():
            if i >= ROUNDS and ((swaps[0] > 10 and written and refused) or time.monotonic() > deadline):
                break
            try:
                target = resolve_path(f"sub/copy-{i}.md", [root])  # the check …
                if how == "publish_new":  # … and the write: save-as of a new file
                    publish_new(target, b"saved as\n")
                elif how == "publish_directory":
                    publish_directory(target, lambda d: (d / "page.md").write_bytes(b"x"))
                else:  # save-as over an existing file (with or without a .bak)
                    atomic_write(target, b"saved as\n", backup=how.endswith("backup"))
                written += 1
            except BridgeError:
                refused += 1
    assert swaps[0] > 10, "the attack did not run"
    assert written and refused, (written, refused)  # both sides of the race were hit
    assert _everything(outside) == [], "a file was written outside the root"
    leftovers = [p for p in _everything(root) if TEMP_PREFIX in p]
    assert leftovers == [], leftovers


def test_an_explicit_root_confines_a_plain_path_too(tree: tuple[Path, Path, Path]) -> None:
    root, sub, outside = tree
    sub.rmdir()
    sub.symlink_to(outside)
    with pytest.raises(BridgeError) as ei:
        atomic_write(root / "sub" / "x.md", b"x", root=root)
    assert ei.value.code == "ACCESS_DENIED" and str(outside) not in ei.value.message
    with pytest.raises(BridgeError):
        publish_new(root.parent / "elsewhere.md", b"x", root=root)
    assert _everything(outside) == []


def test_save_as_over_mcp_never_lands_outside_the_workspace(tree: tuple[Path, Path, Path]) -> None:
    root, sub, outside = tree
    (root / "README.md").write_text("# Notes\n", "utf-8")
    from deskbridge.testing import ServerThread

    with ServerThread(root) as served, served.client() as call:
        written = 0
        with swapping(sub, outside) as swaps:
            for i in range(150):
                result = call("md_save_current_document_as", {"path": f"sub/copy-{i}.md"})
                written += not result.is_error
    assert swaps[0] > 5 and written
    assert _everything(outside) == [], "md_save_current_document_as wrote outside the workspace"
    assert [p for p in _everything(root) if TEMP_PREFIX in p] == []
