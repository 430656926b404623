"""Writing an edited nkpi archive: only dirty chunks are recompressed (research/pvf.md §1B "Writer", PF `save.go`).

Untouched chunks are copied as ciphertext; a chunk holding a replaced or deleted file is rebuilt from its
live files in DataOffset order (files that shared bytes keep sharing them), recompressed with zlib and
re-encrypted; new files go to one appended chunk (split every 16 MiB so no chunk grows unbounded). The
file table keeps its order with new files appended (what pvfVSCode and pvfine do); the hash table is rebuilt
only when files were added or removed; the name table only when the pools gained strings; GRPI and the
header are always re-encrypted. Paged archives get their AES page guards re-applied while streaming out.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING, BinaryIO

import numpy as np

from deskbridge.core.errors import BridgeError

from . import nkpi_header as hdr
from .base import kernel_copy, norm_path
from .nkpi_cipher import MAGIC_DATA, crypt
from .nkpi_paged import PAGE_SIZE, NkpiKeys, aes_cbc_encrypt, guard_length
from .nkpi_tables import FILE_DTYPE, build_grpi, build_hash_table

if TYPE_CHECKING:
    from .base import Progress
    from .nkpi import NkpiArchive
    from .nkpi_pools import StringPools

NEW_CHUNK_MAX = 16 * 1024 * 1024
ZLIB_LEVEL = 6
"""zlib's default level: the vectors' chunks (pvfVSCode/pako) and pvfine (Go) both write `78 9C` streams."""


class _PageGuardWriter:
    """File-like wrapper that AES-encrypts the first 0x2800 bytes of every 10 MiB page on the way out."""

    def __init__(self, out: BinaryIO, keys: NkpiKeys, total: int) -> None:
        self._out, self._keys, self._total = out, keys, total
        self._pos = 0
        self._pending = bytearray()

    def write(self, data: bytes) -> None:
        mv = memoryview(data)
        while len(mv):
            page = self._pos // PAGE_SIZE
            in_page = self._pos - page * PAGE_SIZE
            glen = guard_length(page, self._total)
            if in_page < glen:
                take = min(len(mv), glen - in_page)
                self._pending += mv[:take]
                if len(self._pending) == glen:
                    self._out.write(aes_cbc_encrypt(self._keys.page_key(page), bytes(self._pending)))
                    self._pending.clear()
            else:
                take = min(len(mv), (page + 1) * PAGE_SIZE - self._pos)
                self._out.write(mv[:take])
            self._pos += take
            mv = mv[take:]


class _Emitter:
    """Writes parts in order and reports progress in bytes (also for parts copied by the kernel)."""

    def __init__(self, sink: BinaryIO | _PageGuardWriter, total: int, progress: Progress | None) -> None:
        self._sink, self._total, self._progress = sink, total, progress
        self.done = 0

    def __call__(self, data: bytes) -> None:
        self._sink.write(data)
        self.advance(len(data))

    def advance(self, n: int) -> None:
        self.done += n
        if self._progress:
            self._progress(self.done, self._total)


def _rebuild_chunk(
    ar: NkpiArchive, c: int, members: np.ndarray, replaced: dict[int, bytes], files: np.ndarray
) -> bytes:
    """New plaintext of chunk `c`; updates the members' DataOffset/DataSize in `files`."""
    old = ar.chunk(c)
    order = members[np.argsort(files["offset"][members], kind="stable")]
    parts: list[bytes] = []
    pos = 0
    shared: dict[tuple[int, int], int] = {}
    for i in order.tolist():
        data = replaced.get(i)
        if data is None:
            key = (int(files["offset"][i]), int(files["size"][i]))
            if key in shared:
                files["offset"][i] = shared[key]
                continue
            data = old[key[0] : key[0] + key[1]]
            shared[key] = pos
        files["offset"][i] = pos
        files["size"][i] = len(data)
        parts.append(data)
        pos += len(data)
    return b"".join(parts)


def write_archive(ar: NkpiArchive, out: BinaryIO, progress: Progress | None = None) -> dict[str, int]:
    """Stream the archive with its staged overlay applied into `out`.

    Returns where each replaced or added file landed (lookup key → new file-table index), so the save can be
    verified without building the written archive's whole path index.
    """
    keys_map = ar._original_keys()
    files = ar.files.copy()
    live = np.ones(len(files), dtype=bool)
    replaced: dict[int, bytes] = {}
    dirty: set[int] = set()
    new_files: list[tuple[str, bytes]] = []
    for key, data in ar.iter_overlay():
        if key in keys_map:
            i = ar._entry(key)
            dirty.add(int(files["chunk"][i]))
            if data is None:
                live[i] = False
            else:
                replaced[i] = data
        elif data is not None:
            new_files.append((ar._overlay_names[key], data))

    # Names and folders of new files go into the pools first: they are references too (found again below).
    for path, _ in new_files:
        folder, _, name = path.rpartition("/")
        ar.pools.add(name)
        ar.pools.add(folder)
    pools, moved, written = _pools_to_write(ar, files, replaced, new_files)
    if written:
        replaced = {i: written.get(i, data) for i, data in replaced.items()}
        new_files = [(path, written.get(path, data)) for path, data in new_files]
        ar._written_payloads = {
            **{norm_path(ar.entry_path(i)): data for i, data in written.items() if isinstance(i, int)},
            **{norm_path(p): data for p, data in written.items() if isinstance(p, str)},
        }

    kept_index = np.cumsum(live) - 1
    landed = {
        key: int(kept_index[ar._entry(key)])
        for key, data in ar.iter_overlay()
        if data is not None and key in keys_map
    }
    landed.update({norm_path(path): int(live.sum()) + k for k, (path, _) in enumerate(new_files)})
    chunk_plain: dict[int, bytes] = {}
    if dirty:
        by_chunk = files["chunk"]
        for c in sorted(dirty):
            members = np.flatnonzero((by_chunk == c) & live)
            chunk_plain[c] = _rebuild_chunk(ar, c, members, replaced, files)
    files = files[live]

    # New files: names into the pools, payloads into appended chunks.
    group_count = len(ar.grpi)
    extra: list[np.void] = []
    buf: list[bytes] = []
    buf_len = 0
    for path, data in new_files:
        folder, _, name = path.rpartition("/")
        if buf and buf_len + len(data) > NEW_CHUNK_MAX:
            chunk_plain[group_count] = b"".join(buf)
            group_count, buf, buf_len = group_count + 1, [], 0
        entry = np.zeros(1, dtype=FILE_DTYPE)[0]
        name_off, folder_off = ar.pools.add(name), ar.pools.add(folder)
        entry["name"], entry["path"] = moved.get(name_off, name_off), moved.get(folder_off, folder_off)
        entry["chunk"], entry["offset"], entry["size"] = group_count, buf_len, len(data)
        entry["type"] = ar.data_type(path)
        extra.append(entry)
        buf.append(data)
        buf_len += len(data)
    if buf:
        chunk_plain[group_count] = b"".join(buf)
        group_count += 1
    if extra:
        files = np.concatenate([files, np.array(extra, dtype=FILE_DTYPE)])

    src, h, scheme = ar._src, ar.header, ar.scheme
    new_cipher = {
        c: crypt(zlib.compress(p, ZLIB_LEVEL), scheme.body, MAGIC_DATA) for c, p in chunk_plain.items()
    }
    comp_sizes: list[int] = []
    raw_sizes: list[int] = []
    for c in range(group_count):
        if c in new_cipher:
            comp_sizes.append(len(new_cipher[c]))
            raw_sizes.append(len(chunk_plain[c]))
        else:
            comp_sizes.append(int(ar._chunk_ends[c]) - ar._chunk_start(c))
            raw_sizes.append(int(ar.grpi["raw"][c]))

    structural = bool(new_files) or not bool(live.all())
    # None = unchanged, copied from the source below
    hash_table = crypt(build_hash_table(files, pools), scheme.hash, MAGIC_DATA) if structural else None
    name_table = pools.serialize() if pools.dirty else None
    ar._written_name_table = name_table  # lets the save's verification skip re-inflating identical pools
    ar._written_pools = pools
    grpi = crypt(build_grpi(comp_sizes, raw_sizes), scheme.grpi, MAGIC_DATA)
    new_h = h.with_sizes(
        file_count=len(files),
        body_size=sum(comp_sizes),
        group_count=group_count,
        hash_table_size=h.hash_table_size if hash_table is None else len(hash_table),
        name_table_size=h.name_table_size if name_table is None else len(name_table),
    )
    total = new_h.total_size
    sink: BinaryIO | _PageGuardWriter = (
        _PageGuardWriter(out, ar.keys, total) if ar.variant == "paged" else out
    )
    emit = _Emitter(sink, total, progress)
    direct = _direct_copier(ar, sink, out)
    emit(hdr.encrypt(new_h, scheme))
    emit(files.tobytes())
    for data, offset, size in (
        (hash_table, h.hash_table_offset, h.hash_table_size),
        (name_table, h.name_table_offset, h.name_table_size),
    ):
        if data is not None:
            emit(data)
        elif direct is not None and direct(offset, size):
            emit.advance(size)
        else:
            emit(src.read(offset, size))
    emit(grpi)
    run_start = None  # copy runs of untouched chunks in one read
    for c in range(len(ar.grpi)):
        if c in new_cipher:
            if run_start is not None:
                _copy_run(ar, run_start, c, emit, direct)
                run_start = None
            emit(new_cipher[c])
        elif run_start is None:
            run_start = c
    if run_start is not None:
        _copy_run(ar, run_start, len(ar.grpi), emit, direct)
    for c in range(len(ar.grpi), group_count):
        emit(new_cipher[c])
    return landed


def _pools_to_write(
    ar: NkpiArchive, files: np.ndarray, replaced: dict[int, bytes], new_files: list[tuple[str, bytes]]
) -> tuple[StringPools, dict[int, int], dict[int | str, bytes]]:
    """The pools this write stores: without the strings added this session that nothing written refers
    to (a plan that was compiled and then discarded leaves its strings behind in memory), so a save never
    writes garbage into the name table. Only written payloads can refer to added strings (files kept as
    they are were written before those strings existed): the string tokens of changed scripts and the
    names of new files. When a dropped string sat before a kept one, the kept one moves: the returned
    `old → new` offsets, and the payloads rewritten with them (file index or new path → bytes)."""
    from deskbridge.kinds.pvf.script.nkpi_codec import STRING_TYPES, records

    from .nkpi import DATA_SCRIPT

    added = ar.pools.added()
    if not added:
        return ar.pools, {}, {}
    scripts: dict[int | str, bytes] = {
        i: data for i, data in replaced.items() if int(files["type"][i]) == DATA_SCRIPT
    }
    scripts.update({path: data for path, data in new_files if ar.data_type(path) == DATA_SCRIPT})
    types = np.array(sorted(STRING_TYPES), dtype=np.uint8)
    used: set[int] = set()
    tokens: dict[int | str, np.ndarray] = {}
    for k, data in scripts.items():
        try:
            recs = records(data)
        except BridgeError:
            continue  # not a token stream: it refers to nothing
        tokens[k] = recs
        used.update((recs["v"][np.isin(recs["t"], types)].astype(np.int64) & 0xFFFFFFFF).tolist())
    for path, _ in new_files:
        folder, _, name = path.rpartition("/")
        used.update((ar.pools.add(name), ar.pools.add(folder)))
    drop = set(added) - used
    if not drop:
        return ar.pools, {}, {}
    pools, moved = ar.pools.without(drop)
    written: dict[int | str, bytes] = {}
    if moved:
        for k, recs in tokens.items():
            is_str = np.isin(recs["t"], types)
            vals = recs["v"].astype(np.int64) & 0xFFFFFFFF
            hits = set(vals[is_str].tolist()) & moved.keys()
            if hits:
                out = recs.copy()
                for old in hits:
                    new = moved[old]
                    out["v"][is_str & (vals == old)] = new - (1 << 32) if new >= 1 << 31 else new
                written[k] = out.tobytes()
    return pools, moved, written


def copy_source(src: object, out: BinaryIO, offset: int, length: int) -> bool:
    """Copy `length` raw source bytes from `offset` to the end of `out`, in the kernel where possible
    (`base.kernel_copy`, which keeps `atomic_write`'s running hash), the rest with ordinary reads.

    Returns False (nothing written) when the source is not a file (bytes in memory).
    """
    src_fd = getattr(src, "fd", lambda: None)()
    if src_fd is None:
        return False
    done = kernel_copy(out, src_fd, offset, length)
    if done < length:  # finish with ordinary reads (e.g. file systems that refuse part of it)
        out.write(src.raw(offset + done, length - done))  # type: ignore[attr-defined]
    return True


def _direct_copier(ar: NkpiArchive, sink: object, out: BinaryIO):  # type: ignore[no-untyped-def]
    """`kernel_copy` bound to this save, or None when the output streams through the page-guard writer."""
    if sink is not out:
        return None
    return lambda offset, length: copy_source(ar._src, out, offset, length)


def _copy_run(ar: NkpiArchive, first: int, stop: int, emit: _Emitter, direct=None) -> None:  # type: ignore[no-untyped-def]
    """Copy the ciphertext of chunks first..stop-1 verbatim, in pieces of at most 16 MiB."""
    start = ar._chunk_start(first)
    end = int(ar._chunk_ends[stop - 1])
    base = ar.header.body_offset
    step = 64 * 1024 * 1024
    for pos in range(start, end, step):
        n = min(step, end - pos)
        if direct is not None and direct(base + pos, n):
            emit.advance(n)
        else:
            emit(ar._src.read(base + pos, n))
