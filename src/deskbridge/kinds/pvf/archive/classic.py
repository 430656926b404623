"""Classic PVF archives (GUID header, XOR 0x81A79011): lazy reader, overlay writer, and a from-scratch builder.

Layout (research/pvf.md §1A): `i32 guidLen, guid, i32 fileVersion, i32 treeLen, u32 treeChecksum,
i32 fileCount`, the encrypted tree (`u32 nameHash, u32 pathLen, path (CP949), i32 dataLen, u32 checksum,
i32 relOffset` per file), then the data blocks (relative offsets from the end of the tree), then an optional
trailer. Opening reads the header and the tree only (every size is checked against the file size first);
payloads are decrypted on `read`. Writing (docs/pvf-format.md "Classic writer"): entries sorted by name hash
ascending, blocks contiguous and 4-aligned, unchanged blocks copied as ciphertext, changed ones keyed with
`crc32(padded data, nameHash)`, tree CRC = `crc32(tree, fileCount)`, the source's trailer kept.
"""

from __future__ import annotations

import array
import contextlib
import itertools
import mmap
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive.base import (
    ArchiveBase,
    FileInfo,
    Progress,
    SaveReport,
    corrupt,
    guess_kind,
    kernel_copy,
    norm_path,
)
from deskbridge.kinds.pvf.archive.budget import archive_budget, over_budget
from deskbridge.kinds.pvf.archive.classic_verify import PatchedLayout, verify_patched
from deskbridge.kinds.pvf.paths import normalize_archive_path, refuse_case_duplicates
from deskbridge.kinds.pvf.strings.encodings import (
    PATH_ENCODING,
    detect_encoding,
    mismatch_warning,
    resolve_encoding,
)

GUID_LEN_MAX = 256
_HEAD = struct.Struct("<iiIi")
_ENTRY_HEAD = struct.Struct("<II")
_ENTRY_TAIL = struct.Struct("<iIi")
STRINGTABLE = "stringtable.bin"
COPY_CHUNK = 8 << 20
ENCODING_SAMPLE_SPANS = 32
"""Open-time encoding check: runs of consecutive strings taken at this many evenly spaced table positions…"""
ENCODING_SAMPLE_RUN = 32
"""…this many strings per run…"""
ENCODING_SAMPLE_RUN_BYTES = 4096
"""…and at most this many string bytes per run (≈ 1 k strings, ≤ 128 KiB decrypted, a few ms at any size)."""


def looks_like_classic(head: bytes) -> bool:
    """First bytes are `i32 guidLen` in 1..256 followed by printable ASCII (a GUID) — research §0."""
    if len(head) < 8:
        return False
    g = struct.unpack_from("<i", head, 0)[0]
    if not 1 <= g <= GUID_LEN_MAX:
        return False
    sample = head[4 : 4 + min(g, len(head) - 4)]
    return all(0x20 <= b < 0x7F or b == 0 for b in sample)


@dataclass(frozen=True, slots=True)
class ClassicHeader:
    guid: bytes
    file_version: int
    tree_len: int
    tree_checksum: int
    file_count: int
    data_start: int
    data_end: int
    trailer: bytes

    @property
    def guid_text(self) -> str:
        return self.guid.rstrip(b"\0").decode("ascii", "replace")

    def to_dict(self) -> dict[str, object]:
        return {
            "guid": self.guid_text,
            "guidLen": len(self.guid),
            "fileVersion": self.file_version,
            "treeLen": self.tree_len,
            "treeChecksum": self.tree_checksum,
            "fileCount": self.file_count,
            "dataStart": self.data_start,
            "dataEnd": self.data_end,
            "trailer": self.trailer.hex(),
        }


@dataclass(slots=True)
class _Entry:
    path_raw: bytes
    path: str
    name_hash: int
    size: int
    checksum: int
    rel: int


class _Tree:
    """The parsed tree as columns (one list per field): 200k entries parse and index in a fraction of a second."""

    __slots__ = ("checksum", "name_hash", "path", "path_raw", "plain", "rel", "size", "tail", "used")

    def __init__(self) -> None:
        self.plain: bytes | np.ndarray = b""
        """The decrypted tree, kept so an edit-only save can patch it instead of rebuilding it (after such a
        save, the read-only uint8 array it wrote)."""
        self.tail: array.array[int] = array.array("q")
        """Offset of each entry's `dataLen, checksum, relOffset` inside `plain` (int64s in one buffer: the
        edit-only save views them as a numpy array without converting 200 k Python ints, ≈ 6-14 ms)."""
        self.used = 0
        """Bytes of `plain` the entries occupy."""
        self.path_raw: list[bytes] = []
        self.path: list[str] = []
        self.name_hash: list[int] = []
        self.size: list[int] = []
        self.checksum: list[int] = []
        self.rel: list[int] = []

    def __len__(self) -> int:
        return len(self.size)

    def __getitem__(self, i: int) -> _Entry:
        return _Entry(
            self.path_raw[i], self.path[i], self.name_hash[i], self.size[i], self.checksum[i], self.rel[i]
        )

    def __iter__(self):  # type: ignore[no-untyped-def]
        return (self[i] for i in range(len(self)))


def _decode_paths(raws: list[bytes]) -> list[str]:
    """CP949 paths (trailing NULs trimmed, `\\` → `/`), decoded in one go when possible."""
    joined = b"\n".join(raws)
    if joined.count(b"\n") == len(raws) - 1 and b"\0" not in joined:
        try:
            text = joined.decode("ascii")
        except UnicodeDecodeError:
            text = joined.decode(PATH_ENCODING, "replace")
        if text.count("\n") == len(raws) - 1:
            return text.replace("\\", "/").split("\n") if raws else []
    out = []
    for raw in raws:
        stripped = raw.rstrip(b"\0")
        try:
            text = stripped.decode("ascii")
        except UnicodeDecodeError:
            text = stripped.decode(PATH_ENCODING, "replace")
        out.append(text.replace("\\", "/"))
    return out


def _parse(buf: bytes | mmap.mmap | memoryview) -> tuple[ClassicHeader, _Tree, list[BridgeError]]:
    size = len(buf)
    if size < 4:
        raise corrupt(0, "a 4-byte GUID length", file_size=size)
    g = struct.unpack_from("<i", buf, 0)[0]
    if not 1 <= g <= GUID_LEN_MAX:
        raise corrupt(0, f"GUID length 1..{GUID_LEN_MAX} (got {g})")
    if 4 + g + 16 > size:
        raise corrupt(4 + g, "fileVersion, treeLen, treeChecksum, fileCount after the GUID", file_size=size)
    guid = bytes(buf[4 : 4 + g])
    version, tree_len, tree_crc, count = _HEAD.unpack_from(buf, 4 + g)
    tree_at = 20 + g
    if tree_len < 0 or tree_len % 4 or tree_at + tree_len > size:
        raise corrupt(8 + g, f"a dword-aligned tree length inside the file (got {tree_len}, file {size})")
    if count < 0 or count * 20 > tree_len:
        raise corrupt(16 + g, f"a file count that fits the tree (got {count} for {tree_len} bytes)")
    tree = cc.decrypt(buf[tree_at : tree_at + tree_len], tree_crc)
    warnings: list[BridgeError] = []
    if cc.tree_checksum(tree, count) != tree_crc:
        warnings.append(
            BridgeError(
                ErrorCode.PVF_CORRUPT,
                "the file tree checksum does not match its content",
                data={"offset": 12 + g, "expected": tree_crc},
            )
        )
    data_start = tree_at + tree_len
    data_room = size - data_start
    t = _Tree()
    raws, hashes, sizes, crcs, rels, tails = t.path_raw, t.name_hash, t.size, t.checksum, t.rel, t.tail
    pos = 0
    data_end = 0  # relative end of the furthest block
    unpack_head, unpack_tail = _ENTRY_HEAD.unpack_from, _ENTRY_TAIL.unpack_from
    limit = tree_len - 20
    for i in range(count):
        if pos > limit:
            raise corrupt(tree_at + pos, f"entry {i} of {count} (tree ends)")
        nh, plen = unpack_head(tree, pos)
        end = pos + 8 + plen
        if plen > limit - pos:
            raise corrupt(tree_at + pos + 4, f"entry {i}: a path length that fits the tree (got {plen})")
        dlen, crc, rel = unpack_tail(tree, end)
        if dlen < 0 or rel < 0 or rel + dlen > data_room:
            raise corrupt(
                tree_at + end,
                f"entry {i}: a data block inside the file (offset {rel}, length {dlen}, room {data_room})",
            )
        raws.append(tree[pos + 8 : end])
        tails.append(end)
        hashes.append(nh)
        sizes.append(dlen)
        crcs.append(crc)
        rels.append(rel)
        block_end = rel + dlen
        if block_end > data_end:
            data_end = block_end
        pos = end + 12
    payloads = sum(sizes)
    if payloads > archive_budget(size):
        # blocks may overlap (nothing forbids it), so 200 k entries over one 100 MB block would ask
        # `extract` for 20 TB: refuse what no real archive declares
        raise over_budget(
            tree_at,
            "the tree's payloads together",
            payloads,
            archive_budget(size),
            f"a {size:,}-byte archive",
        )
    t.path = _decode_paths(raws)
    t.plain = tree
    t.used = pos
    data_end = min(data_start + cc.aligned(data_end), size)
    header = ClassicHeader(
        guid, version, tree_len, tree_crc, count, data_start, data_end, bytes(buf[data_end:size])
    )
    return header, t, warnings


def _index(paths: list[str]) -> tuple[dict[str, str], dict[str, int]]:
    """norm key → display path (archive order) and norm key → entry index; later duplicates are not
    addressable (they stay in the archive on save)."""
    keys = "\n".join(paths).lower().split("\n") if paths else []
    if len(keys) != len(paths) or any(k.startswith("/") for k in keys):
        keys = [norm_path(p) for p in paths]
    index = dict(zip(keys, range(len(keys)), strict=True))
    if len(index) == len(keys):
        return dict(zip(keys, paths, strict=True)), index
    by_key: dict[str, str] = {}
    first: dict[str, int] = {}
    for i, (k, p) in enumerate(zip(keys, paths, strict=True)):
        if k not in first:
            first[k] = i
            by_key[k] = p
    return by_key, first


class ClassicArchive(ArchiveBase):
    """An open classic archive; see `archive/base.py` for the protocol."""

    family = "classic"
    variant = "classic"

    def __init__(
        self, source: Path | None, buf: bytes | mmap.mmap, encoding: str | None, fh: BinaryIO | None = None
    ) -> None:
        super().__init__(source)
        self._fh = fh
        self._buf = buf
        self.header, self._entries, parse_warnings = _parse(buf)
        self.warnings.extend(parse_warnings)
        self._keys, self._index = _index(self._entries.path)
        self._encoding = resolve_encoding(encoding) if encoding else None
        self._strings_ctx = None
        self._cols: _Columns | bool | None = False  # False: not built yet (see _columns)
        self._patched_layout: PatchedLayout | None = None
        self._patched_result: _Patched | None = None
        self._verified: _Patched | None = None
        if self._encoding is not None:
            self._check_chosen_encoding()

    # ------------------------------------------------------------------------------------------- open

    @classmethod
    def open(cls, source: Path | str | bytes, *, encoding: str | None = None) -> ClassicArchive:
        if isinstance(source, bytes | bytearray | memoryview):
            return cls(None, bytes(source), encoding)
        path = Path(source)
        fh = open(path, "rb")  # noqa: SIM115 - kept open for the mmap's lifetime, closed in close()
        try:
            size = os.fstat(fh.fileno()).st_size
            buf: bytes | mmap.mmap = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            return cls(path, buf, encoding, fh)
        except BaseException:
            fh.close()
            raise

    def close(self) -> None:
        if isinstance(self._buf, mmap.mmap):
            self._buf.close()
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _reopen(self, path: Path) -> None:
        done, self._verified = self._verified, None
        if done is not None and self._rebind_patched(path, done):
            return
        enc = self.encoding
        self.close()
        fresh = ClassicArchive.open(path, encoding=enc)
        self._fh, self._buf = fresh._fh, fresh._buf
        self.header, self._entries = fresh.header, fresh._entries
        self._keys, self._index = fresh._keys, fresh._index
        self._strings_ctx = None
        self._cols = False

    # ------------------------------------------------------------------------------------------- encoding

    @property
    def encoding(self) -> str:  # type: ignore[override]
        """Pack text encoding: the caller's choice, else detected from stringtable.bin on first use."""
        if self._encoding is None:
            detection = detect_encoding(self._stringtable_entries())
            self._encoding = detection.encoding
            self.detection = detection
        return self._encoding

    def adopt_detected_encoding(self, name: str) -> None:
        """Take `name` as what detection answers, without reading stringtable.bin again: for a caller that
        detected it on these same bytes before (the workspace keeps it by the archive's content digest).
        An encoding chosen at open stays."""
        if self._encoding is None:
            self._encoding = resolve_encoding(name)

    def check_encoding(self) -> BridgeError | None:
        """ENCODING_MISMATCH warning when the chosen encoding reads stringtable.bin clearly worse than another."""
        detection = detect_encoding(self._stringtable_entries())
        warning = mismatch_warning(self.encoding, detection)
        if warning is not None and all(w.message != warning.message for w in self.warnings):
            self.warnings.append(warning)
        return warning

    def _check_chosen_encoding(self) -> None:
        """On open with an explicit encoding: ENCODING_MISMATCH in `warnings` when a bounded sample of
        stringtable.bin reads clearly better in another encoding (the full `check_encoding` reads it all)."""
        sample = self._stringtable_sample()
        warning = mismatch_warning(self.encoding, detect_encoding(sample))
        if warning is not None:
            warning.data["sampledStrings"] = len(sample)
            self.warnings.append(warning)

    def _stringtable_sample(self) -> list[bytes]:
        """Raw strings from evenly spaced runs of stringtable.bin, decrypted straight from the archive.

        The cipher works per dword with no chaining (research/pvf.md §1A), so a window of the table is
        decrypted on its own: the count, the offsets of each run, then the run's string bytes. Anything
        out of range ends the sample early (a damaged table is reported when it is actually read).
        """
        at = self._index.get(STRINGTABLE)
        if at is None:
            return []
        e = self._entries[at]
        base = self.header.data_start + e.rel

        def window(lo: int, hi: int) -> bytes:
            hi = min(hi, e.size)
            if lo < 0 or hi <= lo:
                return b""
            lo4 = lo & ~3
            return cc.decrypt(self._buf[base + lo4 : base + cc.aligned(hi)], e.checksum)[lo - lo4 : hi - lo4]

        head = window(0, 4)
        if len(head) < 4:
            return []
        count = struct.unpack("<I", head)[0]
        if count == 0 or 4 + 4 * (count + 1) > e.size:
            return []
        out: list[bytes] = []
        for k in range(min(ENCODING_SAMPLE_SPANS, count)):
            first = k * count // ENCODING_SAMPLE_SPANS
            last = min(count, first + ENCODING_SAMPLE_RUN)
            raw = window(4 + 4 * first, 4 + 4 * (last + 1))
            if len(raw) != 4 * (last - first + 1):
                break
            offs = [o + 4 for o in struct.unpack(f"<{last - first + 1}I", raw)]
            lo, hi = offs[0], min(offs[-1], offs[0] + ENCODING_SAMPLE_RUN_BYTES)
            data = window(lo, hi)
            for a, b in itertools.pairwise(offs):
                if b < a or b > lo + len(data):
                    break
                out.append(data[a - lo : b - lo])
        return out

    def _stringtable_entries(self) -> list[bytes]:
        from deskbridge.kinds.pvf.strings.stringtable import StringTable

        if not self.exists(STRINGTABLE):
            return []
        try:
            return StringTable.parse(self.read(STRINGTABLE), "latin-1").entries()
        except BridgeError:
            return []

    # ------------------------------------------------------------------------------------------- reading

    def _original_keys(self) -> Mapping[str, str]:
        return self._keys

    def _read_original(self, key: str) -> bytes:
        e = self._entries[self._index[key]]
        return self._read_entry(e)

    def _read_entry(self, e: _Entry) -> bytes:
        start = self.header.data_start + e.rel
        block = self._buf[start : start + cc.aligned(e.size)]
        return cc.decrypt(block, e.checksum, e.size)

    def original_payloads(self, start: int, stop: int) -> list[tuple[str, bytes]]:
        """(display path, payload as stored) of the files at positions `start:stop` of the unstaged
        `paths()`, decrypted in one vectorised pass (the content index reads every file; one numpy call per
        file would cost more than the cipher itself)."""
        idx = list(self._index.values())[start:stop]
        shown = list(self._keys.values())[start:stop]
        return list(zip(shown, self._decrypt_many(idx), strict=True))

    def read_originals(self, keys: list[str], *, release: bool = False) -> list[bytes]:
        """The payloads as stored of the files with these normalised keys, decrypted in one vectorised pass
        (the script worker reads the files a script is about to visit in batches). `release`: drop the
        mapped pages just read from this process's resident set afterwards (`madvise(MADV_DONTNEED)`; clean
        file pages, read again from the page cache if needed), so one pass over a 200 MB archive does not
        leave it all resident in a memory-capped worker."""
        idx = [self._index[k] for k in keys]
        out = self._decrypt_many(idx)
        buf = self._buf
        if release and idx and isinstance(buf, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
            tree, base = self._entries, self.header.data_start
            lo = base + min(tree.rel[i] for i in idx)
            hi = base + max(tree.rel[i] + cc.aligned(tree.size[i]) for i in idx)
            lo -= lo % mmap.PAGESIZE
            with contextlib.suppress(OSError, ValueError):
                buf.madvise(mmap.MADV_DONTNEED, lo, min(hi, len(buf)) - lo)
        return out

    def _decrypt_many(self, idx: list[int]) -> list[bytes]:
        tree, base, buf = self._entries, self.header.data_start, self._buf
        rel, size, crc = tree.rel, tree.size, tree.checksum
        lens = [cc.aligned(size[i]) for i in idx]
        joined = b"".join([buf[base + rel[i] : base + rel[i] + n] for i, n in zip(idx, lens, strict=True)])
        if len(joined) != sum(lens):  # a block cut short by the end of the file: one at a time
            return [self._read_entry(self._entries[i]) for i in idx]
        keys = np.repeat(
            np.array([(cc.KEY ^ crc[i]) & 0xFFFFFFFF for i in idx], dtype=np.uint32),
            np.array(lens, dtype=np.int64) // 4,
        )
        words = np.frombuffer(joined, dtype="<u4") ^ keys
        plain = ((words >> np.uint32(6)) | (words << np.uint32(26))).astype("<u4").tobytes()
        out = []
        pos = 0
        for i, n in zip(idx, lens, strict=True):
            out.append(plain[pos : pos + size[i]])
            pos += n
        return out

    def _original_info(self, key: str) -> FileInfo:
        e = self._entries[self._index[key]]
        return FileInfo(
            e.path,
            e.size,
            guess_kind(key),
            False,
            {"name_hash": e.name_hash, "checksum": e.checksum, "offset": e.rel},
        )

    def stored_paths(self) -> list[str]:
        return list(self._entries.path)

    def raw_entries(self) -> list[dict[str, object]]:
        """Every tree entry in archive order (duplicates included), for `ls --json` and diagnostics."""
        return [
            {
                "path": e.path,
                "size": e.size,
                "name_hash": e.name_hash,
                "checksum": e.checksum,
                "offset": e.rel,
            }
            for e in self._entries
        ]

    def verify_checksums(self, progress: Progress | None = None) -> list[str]:
        """Paths whose stored key matches no known writer's rule (research §1A, data/pvf README)."""
        bad = []
        total = len(self._entries)
        for i, e in enumerate(self._entries):
            if e.checksum not in cc.accepted_checksums(self._read_entry(e), e.name_hash):
                bad.append(e.path)
            if progress is not None and i % 2048 == 0:
                progress(i, total)
        return bad

    # ------------------------------------------------------------------------------------------- text

    @property
    def strings(self):  # -> ClassicStrings (lazy; import cycle avoided)
        if self._strings_ctx is None:
            from deskbridge.kinds.pvf.archive.classic_text import ClassicStrings

            self._strings_ctx = ClassicStrings(self)
        return self._strings_ctx

    def read_text(self, path: str) -> str:
        return self.strings.read_text(path)

    def list_prefix_text(self, path: str, data: bytes, count: int) -> tuple[str, int] | None:
        """The first `count` tokens of a plain `.lst` as text, and its token count (`ClassicStrings`)."""
        return self.strings.list_prefix_text(path, data, count)

    def resolve_link(self, table_id: int, key: str) -> str | None:
        """Text of the string link `<table_id::key>` (n_string.lst → `.str` → `key>value`), None if unresolved."""
        return self.strings.link_text(table_id, key)

    def registry(self, list_path: str):  # -> lists.Registry
        """The `.lst` registry at `list_path` (ids → directory-relative paths; `resolve(id)` → archive path)."""
        from deskbridge.kinds.pvf.lists import parse_classic_list

        return parse_classic_list(self.file_info(list_path).path, self.read(list_path), self.strings.table)

    def text_to_payload(self, path: str, text: str) -> bytes:
        return self.strings.text_to_payload(path, text)

    def stage(self, path: str, data: bytes | None) -> None:
        super().stage(path, data)
        if self._strings_ctx is not None:
            self._strings_ctx.invalidate(path)

    # ------------------------------------------------------------------------------------------- writing

    def _write_unchanged(self, out: BinaryIO, progress: Progress | None) -> None:
        size = len(self._buf)
        if self._fh is not None:  # kernel-side copy: as fast as copying the file
            sent = 0
            while sent < size:
                n = kernel_copy(out, self._fh.fileno(), sent, min(COPY_CHUNK * 8, size - sent))
                if n <= 0:
                    break
                sent += n
                if progress is not None:
                    progress(sent, size)
            if sent:
                _copy(out, self._buf, sent, size - sent)
                return
        for start in range(0, size, COPY_CHUNK):
            out.write(self._buf[start : start + COPY_CHUNK])
            if progress is not None:
                progress(min(size, start + COPY_CHUNK), size)

    def _write(self, out: BinaryIO, progress: Progress | None) -> None:
        if self._write_patched(out, progress):
            return
        plan: list[_Planned] = []
        seen: set[str] = set()
        for e in self._entries:
            key = norm_path(e.path)
            dup = key in seen
            seen.add(key)
            if not dup and key in self._overlay:
                data = self._overlay[key]
                if data is None:
                    continue
                plan.append(_Planned.from_payload(e.path_raw, e.name_hash, data))
            else:
                plan.append(
                    _Planned(
                        e.path_raw, e.name_hash, e.size, e.checksum, None, self.header.data_start + e.rel
                    )
                )
        for key, data in self._overlay.items():
            if data is not None and key not in self._index:
                raw = encode_path(self._overlay_names[key])
                plan.append(_Planned.from_payload(raw, cc.name_hash(raw), data))
        write_archive(
            out, self.header.guid, self.header.file_version, plan, self._buf, self.header.trailer, progress
        )

    def _write_patched(self, out: BinaryIO, progress: Progress | None) -> bool:
        """Edit-only fast path: same files in an already sorted, contiguous archive → patch the tree's
        lengths/keys/offsets in place (numpy) and copy the untouched block runs. Produces exactly what the
        general path would; returns False when it does not apply (adds, deletes, unusual layouts)."""
        t = self._entries
        n = len(t)
        if not n or cc.aligned(t.used) != len(t.plain):
            return False
        changed: dict[int, bytes] = {}
        for key, data in self._overlay.items():
            if data is None or key not in self._index:
                return False
            changed[self._index[key]] = data
        if len(self._index) != n:
            return False  # duplicates: leave them to the general path
        cols = self._columns()
        if cols is None:
            return False
        sizes, rels, tails = cols.sizes, cols.rels, cols.tails
        old_aligned = (sizes + 3) & ~3
        blocks: dict[int, tuple[int, int, _Encrypted]] = {}
        new_sizes = sizes.copy()
        for i, data in changed.items():
            crc = cc.file_checksum(data, t.name_hash[i])
            blocks[i] = (len(data), crc, _Encrypted(data, crc))
            new_sizes[i] = len(data)
        new_aligned = (new_sizes + 3) & ~3
        new_rels = np.zeros(n, dtype=np.int64)
        np.cumsum(new_aligned[:-1], out=new_rels[1:])
        if int(new_rels[-1] + new_aligned[-1]) > 0x7FFFFFFF:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, "the data section would exceed 2 GiB (classic offsets are i32)"
            )
        tree = np.frombuffer(t.plain, dtype=np.uint8).copy()
        cc.u32_view(tree)[tails + 8] = new_rels.astype(np.uint32)  # every relOffset, one scatter
        for i, (size, crc, _block) in blocks.items():
            struct.pack_into("<iI", tree, t.tail[i], size, crc)
        # The patched tree stays in its array (read-only from here on): no 12 MB copy into a `bytes`; it is
        # checksummed, encrypted, checked and re-bound to as a buffer.
        tree.flags.writeable = False
        plain = tree
        crc = cc.tree_checksum(plain, n)
        h = self.header
        out.write(struct.pack("<i", len(h.guid)) + h.guid + _HEAD.pack(h.file_version, len(plain), crc, n))
        cipher = cc.encrypt_view(plain, crc)
        out.write(cipher)
        fd = self._fh.fileno() if self._fh is not None else None
        start = 0
        for done, i in enumerate(sorted(blocks), start=1):  # `done` blocks written once this one is
            _copy(out, self._buf, h.data_start + int(rels[start]), int(rels[i] - rels[start]), fd)
            out.write(blocks[i][2].result())
            start = i + 1
            if progress is not None:
                progress(done, len(blocks))
        if start < n:
            _copy(
                out,
                self._buf,
                h.data_start + int(rels[start]),
                int(rels[-1] + old_aligned[-1] - rels[start]),
                fd,
            )
        out.write(h.trailer)
        self._patched_layout = PatchedLayout(
            h.guid,
            h.file_version,
            n,
            h.trailer,
            t.plain,
            tails,
            sizes,
            cols.checksums,
            {i: (norm_path(t.path[i]), data) for i, data in changed.items()},
            written_blocks={i: block.result() for i, (_size, _key, block) in blocks.items()},
            written_tree=cipher,
            written_plain=plain,
            tree_checksum=crc,
            written_keys={i: key for i, (_size, key, _block) in blocks.items()},
        )
        new_crcs = cols.checksums.copy()
        for i, (_size, key, _block) in blocks.items():
            new_crcs[i] = key
        self._patched_result = _Patched(
            plain,
            crc,
            h.data_start + int(new_rels[-1] + new_aligned[-1]),
            _Columns(new_sizes, new_rels, tails, new_crcs),
            tuple(sorted(blocks)),
        )
        return True

    def _columns(self) -> _Columns | None:
        """The tree's numeric columns as numpy arrays, when the archive has the layout the edit-only save
        patches (sorted by name hash, blocks contiguous from offset 0); built once per opened file."""
        if self._cols is False:
            t = self._entries
            tails = np.frombuffer(t.tail, dtype=np.int64).copy()  # own memory: the columns outlive `t.tail`
            tree = np.frombuffer(t.plain, dtype=np.uint8)
            # The fields straight from the decrypted tree rather than from the parsed lists: a list of 200 k
            # Python ints takes longer to convert than the bytes take to gather. Each entry's three fields
            # and the name hash of the entry after it are one gather of 16-byte items through a byte-stride
            # view (`cc.tail_and_next_hash`), the first entry's hash is at offset 0.
            fields, hashes = cc.tail_and_next_hash(tree, tails)
            sizes = fields[:, 0].view("<i4").astype(np.int64)
            checksums = fields[:, 1].astype(np.int64)
            rels = fields[:, 2].view("<i4").astype(np.int64)
            ends = np.cumsum((sizes + 3) & ~3)
            if (
                np.any(hashes[1:] < hashes[:-1])
                or rels[0] != 0
                or np.any(rels[1:] != ends[:-1])
                or np.any(sizes > 0x7FFFFFFF)
            ):
                self._cols = None
            else:
                self._cols = _Columns(sizes, rels, tails, checksums)  # `astype` made each a new array
        return self._cols

    def _begin_write(self) -> None:
        # Set by this write when it takes the edit-only path, and by its verify when that passes.
        self._patched_layout = self._patched_result = self._verified = None

    def _save_to(self, target: Path, *, backup: bool, progress: Progress | None, **kw: Any) -> SaveReport:
        try:
            return super()._save_to(target, backup=backup, progress=progress, **kw)
        finally:
            self._patched_layout = self._patched_result = None

    def _verify_written(self, path: Path, expected: Mapping[str, bytes | None]) -> int:
        """Edit-only saves are checked structurally with numpy (`classic_verify`); others re-open the file."""
        layout = self._patched_layout
        if (
            layout is not None
            and {key for key, _ in layout.changed.values()} == set(expected)
            and all(expected[key] == data for key, data in layout.changed.values())
        ):
            count = verify_patched(path, layout)
            self._verified = self._patched_result
            return count
        return super()._verify_written(path, expected)

    def _rebind_patched(self, path: Path, done: _Patched) -> bool:
        """After a verified edit-only save: bind to the written file without parsing its tree again.

        The verify step read that tree back and proved it is the source's tree with exactly `done`'s
        lengths, keys and offsets, so the columns are patched instead of re-parsed (saves ~0.4 s on 200 k
        files). Only when `path` is still the very file written (device, inode, size, mtime); else False.
        """
        ident = self._last_written
        fh = open(path, "rb")  # noqa: SIM115 - kept open for the mmap's lifetime, closed in close()
        try:
            st = os.fstat(fh.fileno())
            if ident is None or (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) != (
                ident.device,
                ident.inode,
                ident.size,
                ident.mtime_ns,
            ):
                fh.close()
                return False
            buf = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except BaseException:
            fh.close()
            raise
        t, h, cols = self._entries, self.header, done.columns
        # Patch the columns in place: only the changed entries' lengths and keys, and the offsets after
        # the first of them, differ (building and freeing 200 k-element lists again costs ~30 ms).
        for i in done.changed:
            t.size[i], t.checksum[i] = int(cols.sizes[i]), int(cols.checksums[i])
        first = min(done.changed)
        t.rel[first:] = cols.rels[first:].tolist()
        t.plain = done.plain
        self.close()
        self._fh, self._buf = fh, buf
        self.header = ClassicHeader(
            h.guid,
            h.file_version,
            h.tree_len,
            done.tree_checksum,
            h.file_count,
            h.data_start,
            done.data_end,
            h.trailer,
        )
        self._strings_ctx = None
        self._cols = cols
        return True


class _Encrypted:
    """A changed file's encrypted block; a big one is encrypted in a thread while the tree is built and the
    unchanged blocks before it are copied (numpy releases the GIL), small ones right away. The block is a
    read-only view of the array it was encrypted into (`cc.encrypt_view`): it is only written and compared."""

    BACKGROUND_FROM = 1 << 20

    def __init__(self, data: bytes, key: int) -> None:
        self._block: memoryview | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if len(data) < self.BACKGROUND_FROM:
            self._block = cc.encrypt_view(data, key)
        else:
            self._thread = threading.Thread(
                target=self._run, args=(data, key), name="pvf-encrypt", daemon=True
            )
            self._thread.start()

    def _run(self, data: bytes, key: int) -> None:
        try:
            self._block = cc.encrypt_view(data, key)
        except BaseException as exc:  # re-raised by result()
            self._error = exc

    def result(self) -> memoryview:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            raise self._error
        assert self._block is not None
        return self._block


@dataclass(frozen=True, slots=True)
class _Columns:
    sizes: np.ndarray
    rels: np.ndarray
    tails: np.ndarray
    checksums: np.ndarray


@dataclass(frozen=True, slots=True)
class _Patched:
    """The tree an edit-only save wrote, kept so `save` can re-bind to the file without re-parsing it."""

    plain: bytes | np.ndarray
    """The written tree, decrypted (a read-only uint8 array)."""
    tree_checksum: int
    data_end: int
    columns: _Columns
    changed: tuple[int, ...]
    """Indices of the entries whose payload changed."""


def encode_path(path: str) -> bytes:
    """Archive path → CP949 bytes as stored for new files: the normalised (lower-case, `/`) form, as
    pvfUtility writes it (`kinds/pvf/paths.py`)."""
    path = normalize_archive_path(path)
    try:
        return path.encode(PATH_ENCODING)
    except UnicodeEncodeError as exc:
        raise BridgeError(
            ErrorCode.ENCODING_MISMATCH,
            f"path '{path}' cannot be stored: {path[exc.start]!r} at position {exc.start} has no CP949 code "
            "(archive paths are CP949 in every tool)",
            "Rename the file using Latin letters, digits, Korean or common CJK characters.",
            data={"path": path, "position": exc.start, "character": path[exc.start]},
        ) from None


@dataclass(slots=True)
class _Planned:
    """One file of an archive being written: its tree fields and where its (encrypted) block comes from."""

    path_raw: bytes
    name_hash: int
    size: int
    checksum: int
    block: bytes | None
    """Encrypted block, or None to copy `aligned(size)` bytes from the source at `src`."""
    src: int = 0

    @classmethod
    def from_payload(cls, path_raw: bytes, nhash: int, data: bytes) -> _Planned:
        crc = cc.file_checksum(data, nhash)
        return cls(path_raw, nhash, len(data), crc, cc.encrypt(data, crc))


def build_tree(plan: list[_Planned]) -> tuple[bytes, list[int]]:
    """Plain tree bytes (padded to 4) and the relative offsets, in `plan` order."""
    parts: list[bytes] = []
    offsets: list[int] = []
    rel = 0
    head, tail = _ENTRY_HEAD.pack, _ENTRY_TAIL.pack
    for p in plan:
        parts.append(head(p.name_hash, len(p.path_raw)))
        parts.append(p.path_raw)
        parts.append(tail(p.size, p.checksum, rel))
        offsets.append(rel)
        rel += cc.aligned(p.size)
    if rel > 0x7FFFFFFF:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED, "the data section would exceed 2 GiB (classic offsets are i32)"
        )
    return cc.padded(b"".join(parts)), offsets


def write_archive(
    out: BinaryIO,
    guid: bytes,
    version: int,
    plan: list[_Planned],
    source: bytes | mmap.mmap | None,
    trailer: bytes,
    progress: Progress | None = None,
) -> None:
    """Write a whole classic archive: sort by name hash (stable), tree, blocks (runs copied from `source`)."""
    plan.sort(key=lambda p: p.name_hash)
    tree, _ = build_tree(plan)
    crc = cc.tree_checksum(tree, len(plan))
    out.write(struct.pack("<i", len(guid)) + guid + _HEAD.pack(version, len(tree), crc, len(plan)))
    out.write(cc.encrypt(tree, crc))
    total = len(plan)
    run_start = run_len = 0
    for i, p in enumerate(plan):
        n = cc.aligned(p.size)
        if p.block is None:
            if run_len and run_start + run_len == p.src:
                run_len += n
                continue
            _copy(out, source, run_start, run_len)
            run_start, run_len = p.src, n
        else:
            _copy(out, source, run_start, run_len)
            run_len = 0
            out.write(p.block)
        if progress is not None and i % 4096 == 0:
            progress(i, total)
    _copy(out, source, run_start, run_len)
    out.write(trailer)
    if progress is not None:
        progress(total, total)


def _copy(
    out: BinaryIO, source: bytes | mmap.mmap | None, start: int, length: int, source_fd: int | None = None
) -> None:
    """Append `length` source bytes from `start` to `out`: in the kernel when both are files, else through
    memory, zero-padding a block that runs past the end of a truncated source."""
    if not length:
        return
    assert source is not None
    if source_fd is not None:
        done = kernel_copy(out, source_fd, start, length)
        start, length = start + done, length - done
        if not length:
            return
    end = start + length
    for pos in range(start, end, COPY_CHUNK):
        chunk = source[pos : min(end, pos + COPY_CHUNK)]
        out.write(chunk)
        if len(chunk) < min(end, pos + COPY_CHUNK) - pos:  # block ran past EOF: pad like a zeroed tail
            out.write(b"\0" * (min(end, pos + COPY_CHUNK) - pos - len(chunk)))


def empty_classic(guid: bytes | None = None, version: int = 66282, trailer: bytes = b"") -> bytes:
    """The bytes of a classic archive with no files (header, empty tree, trailer): what `pack` and
    `build_classic` stage their files onto, so that every classic archive is written by the one writer."""
    guid = guid or b"00000000-0000-0000-0000-000000000000"
    crc = cc.tree_checksum(b"", 0)
    return struct.pack("<i", len(guid)) + guid + _HEAD.pack(version, 0, crc, 0) + trailer


def build_classic(
    out: BinaryIO,
    files: Iterable[tuple[str, bytes]],
    *,
    guid: bytes | None = None,
    version: int = 66282,
    trailer: bytes = b"",
    progress: Progress | None = None,
) -> int:
    """Write a new classic archive from (path, payload) pairs; returns the file count. Paths are stored
    normalised; two that differ only in case are refused naming both (`kinds/pvf/paths.py`). A thin
    wrapper: the files are staged onto `empty_classic(...)` and written by `ClassicArchive.write`."""
    files = list(files)
    refuse_case_duplicates([p for p, _ in files], where="the archive")
    ar = ClassicArchive(None, empty_classic(guid, version, trailer), "utf8")  # payloads are bytes already
    ar.write(out, dict(files), progress)
    return len(files)


def crc_of(data: bytes, seed: int) -> int:
    return zlib.crc32(data, seed)
