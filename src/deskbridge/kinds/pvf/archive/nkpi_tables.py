"""The nkpi file table, GRPI chunk index and hash table: parse, validate and build (research/pvf.md §1B).

The file table is plaintext, 24 bytes per file: `NameOffset, PathOffset, ChunkIndex, DataOffset,
DataSize, DataType`; it is held as one numpy structured array so a million entries load and validate
in milliseconds. GRPI holds per chunk `i32 cumulative compressed size, i32 original size`. The hash
table is `u32 count, count × (nameOff, pathOff), u32 n, n × u32 offsets sorted by resolved string`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from .budget import STREAM_ALLOWANCE_BYTES, STREAM_RATIO_MAX, over_budget, stream_budget
from .nkpi_errors import corrupt

if TYPE_CHECKING:
    from .nkpi_pools import StringPools

FILE_DTYPE = np.dtype(
    [
        ("name", "<u4"),
        ("path", "<u4"),
        ("chunk", "<i4"),
        ("offset", "<i4"),
        ("size", "<i4"),
        ("type", "<i4"),
    ]
)
GRPI_DTYPE = np.dtype([("comp_end", "<i4"), ("raw", "<i4")])

MAX_CHUNK_RAW = 256 * 1024 * 1024
"""Largest decompressed chunk we accept (real 90US chunks are ~73 KB; 110US UTF-16 pool chunks are bigger)."""


def parse_grpi(plain: bytes, offset: int, body_size: int) -> np.ndarray:
    """GRPI entries, validated: cumulative sizes never decrease and end at BodySize; originals bounded."""
    g = np.frombuffer(plain, dtype=GRPI_DTYPE)
    if len(g) == 0:
        if body_size != 0:
            raise corrupt(offset, "GRPI chunks covering the body", f"no chunks for {body_size} body bytes")
        return g
    ends = g["comp_end"].astype(np.int64)
    starts = np.concatenate([[0], ends[:-1]])
    comp = ends - starts
    raw_sizes = g["raw"].astype(np.int64)
    bad = np.flatnonzero((comp < 0) | (raw_sizes < 0) | (raw_sizes > MAX_CHUNK_RAW))
    if len(bad):
        i = int(bad[0])
        raise corrupt(
            offset + 8 * i,
            f"GRPI entry {i} with a non-decreasing cumulative size and an original size ≤ {MAX_CHUNK_RAW}",
            f"cumulative {int(ends[i])}, original {int(raw_sizes[i])}",
        )
    over = np.flatnonzero(raw_sizes > comp * STREAM_RATIO_MAX + STREAM_ALLOWANCE_BYTES)
    if len(over):
        i = int(over[0])
        raise over_budget(
            offset + 8 * i,
            f"chunk {i} (GRPI entry {i})",
            int(raw_sizes[i]),
            stream_budget(int(comp[i])),
            f"{int(comp[i]):,} compressed bytes",
        )
    if int(ends[-1]) != body_size:
        raise corrupt(
            offset + 8 * (len(g) - 1),
            f"last GRPI cumulative size == BodySize {body_size}",
            str(int(ends[-1])),
        )
    return g


def build_grpi(comp_sizes: Sequence[int], raw_sizes: Sequence[int]) -> bytes:
    """GRPI plaintext from per-chunk compressed and original sizes (cumulative, as the tools write it)."""
    g = np.empty(len(comp_sizes), dtype=GRPI_DTYPE)
    g["comp_end"] = np.cumsum(np.asarray(comp_sizes, dtype=np.int64))
    g["raw"] = np.asarray(raw_sizes, dtype=np.int64)
    return g.tobytes()


def check_files(
    files: np.ndarray, grpi: np.ndarray, offset: int, valid_offset: Callable[[np.ndarray], np.ndarray]
) -> None:
    """Every entry points inside its chunk and at a string inside the pools; raise on the first bad one."""
    n = len(files)
    if n == 0:
        return
    chunk = files["chunk"].astype(np.int64)
    start = files["offset"].astype(np.int64)
    size = files["size"].astype(np.int64)
    bad_chunk = (chunk < 0) | (chunk >= len(grpi))
    raw = np.zeros(n, dtype=np.int64)
    ok = ~bad_chunk
    raw[ok] = grpi["raw"][chunk[ok]]
    bad = bad_chunk | (start < 0) | (size < 0) | (start + size > raw)
    bad |= ~valid_offset(files["name"]) | ~valid_offset(files["path"])
    idx = np.flatnonzero(bad)
    if len(idx):
        i = int(idx[0])
        e = files[i]
        raise corrupt(
            offset + 24 * i,
            f"file entry {i} inside chunk 0..{len(grpi) - 1} and inside the name pools",
            f"chunk {int(e['chunk'])}, data {int(e['offset'])}+{int(e['size'])}, "
            f"name {int(e['name'])}, path {int(e['path'])}",
        )


def parse_hash_table(plain: bytes, offset: int) -> tuple[np.ndarray, np.ndarray]:
    """(pairs[count, 2], sorted offsets[n]) from the decrypted hash table; sizes checked before slicing."""
    size = len(plain)
    if size < 8:
        raise corrupt(offset, "a hash table of at least 8 bytes", f"{size} bytes")
    (count,) = struct.unpack_from("<I", plain, 0)
    if 4 + 8 * count + 4 > size:
        raise corrupt(offset, f"{count} hash pairs inside the {size}-byte hash table")
    pairs = np.frombuffer(plain, dtype="<u4", count=2 * count, offset=4).reshape(count, 2)
    (n,) = struct.unpack_from("<I", plain, 4 + 8 * count)
    if 8 + 8 * count + 4 * n != size:
        raise corrupt(
            offset + 4 + 8 * count,
            f"{n} sorted offsets filling the hash table exactly",
            f"table is {size} bytes",
        )
    sorted_offsets = np.frombuffer(plain, dtype="<u4", count=n, offset=8 + 8 * count)
    return pairs, sorted_offsets


def build_hash_table(files: np.ndarray, pools: StringPools) -> bytes:
    """The hash table the way pvfVSCode/pvfine write it: pairs in file-table order, then the de-duplicated
    name/path offsets sorted by their resolved strings in UTF-16 code-unit order (JS string comparison;
    research/pvf.md §1B, vectors README "Tree / table order"); equal strings keep first-seen order."""
    pairs = np.empty((len(files), 2), dtype="<u4")
    pairs[:, 0] = files["name"]
    pairs[:, 1] = files["path"]
    flat = pairs.reshape(-1)
    _, first = np.unique(flat, return_index=True)
    uniq = flat[np.sort(first)]
    ordered = pools.sort_offsets(uniq).astype("<u4")
    return b"".join(
        [
            struct.pack("<I", len(files)),
            pairs.tobytes(),
            struct.pack("<I", len(ordered)),
            ordered.tobytes(),
        ]
    )
