"""Check a classic archive written by the edit-only save, structurally and with numpy, before it replaces the source.

The edit-only save (`ClassicArchive._write_patched`) keeps every entry of the source in place and patches
only `dataLen, checksum, relOffset` of the tree, so the written file can be checked without re-parsing 200 k
entries in Python (research/pvf.md §1A layout; docs/pvf-format.md "Verify after writing"):

* header: GUID, version, tree length, file count as written; the tree inside the file; its checksum
  (`crc32(tree, fileCount)`) matches the decrypted tree read back;
* nothing but the patched fields (`dataLen, checksum, relOffset` at the known tail offsets) differs from
  the source tree — so paths, path lengths (the entry boundaries chain) and the name-hash order are the
  source's —, the unchanged files keep their length and key, the blocks are contiguous and 4-aligned, and
  the file ends with the source's trailer exactly where the blocks end;
* every changed file: its entry's path is the staged path, its key is the writer's rule, and its block
  read back from the file and decrypted equals the staged payload.

Any failure is `INTERNAL` "verify failed: …": the caller (`core.files.atomic_write`) then removes the
temporary file and the target is untouched.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.strings.encodings import PATH_ENCODING

_HEAD = struct.Struct("<iiIi")


@dataclass(frozen=True, slots=True)
class PatchedLayout:
    """What an edit-only save wrote: the source's tree and the changed entries, as the verifier needs them."""

    guid: bytes
    file_version: int
    file_count: int
    trailer: bytes
    source_tree: bytes | np.ndarray
    """The source's decrypted tree; the written tree differs from it only in patched tail fields."""
    tails: np.ndarray
    """int64 offset of each entry's `dataLen, checksum, relOffset` in the tree (same in source and output)."""
    source_sizes: np.ndarray
    source_checksums: np.ndarray
    changed: dict[int, tuple[str, bytes]]
    """Entry index → (lookup key, staged payload)."""
    written_blocks: dict[int, bytes | memoryview] | None = None
    """Entry index → the encrypted block the writer wrote for it (under the key the check confirms), or
    None: then each block read back is decrypted and compared with its payload instead."""
    written_tree: bytes | memoryview | None = None
    """The encrypted tree the writer wrote, or None: then the tree read back is decrypted and its checksum
    recomputed. With it, the tree read back must be these bytes exactly; the header's key was just checked
    to be `tree_checksum`, and the cipher is a bijection for a fixed key, so the tree on disk is then
    `written_plain` — checked below like a decrypted one, without decrypting and re-hashing 12 MB."""
    written_plain: bytes | np.ndarray | None = None
    tree_checksum: int | None = None
    written_keys: dict[int, int] | None = None
    """Entry index → the key (`cc.file_checksum` of the payload) the writer computed for it, or None: then
    each key is computed again from the payload (a 21 MB string table costs ~10 ms of crc32 each time)."""


def _fail(what: str) -> BridgeError:
    return BridgeError(
        ErrorCode.INTERNAL,
        f"verify failed: {what}",
        "The archive on disk is unchanged; report this as a bug with the file that was staged.",
    )


def _pread_exact(fd: int, length: int, offset: int, what: str) -> bytes:
    data = os.pread(fd, length, offset)
    while len(data) < length:
        more = os.pread(fd, length - len(data), offset + len(data))
        if not more:
            raise _fail(f"{what} ends early at offset {offset + len(data)}")
        data += more
    return data


_COMPARE_STEP = 1 << 20
"""Bytes read back and compared at a time (one reused buffer, so the check allocates no 21 MB copies)."""


def _same_on_disk(fd: int, offset: int, expected: bytes | memoryview, what: str) -> bool:
    """Whether the file holds exactly `expected` at `offset`, read back a step at a time into one buffer
    (a `bytearray` compared with a memoryview slice is one `memcmp`, no copy)."""
    want = memoryview(expected).cast("B")
    n = len(want)
    buf = bytearray(min(n, _COMPARE_STEP))
    view = memoryview(buf)
    pos = 0
    while pos < n:
        step = min(len(buf), n - pos)
        if step < len(buf):
            buf = bytearray(step)
            view = memoryview(buf)
        got = 0
        while got < step:
            k = _read_into(fd, view[got:], offset + pos + got)
            if k <= 0:
                raise _fail(f"{what} ends early at offset {offset + pos + got}")
            got += k
        if buf != want[pos : pos + step]:
            return False
        pos += step
    return True


def _read_into(fd: int, view: memoryview, offset: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(fd, [view], offset)
    data = os.pread(fd, len(view), offset)
    view[: len(data)] = data
    return len(data)


def _decode_path(raw: bytes) -> str:
    stripped = raw.rstrip(b"\0")
    try:
        return stripped.decode("ascii").replace("\\", "/")
    except UnicodeDecodeError:
        return stripped.decode(PATH_ENCODING, "replace").replace("\\", "/")


def verify_patched(path: Path, layout: PatchedLayout) -> int:
    """Check the archive at `path` against `layout` (see the module docstring); returns the changed-file count."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        return _verify(fd, os.fstat(fd).st_size, layout)
    finally:
        os.close(fd)


def _verify(fd: int, size: int, layout: PatchedLayout) -> int:
    g = len(layout.guid)
    head = _pread_exact(fd, 20 + g, 0, "the header")
    if struct.unpack_from("<i", head, 0)[0] != g or head[4 : 4 + g] != layout.guid:
        raise _fail("the GUID in the header is not the one written")
    version, tree_len, tree_crc, count = _HEAD.unpack_from(head, 4 + g)
    if (version, count) != (layout.file_version, layout.file_count) or tree_len != len(layout.source_tree):
        raise _fail(f"header fields read back as version {version}, {count} files, tree {tree_len} bytes")
    data_start = 20 + g + tree_len
    if tree_len % 4 or data_start > size:
        raise _fail(f"the tree ({tree_len} bytes) does not fit the file ({size} bytes)")
    if layout.written_tree is not None and layout.written_plain is not None:
        if (
            tree_crc != layout.tree_checksum
            or len(layout.written_tree) != tree_len
            or not _same_on_disk(fd, 20 + g, layout.written_tree, "the tree")
        ):
            raise _fail("the tree checksum or the tree read back is not the one written")
        plain = layout.written_plain
    else:
        plain = cc.decrypt(_pread_exact(fd, tree_len, 20 + g, "the tree"), tree_crc)
        if cc.tree_checksum(plain, count) != tree_crc:
            raise _fail("the tree checksum does not match the tree read back")

    tree = np.frombuffer(plain, dtype=np.uint8)
    tails = layout.tails
    n = len(tails)
    if n != count or (n and int(tails[-1]) + 12 > tree_len):
        raise _fail("the entries do not fit the tree")
    if n == 0:
        return 0
    # Only the patched tail fields may differ from the source tree: paths, path lengths and name hashes
    # are the source's byte for byte — so the entry boundaries chain and the entries are sorted by name
    # hash exactly as in the source, which the edit-only path requires of it (`ClassicArchive._columns`).
    # Every byte that differs, with the 12 tail bytes of each entry then cleared: anything left over is a
    # path, path length or name hash (a scatter of 12 per entry, not a search per differing byte: an edit
    # of the first file moves every later block, so every relOffset differs).
    # Counted instead of cleared: the entries' 12-byte tails are disjoint, so the differing bytes all lie in
    # tails exactly when the tails hold as many of them as the whole tree (one XOR, two counts and one
    # gather of 12-byte items: ≈ 8 ms on classic-200k, where clearing the tails of a 12 MB mask took ≈ 25).
    differs = np.bitwise_xor(tree, np.frombuffer(layout.source_tree, dtype=np.uint8))
    if np.any(np.diff(tails) < 12) or np.count_nonzero(differs) != np.count_nonzero(
        cc.tail_fields(differs, tails).view(np.uint8)
    ):
        raise _fail("a path, path length or name hash in the tree differs from the source")
    fields = cc.tail_fields(tree, tails)  # dataLen, checksum, relOffset
    sizes = fields[:, 0].view("<i4").astype(np.int64)
    checksums = fields[:, 1].astype(np.int64)
    rels = fields[:, 2].view("<i4").astype(np.int64)

    kept = np.ones(n, dtype=bool)
    kept[list(layout.changed)] = False
    if np.any(sizes[kept] != layout.source_sizes[kept]) or np.any(
        checksums[kept] != layout.source_checksums[kept]
    ):
        raise _fail("an unchanged file's length or key differs from the source")

    if np.any(sizes < 0):
        raise _fail("a negative data length in the tree")
    aligned = (sizes + 3) & ~3
    ends = np.cumsum(aligned)
    if rels[0] != 0 or np.any(rels[1:] != ends[:-1]):
        raise _fail("the data blocks are not contiguous")
    data_end = data_start + int(ends[-1])
    if data_end + len(layout.trailer) != size:
        raise _fail(
            f"the file is {size} bytes; the blocks and trailer end at {data_end + len(layout.trailer)}"
        )
    if _pread_exact(fd, len(layout.trailer), data_end, "the trailer") != layout.trailer:
        raise _fail("the trailer differs from the source's")

    for i, (key, data) in layout.changed.items():
        head = 0 if i == 0 else int(tails[i - 1]) + 12
        name_hash = struct.unpack_from("<I", plain, head)[0]
        name = _decode_path(bytes(plain[head + 8 : int(tails[i])]))
        if norm_path(name) != key:
            raise _fail(f"entry {i} is '{name}', expected '{key}'")
        if int(sizes[i]) != len(data):
            raise _fail(f"'{name}' has length {int(sizes[i])}, expected {len(data)}")
        keys = layout.written_keys
        key = keys[i] if keys is not None and i in keys else cc.file_checksum(data, name_hash)
        if int(checksums[i]) != key:
            raise _fail(f"'{name}' has the wrong key for its payload")
        at = data_start + int(rels[i])
        written = None if layout.written_blocks is None else layout.written_blocks.get(i)
        if written is not None:
            # The cipher is a bijection for a fixed key (XOR, then a rotation per dword), and the key in the
            # tree read back was just checked to be the payload's: the block decrypts to the payload exactly
            # when it is the payload's encryption, so a byte compare spares decrypting a 21 MB string table.
            if len(written) != int(aligned[i]) or not _same_on_disk(fd, at, written, f"'{name}'"):
                raise _fail(f"'{name}' reads back different bytes")
        elif (
            cc.decrypt(_pread_exact(fd, int(aligned[i]), at, f"'{name}'"), int(checksums[i]), len(data))
            != data
        ):
            raise _fail(f"'{name}' reads back different bytes")
    return len(layout.changed)
