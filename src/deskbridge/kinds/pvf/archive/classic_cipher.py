"""The classic PVF block cipher, path name hash and checksums, vectorised with numpy (research/pvf.md §1A).

Cipher (identical in pvfUtility, pvf-parser-ts, chunk.md, xentax): per little-endian dword,
decrypt `v = ROR32(v ^ 0x81A79011 ^ crc, 6)`, encrypt `v = ROL32(v, 6) ^ crc ^ 0x81A79011`; blocks are whole
dwords (`(len + 3) & ~3`) and the bytes past the true length are zero after decrypting.
Checksums are plain `zlib.crc32(data, seed)` (research §1A "Checksums", verified against PU's table code).
"""

from __future__ import annotations

import zlib

import numpy as np

KEY = 0x81A79011
TRAILER = b"\0This pvf Pack was created by pvfUtility."
"""41-byte trailer pvfUtility and pvf-parser-ts append (research §1A writer step 6)."""


def aligned(n: int) -> int:
    """Block length of an n-byte payload: rounded up to whole dwords."""
    return (n + 3) & ~3


def decrypt(block: bytes | memoryview, crc: int, size: int | None = None) -> bytes:
    """Decrypt a dword-aligned block with its key; keep the first `size` bytes (default: all)."""
    n = len(block)
    if n % 4:
        block = bytes(block) + b"\0" * (4 - n % 4)
    v = np.frombuffer(block, dtype="<u4") ^ np.uint32((KEY ^ crc) & 0xFFFFFFFF)
    out = ((v >> np.uint32(6)) | (v << np.uint32(26))).tobytes()
    return out if size is None else out[:size]


def encrypt(data: bytes | memoryview, crc: int) -> bytes:
    """Encrypt a payload (zero-padded to whole dwords) with its key."""
    n = len(data)
    if n % 4:
        data = bytes(data) + b"\0" * (4 - n % 4)
    v = np.frombuffer(data, dtype="<u4")
    out = ((v << np.uint32(6)) | (v >> np.uint32(26))) ^ np.uint32((KEY ^ crc) & 0xFFFFFFFF)
    return out.tobytes()


def name_hash(path_bytes: bytes) -> int:
    """djb2 variant over the CP949 path bytes: h = 0x1505; h = h*33 + b; result h*33 (PU `GetFileNameHashCode`)."""
    h = 0x1505
    for b in path_bytes:
        h = (h * 33 + b) & 0xFFFFFFFF
    return (h * 33) & 0xFFFFFFFF


def padded(data: bytes) -> bytes:
    n = len(data)
    return data if n % 4 == 0 else data + b"\0" * (4 - n % 4)


def file_checksum(data: bytes, nhash: int) -> int:
    """pvfUtility's per-file key: crc32 over the zero-padded payload, seeded with the name hash."""
    return zlib.crc32(padded(data), nhash)


def accepted_checksums(data: bytes, nhash: int) -> set[int]:
    """Every per-file key a known writer produces for this payload (PU/PT padded, pvfVSCode unpadded, PT's 0
    for an empty file) — a reader must accept all of them (data/pvf/README "Per-file checksum")."""
    keys = {zlib.crc32(padded(data), nhash), zlib.crc32(data, nhash)}
    if not data:
        keys.add(0)
    return keys


def tree_checksum(plain_tree: bytes, file_count: int) -> int:
    """dirTreeChecksum = crc32(plain tree padded to 4, fileCount) (PU `SavePvfPack`)."""
    return zlib.crc32(padded(plain_tree), file_count & 0xFFFFFFFF)
