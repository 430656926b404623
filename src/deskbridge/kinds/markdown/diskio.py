"""Reading and writing Markdown files on disk: atomic replace, no-overwrite publish and file identity.

The core's `files` module will own these primitives (ARCHITECTURE.md principle 4); until it lands this small
private copy keeps the markdown kind correct. Each helper is marked `TODO(core.files)` so the switch is one
import away.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from deskbridge.core.errors import BridgeError, ErrorCode

try:  # pragma: no cover - depends on which core modules have landed
    from deskbridge.core import files as _core_files  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _core_files = None


@dataclass(frozen=True)
class FileIdentity:
    """What we saw of a file when we read or wrote it; a different identity means someone else changed it."""

    size: int
    mtime_ns: int
    inode: int
    sha256: str

    def to_dict(self) -> dict[str, object]:
        return {"size": self.size, "mtimeNs": self.mtime_ns, "sha256": self.sha256}


def identity_of(path: Path, data: bytes | None = None) -> FileIdentity | None:
    """The identity of `path` now (None when it does not exist). Pass `data` when it was just read."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    if data is None:
        data = path.read_bytes()
    return FileIdentity(st.st_size, st.st_mtime_ns, st.st_ino, hashlib.sha256(data).hexdigest())


def same_content(a: FileIdentity | None, b: FileIdentity | None) -> bool:
    """True when both identities describe the same bytes (a `touch` alone is not a change)."""
    if a is None or b is None:
        return a is b
    return a.size == b.size and a.sha256 == b.sha256


def quick_unchanged(path: Path, known: FileIdentity | None) -> bool:
    """Cheap check (stat only) that the file still has the identity we know."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return known is None
    return known is not None and st.st_size == known.size and st.st_mtime_ns == known.mtime_ns


def atomic_write(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so a crash leaves either the old or the new file, never a mix."""
    # TODO(core.files): switch to core.files.atomic_write when it lands.
    if _core_files is not None and hasattr(_core_files, "atomic_write"):
        _core_files.atomic_write(path, data)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        with contextlib.suppress(FileNotFoundError):
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
        _fsync_dir(path.parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def publish_new(path: Path, data: bytes) -> None:
    """Create `path` with `data`, failing with TARGET_EXISTS if it exists (no check-then-rename race)."""
    # TODO(core.files): switch to core.files no-overwrite publish when it lands.
    if _core_files is not None and hasattr(_core_files, "publish_new"):
        _core_files.publish_new(path, data)
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)  # link() refuses an existing target atomically
        except FileExistsError:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS, f"'{path.name}' already exists", data={"path": str(path)}
            ) from None
        _fsync_dir(path.parent)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
