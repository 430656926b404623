"""Crash-safe disk writes: atomic replace, no-overwrite publish of files and directories, and file identity.

Rules (ARCHITECTURE.md principle 4):

* Every write goes to a temporary file *in the target's directory* (same file system, so the final rename
  is atomic), is flushed and fsynced, then renamed over the target; the directory is fsynced so the rename
  itself survives a power cut. A reader, or a process killed at any instant, sees the old file or the
  complete new one — never a mix (tested by `tests/core/test_files_crash.py`, REL-CRASH).
* "Must not exist" targets are published with an atomic no-overwrite rename — never check-then-rename:
  Linux `renameat2(RENAME_NOREPLACE)`, macOS `renamex_np(RENAME_EXCL)`, Windows `MoveFileExW` without
  `MOVEFILE_REPLACE_EXISTING`. Where the file system lacks it (old kernels, some network file systems) a
  file is published by `link()` + `unlink()` of the temp (link fails with EEXIST atomically) and a
  directory by `mkdir()` of the target followed by `rename()` onto that empty directory (rename onto a
  non-empty directory fails, so nothing is merged or replaced).
* `FileIdentity` (device, inode, size, mtime_ns, SHA-256 of the content) detects a file changed by another
  program (`SOURCE_CHANGED`, `TARGET_CHANGED`); the content hash catches changes that keep size and mtime.
  A check right before the rename narrows, but cannot close, the window against programs that ignore our
  locks — ordinary file systems offer no cross-process transaction (seed "保存").
* On failure the original is intact and the error's `data` says `diskTouched` (temporary bytes were
  written, then removed) and `diskCommitted` (the target now holds the new content), so a caller never
  retries blindly after a write that did land.

A crash can leave a temporary file named `.deskbridge-tmp-*` next to the target; `remove_stale_temps`
deletes them (call it when opening a workspace).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import os
import platform
import queue
import secrets
import shutil
import stat
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO

from deskbridge.core.errors import BridgeError, ErrorCode

TEMP_PREFIX = ".deskbridge-tmp-"
"""Name prefix of every temporary file or directory we create next to a target."""

BACKUP_SUFFIX = ".bak"

_HASH_CHUNK = 1024 * 1024

Content = bytes | bytearray | memoryview | Callable[[BinaryIO], None]
"""What to write: the bytes themselves, or a function that streams them into the open temp file."""


# --------------------------------------------------------------------------------------------- identity


@dataclass(frozen=True)
class FileIdentity:
    """Enough to tell whether a file is still the one we saw: same inode, size, mtime and content hash."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """Non-sensitive, JSON-safe; callers hand it back as the 'observed identity' for an overwrite."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FileIdentity:
        try:
            return cls(
                device=int(data["device"]),
                inode=int(data["inode"]),
                size=int(data["size"]),
                mtime_ns=int(data["mtime_ns"]),
                sha256=str(data["sha256"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"file identity is malformed ({exc}); pass the identity object exactly as returned",
            ) from exc


def hash_file(path: Path | str) -> str:
    """SHA-256 of a file's content, read in 1 MiB chunks (OpenSSL's SHA-256 uses the CPU's SHA extensions)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_HASH_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_identity(path: Path | str) -> FileIdentity:
    """Identity of an existing regular file; `NOT_FOUND` when it is missing, `INVALID_ARGUMENT` for a directory."""
    p = Path(path)
    try:
        st = p.stat()
        if not stat.S_ISREG(st.st_mode):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{p}' is not a regular file")
        digest = hash_file(p)
        st2 = p.stat()
    except FileNotFoundError as exc:
        raise BridgeError(ErrorCode.NOT_FOUND, f"'{p}' does not exist") from exc
    # If the file moved under us while hashing, report the later stat: a later comparison then fails
    # safely (the hash belongs to a mix) rather than vouching for content we never saw.
    if (st2.st_size, st2.st_mtime_ns, st2.st_ino) != (st.st_size, st.st_mtime_ns, st.st_ino):
        digest = "changed-while-hashing"
    return FileIdentity(st2.st_dev, st2.st_ino, st2.st_size, st2.st_mtime_ns, digest)


def current_identity(path: Path | str) -> FileIdentity | None:
    """Identity of `path`, or None when nothing is there."""
    try:
        return file_identity(path)
    except BridgeError as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            return None
        raise


def same_file(a: Path | str, b: Path | str) -> bool:
    """True when both names lead to the same file (symlinks, `..`, hard links and case aliases included)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


# --------------------------------------------------------------------------------------------- low level


def fsync_dir(directory: Path | str) -> None:
    """Make a rename/creation in `directory` durable. No-op on Windows, where directories cannot be opened."""
    if sys.platform == "win32":
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _temp_name(target: Path) -> Path:
    # Keep the name short enough for 255-byte components whatever the target's name is.
    stem = target.name[:80]
    return target.with_name(f"{TEMP_PREFIX}{stem}-{secrets.token_hex(6)}")


class _Hasher:
    """SHA-256 of the temp file in write order, fed from the writer and finished in a worker thread.

    Small writes are hashed on the spot. Once a writer hands over big pieces (a large `write`, or a range it
    appended in the kernel with `copy_range`), a thread takes over: it hashes written bytes, and re-reads
    kernel-copied ranges *from the temp file itself*, so the identity is of what landed on disk. hashlib and
    pread release the GIL, so on 2 cores the hash runs beside the copy, the fsync and the caller's verify
    instead of after them.
    """

    _THREAD_FROM = 1 << 20
    """Writes of at least this many bytes start the worker (a thread costs more than hashing a small write)."""
    _READ_CHUNK = 1 << 20

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._hash: Any = hashlib.sha256()
        self._queue: queue.Queue[Any] | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._abandoned = False
        self._read_fd = -1

    def add_bytes(self, data: Any) -> None:
        if self._queue is None:
            if len(data) < self._THREAD_FROM:
                self._hash.update(data)
                return
            self._start()
        assert self._queue is not None
        # Immutable copy: the writer may reuse a bytearray/memoryview buffer after write() returns.
        self._queue.put(data if isinstance(data, bytes) else bytes(data))

    def add_range(self, offset: int, length: int) -> None:
        """`length` bytes at `offset` of the temp file are final (appended in the kernel); hash them from disk."""
        if self._queue is None:
            self._start()
        assert self._queue is not None
        self._queue.put((offset, length))

    def _start(self) -> None:
        # Our own descriptor: the writer closes the temp file before the hash is necessarily done.
        self._read_fd = os.dup(self._fd)
        self._queue = queue.Queue(maxsize=64)  # back-pressure: a fast writer cannot pile up unbounded bytes
        self._thread = threading.Thread(target=self._run, name="deskbridge-hash", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        assert self._queue is not None
        buf = bytearray(self._READ_CHUNK)
        view = memoryview(buf)
        failed = False
        while True:
            item = self._queue.get()
            if item is None:
                break
            if failed or self._abandoned:
                continue  # keep draining so the writer never blocks on a full queue
            try:
                if isinstance(item, bytes):
                    self._hash.update(item)
                    continue
                offset, length = item
                end = offset + length
                while offset < end:
                    n = os.preadv(self._read_fd, [view[: min(self._READ_CHUNK, end - offset)]], offset)
                    if n <= 0:
                        raise OSError(errno.EIO, f"temp file ended at {offset} while hashing it")
                    self._hash.update(view[:n])
                    offset += n
            except BaseException as exc:  # reported by hexdigest()
                self._error = exc
                failed = True
        os.close(self._read_fd)

    def hexdigest(self) -> str:
        """Wait for the worker (if any) and return the digest; raises what the worker hit."""
        if self._thread is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        if self._abandoned:
            raise RuntimeError("the running hash was abandoned")  # never hand out a partial digest
        return self._hash.hexdigest()

    def abandon(self) -> None:
        """Stop the worker without a result (the write failed or hashing was turned off)."""
        self._abandoned = True
        if self._thread is not None:
            assert self._queue is not None
            self._queue.put(None)
            self._thread.join()
            self._thread = None


class _HashingFile:
    """The temp file as a writer sees it: writes are hashed on the way, so the new identity needs no re-read.

    `copy_range(source_fd, offset, length)` appends part of another file in the kernel
    (`os.copy_file_range`) and keeps the running hash: the worker re-reads the copied bytes from the temp file.
    Anything that could write around `write`/`copy_range` (seeking, `fileno()` for `os.write`/`tofile`,
    `writelines`, `truncate`) turns the running hash off; the temp file is then hashed after writing instead.
    """

    COPY_CHUNK = 4 << 20
    """Kernel copies go in pieces of this size, so the hash of one piece runs while the next is copied."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self._hasher: _Hasher | None = _Hasher(f.fileno())

    def write(self, data: Any) -> int:
        n = self._f.write(data)
        if self._hasher is not None:
            if isinstance(data, bytes) and n == len(data):
                self._hasher.add_bytes(data)  # immutable: the worker may keep it without a copy
            else:
                self._hasher.add_bytes(memoryview(data).cast("B")[: n if n is not None else None])
        return n

    def copy_range(self, source_fd: int, offset: int, length: int) -> int:
        """Append `length` bytes of `source_fd` from `offset` without passing them through Python.

        Returns how many bytes were appended: fewer than `length` at the source's end, or when the
        platform or file system refuses the kernel copy (then the caller writes the rest with `write`).
        """
        if not hasattr(os, "copy_file_range") or length <= 0:
            return 0
        f = self._f
        f.flush()
        fd = f.fileno()
        pos = f.tell()
        os.lseek(fd, pos, os.SEEK_SET)
        done = 0
        try:
            while done < length:
                n = os.copy_file_range(source_fd, fd, min(self.COPY_CHUNK, length - done), offset + done)
                if n <= 0:
                    break  # end of the source file
                if self._hasher is not None:
                    self._hasher.add_range(pos + done, n)
                done += n
        except OSError:
            pass  # e.g. EXDEV or EINVAL: the caller copies the rest through memory
        f.seek(pos + done)
        return done

    def __getattr__(self, name: str) -> Any:
        if name in ("seek", "fileno", "writelines", "truncate", "raw", "detach") and self._hasher is not None:
            self._hasher.abandon()
            self._hasher = None
        return getattr(self._f, name)

    def take_hasher(self) -> _Hasher | None:
        """The running hash (None when the writer wrote around it); the caller finishes or abandons it."""
        return self._hasher


class _PendingTemp:
    """A written temp file whose fsync and SHA-256 may still be finishing in threads; `result()` waits for both.

    Lets `atomic_write` run the caller's `verify` while the file is made durable and hashed (they work on the
    same page cache on different cores); the rename waits for `result()`, so nothing is published before it
    is on disk. When the writer wrote around the running hash, the whole temp file is hashed in a thread.
    """

    def __init__(
        self, tmp: Path, hasher: _Hasher | None = None, digest: str | None = None, sync_fd: int | None = None
    ) -> None:
        self._hasher = hasher
        self._digest = digest
        self._hash_error: BaseException | None = None
        self._sync_error: BaseException | None = None
        self._hash_thread: threading.Thread | None = None
        self._sync_thread: threading.Thread | None = None
        if sync_fd is not None:
            self._sync_thread = threading.Thread(
                target=self._fsync, args=(sync_fd,), name="deskbridge-fsync", daemon=True
            )
            self._sync_thread.start()
        if digest is None and hasher is None:
            self._hash_thread = threading.Thread(
                target=self._hash_file, args=(tmp,), name="deskbridge-hash", daemon=True
            )
            self._hash_thread.start()

    def _fsync(self, fd: int) -> None:
        try:
            os.fsync(fd)
        except BaseException as exc:  # reported by result()
            self._sync_error = exc
        finally:
            os.close(fd)

    def _hash_file(self, tmp: Path) -> None:
        try:
            self._digest = hash_file(tmp)
        except BaseException as exc:  # reported by result()
            self._hash_error = exc

    def result(self) -> str:
        """The temp file's SHA-256 once it is durable; raises what the fsync or the hash hit."""
        if self._sync_thread is not None:
            self._sync_thread.join()
            self._sync_thread = None
        if self._sync_error is not None:
            self.abandon()
            raise self._sync_error
        if self._hasher is not None:
            hasher, self._hasher = self._hasher, None
            self._digest = hasher.hexdigest()
        if self._hash_thread is not None:
            self._hash_thread.join()
            self._hash_thread = None
        if self._hash_error is not None:
            raise self._hash_error
        assert self._digest is not None
        return self._digest

    def abandon(self) -> None:
        """Wait for the threads without a result (the write is being given up)."""
        if self._sync_thread is not None:
            self._sync_thread.join()
            self._sync_thread = None
        if self._hasher is not None:
            self._hasher.abandon()
            self._hasher = None
        if self._hash_thread is not None:
            self._hash_thread.join()
            self._hash_thread = None


def _write_temp(
    target: Path,
    content: Content,
    existing_mode: int | None,
    new_file_mode: int = 0o666,
    *,
    background_fsync: bool = False,
) -> tuple[Path, _PendingTemp]:
    """Create, fill and flush a temp file next to `target`, and fsync it; returns it and its pending SHA-256.

    The temp file is created with its final permissions *before* any byte is written: the existing
    target's mode (so a 0600 secret never sits in a 0644 temp file), else `new_file_mode` filtered by the
    umask exactly as `open()` would. `background_fsync`: the fsync runs in a thread that the returned
    `_PendingTemp.result()` waits for (so a verify step can run meanwhile). A failure removes the temp file.
    """
    tmp = _temp_name(target)
    create_mode = stat.S_IMODE(existing_mode) if existing_mode is not None else new_file_mode
    # O_EXCL: never reuse a name, never follow a planted symlink. O_RDWR: the hash worker re-reads
    # kernel-copied ranges through a duplicate of this very descriptor (the inode we wrote, whatever the name).
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), create_mode)
    hasher: _Hasher | None = None
    digest: str | None = None
    sync_fd: int | None = None
    try:
        if existing_mode is not None and hasattr(os, "fchmod"):
            os.fchmod(fd, stat.S_IMODE(existing_mode))  # the umask may have removed bits the original had
        with os.fdopen(fd, "wb") as f:
            if callable(content):
                proxy = _HashingFile(f)
                hasher = proxy._hasher
                content(proxy)  # type: ignore[arg-type]
                hasher = proxy.take_hasher()
            else:
                f.write(content)
                digest = hashlib.sha256(content).hexdigest()
            f.flush()
            if background_fsync:
                sync_fd = os.dup(f.fileno())
            else:
                os.fsync(f.fileno())
        pending = _PendingTemp(tmp, hasher, digest, sync_fd)  # hasher and digest None: hashed in a thread
        hasher = sync_fd = None
    except BaseException:
        if hasher is not None:
            hasher.abandon()
        if sync_fd is not None:
            os.close(sync_fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return tmp, pending


class _BackgroundCheck:
    """Hashes the current target in a thread while the new content is being written (2 cores, 1 wait)."""

    def __init__(self, target: Path) -> None:
        self.target = target
        self.identity: FileIdentity | None = None
        self.stat_key: tuple[int, ...] | None = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="deskbridge-identity", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            before = _stat_key(self.target)
            self.identity = current_identity(self.target)
            after = _stat_key(self.target)
            self.stat_key = before if before == after else None
        except BaseException as exc:  # reported by result()
            self.error = exc

    def result(self) -> tuple[FileIdentity | None, tuple[int, ...] | None]:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.identity, self.stat_key


def _stat_key(path: Path) -> tuple[int, ...] | None:
    """Everything a content write changes, ctime included (which `utime` cannot set back)."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_RENAME_NOREPLACE = 1  # linux/fs.h
_RENAME_EXCL = 0x00000004  # macOS sys/stdio.h, renamex_np
_AT_FDCWD = -100
_MOVEFILE_WRITE_THROUGH = 0x8
_SYS_RENAMEAT2 = {
    "x86_64": 316,
    "amd64": 316,
    "aarch64": 276,
    "arm64": 276,
    "riscv64": 276,
    "i686": 353,
    "i386": 353,
}
_UNSUPPORTED_ERRNOS = {
    errno.ENOSYS,
    errno.EINVAL,
    getattr(errno, "ENOTSUP", -1),
    getattr(errno, "EOPNOTSUPP", -1),
}


def _raise_errno(err: int, src: Path, dst: Path) -> None:
    raise OSError(err, os.strerror(err), str(src), None, str(dst))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _native_noreplace(src: Path, dst: Path) -> bool:
    """Atomic rename that fails with EEXIST if `dst` exists. False when this platform/FS cannot do it."""
    if sys.platform.startswith("linux"):
        libc = _libc()
        fn = getattr(libc, "renameat2", None)  # glibc ≥ 2.28; else the raw system call
        if fn is not None:
            res = fn(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE)
        else:
            nr = _SYS_RENAMEAT2.get(platform.machine().lower())
            if nr is None:
                return False
            res = libc.syscall(
                nr, _AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), _RENAME_NOREPLACE
            )
        if res == 0:
            return True
        err = ctypes.get_errno()
        if err in _UNSUPPORTED_ERRNOS:
            return False
        _raise_errno(err, src, dst)
    if sys.platform == "darwin":  # pragma: no cover - not testable on the Linux CI
        libc = _libc()
        fn = getattr(libc, "renamex_np", None)  # macOS 10.12+
        if fn is None:
            return False
        if fn(os.fsencode(src), os.fsencode(dst), _RENAME_EXCL) == 0:
            return True
        err = ctypes.get_errno()
        if err in _UNSUPPORTED_ERRNOS:
            return False
        _raise_errno(err, src, dst)
    if sys.platform == "win32":  # pragma: no cover - not testable on the Linux CI
        kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
        # Without MOVEFILE_REPLACE_EXISTING, MoveFileExW fails if the target exists (files and directories).
        if kernel32.MoveFileExW(str(src), str(dst), _MOVEFILE_WRITE_THROUGH):
            return True
        werr = ctypes.get_last_error()  # type: ignore[attr-defined]
        if werr in (80, 183):  # ERROR_FILE_EXISTS, ERROR_ALREADY_EXISTS
            _raise_errno(errno.EEXIST, src, dst)
        raise ctypes.WinError(werr)  # type: ignore[attr-defined]
    return False


def _fallback_noreplace(src: Path, dst: Path) -> None:
    if src.is_dir() and not src.is_symlink():
        # mkdir is an atomic "create if absent"; rename onto our own empty directory then replaces only it.
        # If another program slipped content into it meanwhile, rename fails with ENOTEMPTY and we leave
        # their content alone.
        os.mkdir(dst)
        try:
            os.rename(src, dst)
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                _raise_errno(errno.EEXIST, src, dst)
            with contextlib.suppress(OSError):
                os.rmdir(dst)
            raise
        return
    os.link(src, dst)  # EEXIST if dst exists — atomic, never replaces
    os.unlink(src)


def rename_noreplace(src: Path | str, dst: Path | str) -> None:
    """Rename `src` to `dst` atomically, raising `FileExistsError` if `dst` exists (file or directory)."""
    src, dst = Path(src), Path(dst)
    if not _native_noreplace(src, dst):
        _fallback_noreplace(src, dst)


# --------------------------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class WriteResult:
    """Where the content landed, its new identity, and the backup of the previous content if one was made."""

    path: Path
    identity: FileIdentity
    backup_path: Path | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "writtenPath": str(self.path),
            "identity": self.identity.to_dict(),
            "backupPath": None if self.backup_path is None else str(self.backup_path),
        }


def _disk_error(exc: OSError, target: Path, *, touched: bool, committed: bool) -> BridgeError:
    data = {
        "path": str(target),
        "diskTouched": touched,
        "diskCommitted": committed,
        "originalIntact": not committed,
    }
    if committed:
        msg = f"'{target}' was written, but making it durable failed: {exc.strerror or exc}"
        return BridgeError(
            ErrorCode.INTERNAL, msg, "The new content is in place; do not retry the write.", data
        )
    reason = exc.strerror or str(exc)
    msg = f"could not write '{target}': {reason}; the original is intact"
    if isinstance(exc, PermissionError):
        return BridgeError(
            ErrorCode.ACCESS_DENIED,
            msg,
            "Choose a writable location or fix the permissions, then retry.",
            data,
        )
    if exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", -1), errno.EFBIG):
        return BridgeError(
            ErrorCode.LIMIT_EXCEEDED, msg, "Free disk space (or choose another disk), then retry.", data
        )
    return BridgeError(
        ErrorCode.INTERNAL, msg, "Nothing was changed; check the path and the disk, then retry.", data
    )


def _check_identity(target: Path, expected: FileIdentity, code: ErrorCode, *, deep: bool = True) -> None:
    """Raise `code` unless `target` is still `expected`. `deep=False` compares the stat fields only (cheap)."""
    if deep:
        now = current_identity(target)
        same = now == expected
    else:
        try:
            st = target.stat()
        except FileNotFoundError:
            now, same = None, False
        else:
            now = None
            same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
                expected.device,
                expected.inode,
                expected.size,
                expected.mtime_ns,
            )
            if not same:
                with contextlib.suppress(BridgeError, OSError):
                    now = file_identity(target)
    if not same:
        gone = now is None and not target.exists()
        raise BridgeError(
            code,
            f"'{target}' no longer exists" if gone else f"'{target}' changed since it was observed",
            data={
                "path": str(target),
                "identity": None if now is None else now.to_dict(),
                "diskTouched": False,
                "diskCommitted": False,
                "originalIntact": True,
            },
        )


def _make_backup(target: Path) -> Path:
    """Keep the current content as `<name>.bak`, replacing an older backup atomically."""
    bak = target.with_name(target.name + BACKUP_SUFFIX)
    tmp = _temp_name(bak)
    try:
        os.link(target, tmp)  # cheap and exact: the .bak shares the old inode, which the rename keeps alive
    except OSError:
        shutil.copy2(target, tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
    try:
        os.replace(tmp, bak)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return bak


def atomic_write(
    path: Path | str,
    content: Content,
    *,
    backup: bool = False,
    expected_identity: FileIdentity | None = None,
    changed_code: ErrorCode = ErrorCode.SOURCE_CHANGED,
    new_file_mode: int = 0o666,
    verify: Callable[[Path], None] | None = None,
) -> WriteResult:
    """Replace (or create) `path` with `content` atomically; the old file or the new one, never a mix.

    `expected_identity`: the file must still be exactly this (checked again right before the rename),
    else `changed_code` (`SOURCE_CHANGED` for save, `TARGET_CHANGED` for an overwriting save-as).
    `backup`: keep the previous content as `<name>.bak`. Permission bits of an existing file are kept;
    a new file gets `new_file_mode` minus the umask (pass 0o600 for secrets).
    `verify(temp_path)`: called with the complete temp file before it is renamed over the target (e.g.
    re-open a written archive and read the changes back); the temp file's fsync and content hash run in
    threads meanwhile and finish before the rename. If it raises, the temp file is removed, the target is
    untouched and the exception propagates unchanged.
    """
    target = Path(path)
    if target.is_symlink():
        # Write through the link, as editors do: replacing the link itself would cut it off its file.
        target = Path(os.path.realpath(target))
    if target.is_dir():
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{target}' is a directory; give a file path")
    if expected_identity is not None:
        # Cheap stat check first (fail fast before writing); the full content check runs before the rename.
        _check_identity(target, expected_identity, changed_code, deep=False)
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise _disk_error(exc, target, touched=False, committed=False) from exc
    check = _BackgroundCheck(target) if expected_identity is not None else None
    try:
        tmp, pending = _write_temp(target, content, mode, new_file_mode, background_fsync=verify is not None)
    except OSError as exc:
        if check is not None:
            check.result()
        raise _disk_error(exc, target, touched=True, committed=False) from exc
    except BaseException:
        if check is not None:
            check.result()
        raise
    if verify is not None:
        # Before the identity check, so that check (and the background hash) stays right before the rename.
        try:
            verify(tmp)
        except BaseException:
            pending.abandon()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            if check is not None:
                with contextlib.suppress(BaseException):
                    check.result()
            raise
    try:
        digest = pending.result()  # durable and hashed (both finished while verify ran)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if check is not None:
            with contextlib.suppress(BaseException):
                check.result()
        if isinstance(exc, OSError):
            raise _disk_error(exc, target, touched=True, committed=False) from exc
        raise
    committed = False
    try:
        if check is not None and expected_identity is not None:
            # Full content check (hashed while we wrote), then — right before the rename — proof that
            # nothing touched the file since it was hashed: any write moves its ctime.
            seen, key = check.result()
            if seen != expected_identity or key is None or _stat_key(target) != key:
                _check_identity(target, expected_identity, changed_code)  # in doubt: look again, deeply
        backup_path = _make_backup(target) if backup and mode is not None else None
        os.replace(tmp, target)
        committed = True
        fsync_dir(target.parent)
    except BridgeError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        exc.data["diskTouched"] = True
        raise
    except OSError as exc:
        if not committed:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise _disk_error(exc, target, touched=True, committed=committed) from exc
    st = target.stat()
    return WriteResult(
        target, FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, digest), backup_path
    )


def publish_new(
    path: Path | str,
    content: Content,
    *,
    new_file_mode: int = 0o666,
    verify: Callable[[Path], None] | None = None,
) -> WriteResult:
    """Create `path` with `content` only if nothing is there — atomically; else `TARGET_EXISTS`, disk untouched.

    `verify(temp_path)` as in `atomic_write`: checks the complete temp file before it is published.
    """
    target = Path(path)
    try:
        tmp, pending = _write_temp(target, content, None, new_file_mode, background_fsync=verify is not None)
    except OSError as exc:
        raise _disk_error(exc, target, touched=True, committed=False) from exc
    if verify is not None:
        try:
            verify(tmp)
        except BaseException:
            pending.abandon()
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    try:
        digest = pending.result()
        rename_noreplace(tmp, target)
    except FileExistsError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        existing = None
        with contextlib.suppress(BridgeError, OSError):
            existing = file_identity(target).to_dict()
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{target}' already exists",
            data={
                "path": str(target),
                "identity": existing,
                "diskTouched": True,
                "diskCommitted": False,
                "originalIntact": True,
            },
        ) from exc
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _disk_error(exc, target, touched=True, committed=False) from exc
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    try:
        fsync_dir(target.parent)
        st = target.stat()
    except OSError as exc:
        raise _disk_error(exc, target, touched=True, committed=True) from exc
    return WriteResult(target, FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, digest))


def publish_directory(path: Path | str, fill: Callable[[Path], None]) -> Path:
    """Build a directory with `fill(tmp_dir)` next to `path`, then publish it there only if `path` is absent.

    The target never exists half-written: either the complete directory appears at once or nothing does
    (`TARGET_EXISTS` when the name is taken, also when taken while `fill` ran). Files written by `fill`
    should use plain writes; they are fsynced here before publishing.
    """
    target = Path(path)
    if target.exists() or target.is_symlink():
        # Early and cheap; the authoritative check is the no-overwrite rename below.
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{target}' already exists",
            data={"path": str(target), "diskTouched": False, "diskCommitted": False},
        )
    tmp = _temp_name(target)
    try:
        os.mkdir(tmp)
    except OSError as exc:
        raise _disk_error(exc, target, touched=False, committed=False) from exc
    try:
        fill(tmp)
        _fsync_tree(tmp)
        rename_noreplace(tmp, target)
    except FileExistsError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{target}' already exists",
            data={"path": str(target), "diskTouched": True, "diskCommitted": False},
        ) from exc
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _disk_error(exc, target, touched=True, committed=False) from exc
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    with contextlib.suppress(OSError):
        fsync_dir(target.parent)
    return target


def _fsync_tree(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            with open(p, "rb") as f:
                os.fsync(f.fileno())
        fsync_dir(dirpath)


def remove_stale_temps(directory: Path | str, older_than_s: float = 3600.0) -> int:
    """Delete temporary files/directories a crashed write left in `directory`; returns how many.

    Only entries untouched for `older_than_s` seconds go, so a write still running in another process
    (another deskbridge, another workspace in the same folder) keeps its temp file.
    """
    removed = 0
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return 0
    for entry in entries:
        if not entry.name.startswith(TEMP_PREFIX):
            continue
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime < older_than_s:
                continue
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path)
            else:
                os.unlink(entry.path)
            removed += 1
        except OSError:
            continue
    return removed


# --------------------------------------------------------------------------------------------- bounded reads


def read_regular_file(path: Path | str, *, max_bytes: int, shown_as: str | None = None) -> bytes:
    """Read a whole *regular* file of at most `max_bytes`, or raise a `BridgeError`.

    Every kind reads the person's files through this one function, because a path can name something that
    is not a file: a FIFO blocks `open()` forever, `/dev/zero` never ends, a socket errors late. The file is
    opened with `O_NONBLOCK` (so a FIFO's open returns at once), checked with `S_ISREG` on the open
    descriptor (not the path, which could be swapped after a check), and read with a hard cap so a file
    that grows while we read cannot exhaust memory. `shown_as` is the name the caller gave; errors use it,
    never the resolved path, so a refused read does not reveal where a link points.
    """
    name = shown_as if shown_as is not None else str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise BridgeError(ErrorCode.NOT_FOUND, f"{name}: no such file") from None
    except OSError as exc:
        raise BridgeError(
            ErrorCode.ACCESS_DENIED, f"{name}: cannot be opened ({exc.strerror or 'error'})"
        ) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"{name}: not a regular file (a folder, pipe, device or socket); only files can be read",
                hint="Pass the path of an ordinary file inside the workspace.",
            )
        if st.st_size > max_bytes:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"{name}: {st.st_size:,} bytes is over the {max_bytes:,}-byte limit for this read",
                data={"size": st.st_size, "limit": max_bytes},
            )
        with contextlib.suppress(AttributeError, OSError):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(_HASH_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > max_bytes:
                raise BridgeError(
                    ErrorCode.LIMIT_EXCEEDED,
                    f"{name}: grew past the {max_bytes:,}-byte limit while it was read",
                    data={"limit": max_bytes},
                )
        return b"".join(chunks)
    finally:
        os.close(fd)
