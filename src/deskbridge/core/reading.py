"""The one bounded read of a person's file (`read_regular_file`), in a module of its own.

`deskbridge.core.files` re-exports it; it lives here because it needs only `os` and `stat`, while importing
`core.files` (its write machinery: dataclasses, ctypes, secrets, platform, shutil, blake3) costs more than
the read itself on a short path: a SAGE cold build reads ~1,150 files in worker processes forked as soon as
possible, and everything imported before the fork delays every worker.
"""

from __future__ import annotations

import contextlib
import os
import stat

from deskbridge.core.errors import BridgeError, ErrorCode

TYPE_CHECKING = False  # `typing`/`pathlib` are not needed to read
if TYPE_CHECKING:
    from pathlib import Path

READ_CHUNK = 1024 * 1024
"""Bytes per `os.read` (the cap is checked between reads)."""


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
            chunk = os.read(fd, min(READ_CHUNK, max_bytes + 1 - total))
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
