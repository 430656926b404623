"""Open, read, edit and save nkpi-family `Script.pvf` archives (90US, 90CN, 110US, 100CN, 115CN).

Detection order (PF `docs/PVF变体架构.md`, research/pvf.md §1B): LegacyNkpi ("legacy", 90US) → header
guard ("guard") → ProtectedNkpi wide-seed keys ("protected", 90CN) → page-guarded "paged" (110US/100CN/
115CN; needs user key material) → unknown keys recovered from known plaintext ("recovered"). Sections
whose scheme key does not fit are recovered one by one. Opening reads only the header, file table, hash
table, name pools and GRPI; chunks are decrypted and inflated on first read and kept in a small LRU.

Entry points used by `archive/__init__.py`: `looks_like_nkpi(head)` and `open_nkpi(source, encoding=,
keys=)`; key material comes from `nkpi_paged.load_keys(...)` (an `NkpiKeys`).
"""

from __future__ import annotations

import os
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import BinaryIO

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode

from . import nkpi_header as hdr
from .base import ArchiveBase, FileInfo, Progress, norm_path
from .budget import archive_budget, over_budget, text_budget
from .nkpi_cipher import MAGIC_DATA, SCHEMES, KeyScheme, crypt, keystream_word_at
from .nkpi_errors import corrupt, key_required, unsupported
from .nkpi_index import NOT_SURE, LazyKeys, PathIndex, PathList, PoolLookup
from .nkpi_paged import GUARD_SIZE, PAGE_SIZE, NkpiKeys, aes_cbc_decrypt, guard_length, load_keys
from .nkpi_pools import PoolKeys, StringPools
from .nkpi_recover import inflate_exact, recover_word_seed, recover_zlib_seed
from .nkpi_tables import FILE_DTYPE, check_files, parse_grpi, parse_hash_table

DATA_SCRIPT = 1
DATA_UTF16 = 3
CHUNK_CACHE_BYTES = 64 * 1024 * 1024
"""Decompressed chunks kept in the LRU (real chunks are ~73 KB, so this holds hundreds)."""
_KNOWN_POOL_MASKS = (
    (SCHEMES["legacy"].mask_a, SCHEMES["legacy"].mask_w),
    (SCHEMES["paged"].mask_a, SCHEMES["paged"].mask_w),
)


def looks_like_nkpi(head: bytes) -> bool:
    """True when the first 48 bytes decrypt to "nkpi" under a known scheme or a recoverable seed."""
    if len(head) < hdr.HEADER_SIZE:
        return False
    for scheme in SCHEMES.values():
        if scheme.name != "paged" and hdr.decrypt(head, scheme) is not None:
            return True
    return False


class _Source:
    """Random access to the archive bytes, undoing AES page guards of paged archives on the fly.

    Reads use `os.pread` rather than a memory map: random chunk reads through a map pull kernel read-ahead
    pages into the process's resident set (≈130 MB for 200 random reads on nkpi-1m), `pread` does not.
    """

    def __init__(self, source: Path | bytes, keys: NkpiKeys | None) -> None:
        self.path: Path | None = None
        self._fd: int | None = None
        self._buf: bytes = b""
        if isinstance(source, (bytes, bytearray, memoryview)):
            self._buf = bytes(source)
            self.size = len(self._buf)
        else:
            self.path = Path(source)
            try:
                self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            except OSError as exc:
                raise BridgeError(ErrorCode.NOT_FOUND, f"cannot open '{source}': {exc.strerror}") from exc
            self.size = os.fstat(self._fd).st_size
        self.keys = keys
        self.paged = False
        self._guards: dict[int, bytes] = {}

    def fd(self) -> int | None:
        """The open file descriptor (reopened if suspended), or None for an in-memory source."""
        if self._fd is None and self.path is not None:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        return self._fd

    def suspend(self) -> None:
        """Close the file handle until the next read (Windows cannot replace a file that is open)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def raw(self, offset: int, length: int) -> bytes:
        """Bytes exactly as stored (ciphertext, page guards included), clipped at the end of the file."""
        length = max(0, min(length, self.size - offset))
        if self._fd is None and self.path is not None:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        if self._fd is None:
            return self._buf[offset : offset + length]
        parts = []
        while length > 0:
            got = os.pread(self._fd, length, offset)
            if not got:
                break
            parts.append(got)
            offset += len(got)
            length -= len(got)
        return b"".join(parts) if len(parts) != 1 else parts[0]

    def read(self, offset: int, length: int) -> bytes:
        """Bytes with page guards removed (for paged archives); `PVF_CORRUPT` when outside the file."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise corrupt(offset, f"{length} bytes inside the {self.size}-byte file")
        data = self.raw(offset, length)
        if len(data) != length:
            raise corrupt(offset + len(data), f"{length} bytes (the file shrank while open)")
        if not self.paged or not length:
            return data
        out = bytearray(data)
        for page in range(offset // PAGE_SIZE, (offset + length - 1) // PAGE_SIZE + 1):
            start = page * PAGE_SIZE
            lo, hi = max(offset, start), min(offset + length, start + guard_length(page, self.size))
            if lo < hi:
                plain = self.guard_plain(page)
                out[lo - offset : hi - offset] = plain[lo - start : hi - start]
        return bytes(out)

    def guard_plain(self, page: int) -> bytes:
        hit = self._guards.get(page)
        if hit is None:
            assert self.keys is not None
            start = page * PAGE_SIZE
            glen = guard_length(page, self.size)
            hit = aes_cbc_decrypt(self.keys.page_key(page), self.raw(start, glen))
            self._guards[page] = hit
        return hit

    def close(self) -> None:
        self.suspend()
        self.path = None


def _detect(src: _Source) -> tuple[KeyScheme, hdr.Header, bool]:
    """(scheme, header, recovered) for the archive, or a typed error naming what was seen."""
    size = src.size
    if size < hdr.HEADER_SIZE:
        raise corrupt(0, "a 48-byte nkpi header", f"a {size}-byte file")
    raw = src.raw(0, hdr.HEADER_SIZE)
    found = hdr.identify(raw, size)
    if found:
        return found[0], found[1], False
    if src.keys:
        src.paged = True
        head = src.read(0, hdr.HEADER_SIZE)
        found = hdr.identify(head, size, ("paged",))
        if found:
            return found[0], found[1], False
        # 100CN/115CN may key their sections differently from 110US: recover under the page guards too.
        rec = hdr.recover(head, size)
        if rec is not None:
            seed, guarded, header = rec
            return replace(SCHEMES["paged"], header=seed, guard=guarded), header, True
        src.paged = False
    rec = hdr.recover(raw, size)
    if rec is not None:
        seed, guarded, header = rec
        base = SCHEMES["guard" if guarded else "legacy"]
        return replace(base, name="recovered", header=seed), header, True
    for name in ("legacy", "guard", "protected"):
        if hdr.decrypt(raw, SCHEMES[name]) is not None:
            h = hdr.decrypt(raw, SCHEMES[name])
            assert h is not None
            raise corrupt(
                0,
                f"header sizes adding up to the file size {size}",
                f"a {name} nkpi header whose sections add up to {h.total_size}",
            )
    if src.keys:
        raise unsupported(
            "the page keys given do not decrypt this file to an nkpi header; "
            "check that they belong to this client build",
            # the generic hint ("check the family and variant") points away from what is wrong: the keys
            hint="Pass the key material of the client build this archive comes from (its sk.dat, or its page "
            "keys).",
            first_bytes=raw[:16].hex(),
        )
    if size >= GUARD_SIZE and _maybe_paged(src):
        raise key_required(
            f"no PVF header in the clear at offset 0 (first bytes {raw[:8].hex(' ')}): this looks like a "
            "page-guarded nkpi archive (110US/100CN/115CN), whose header only the client's keys decrypt; "
            "pass its sk.dat and key parameters (or the page keys). If it is not one, it is not a PVF "
            "archive",
            first_bytes=raw[:16].hex(),
        )
    looks = _what_it_looks_like(raw)
    raise unsupported(
        f"not a PVF archive: the first bytes {raw[:8].hex(' ')} at offset 0 are neither a classic GUID header "
        f"nor an nkpi header under any known key{f' (it looks like {looks})' if looks else ''}; "
        "check that this is the game's Script.pvf",
        first_bytes=raw[:16].hex(),
    )


_MAGICS = (
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x89PNG", "a PNG image"),
    (b"%PDF", "a PDF document"),
    (b"MZ", "a Windows program"),
    (b"\x7fELF", "a Linux program"),
    (b"\x1f\x8b", "a gzip file"),
    (b"7z\xbc\xaf", "a 7-Zip archive"),
    (b"Rar!", "a RAR archive"),
    (b"NeoplePack_Bill", "a DNF .NPK image pack, not a script archive"),
)


def _what_it_looks_like(head: bytes) -> str:
    for magic, name in _MAGICS:
        if head.startswith(magic):
            return name
    if head and all(32 <= b < 127 or b in (9, 10, 13) for b in head):
        return "a text file"
    return ""


def _maybe_paged(src: _Source) -> bool:
    """Whether an opaque file could be a page-guarded nkpi archive: named `.pvf` or with an `sk.dat`
    beside it, or with plaintext file-table entries right after the first AES guard (0x2800 bytes cover
    only the start of a large archive's 24-byte entries, research/pvf.md §1B). Random bytes are none."""
    if src.path is not None and (src.path.suffix.lower() == ".pvf" or (src.path.parent / "sk.dat").exists()):
        return True
    start = hdr.HEADER_SIZE  # the file table follows the 48-byte header, 24 bytes per entry
    first = start + -(-(GUARD_SIZE - start) // 24) * 24  # the first entry wholly past the guard
    rows = np.frombuffer(src.raw(first, 24 * 32).ljust(24 * 32, b"\xff"), dtype=FILE_DTYPE)
    plausible = (
        np.isin(rows["type"], (1, 3)) & (rows["chunk"] >= 0) & (rows["size"] >= 0) & (rows["offset"] >= 0)
    )
    return int(plausible.sum()) >= 24


class NkpiArchive(ArchiveBase):
    """One open nkpi archive (see the module docstring); implements the `Archive` protocol of `base.py`."""

    family = "nkpi"

    def __init__(
        self,
        source: Path | bytes,
        *,
        encoding: str | None = None,
        keys: NkpiKeys | None = None,
        recover: bool = True,
        _pools_of: NkpiArchive | None = None,
    ) -> None:
        super().__init__(None if isinstance(source, (bytes, bytearray, memoryview)) else Path(source))
        self.keys = keys if isinstance(keys, NkpiKeys) else NkpiKeys()
        self._requested_encoding = encoding
        self._recover = recover
        """Try the 65,536-candidate zlib seed recovery for pools/body that do not inflate (≈0.5 s each)."""
        self._pools_of = _pools_of
        """Save verification: reuse this archive's parsed pools when the written name table is byte-equal."""
        self._load(source)

    # ------------------------------------------------------------------------------------------ opening
    def _load(self, source: Path | bytes) -> None:
        src = _Source(source, self.keys)
        try:
            self._parse(src)
        except BaseException:
            src.close()
            raise
        self._src = src

    def _parse(self, src: _Source) -> None:
        scheme, header, recovered = _detect(src)
        size = src.size
        hdr.check_sizes(header, size)
        # File table is plaintext; its size was validated against the file size above.
        ft = src.read(header.file_table_offset, 24 * header.file_count)
        files = np.frombuffer(ft, dtype=FILE_DTYPE)
        # Hash table (key HASH): word 0 is the pair count == FileCount, which also recovers an unknown seed.
        # Nothing reads it after opening (a save writes a new one), so when the scheme's seed explains its two
        # size words the 52 MB of a 4.3 M-file table are neither read nor decrypted (PVF-OPEN-4M).
        hash_seed = scheme.hash
        if header.hash_table_size and not self._hash_sizes_ok(src, header, scheme.hash):
            ht_raw = src.read(header.hash_table_offset, header.hash_table_size)
            hash_seed, rec = self._section_seed(
                ht_raw,
                scheme.hash,
                0,
                header.file_count,
                lambda p: self._hash_ok(p, header),
                lambda p: parse_hash_table(p, header.hash_table_offset),
                header.hash_table_offset,
                "hash table",
            )
            recovered |= rec
        # Name table: two zlib pools under the pool keys; masks from the known schemes.
        nt_raw = src.read(header.name_table_offset, header.name_table_size)
        twin = self._pools_of
        if twin is not None and self._same_name_table(twin, nt_raw):
            # identical bytes: skip inflating 60 MB again (the pools as written, unused strings left out)
            pools, rec = getattr(twin, "_written_pools", None) or twin.pools, False
        else:
            pools, rec = self._parse_pools(nt_raw, header.name_table_offset, scheme)
        recovered |= rec
        # GRPI (key GRPI): the last cumulative size must equal BodySize, which also recovers an unknown seed.
        gr_raw = src.read(header.grpi_offset, 8 * header.group_count)
        grpi_seed = scheme.grpi
        if header.group_count:
            last = 2 * (header.group_count - 1)
            grpi_seed, rec = self._section_seed(
                gr_raw,
                scheme.grpi,
                last,
                header.body_size,
                lambda p: self._grpi_ok(p, header),
                lambda p: parse_grpi(p, header.grpi_offset, header.body_size),
                header.grpi_offset,
                "GRPI",
            )
            recovered |= rec
        grpi = parse_grpi(crypt(gr_raw, grpi_seed), header.grpi_offset, header.body_size)
        check_files(files, grpi, header.file_table_offset, pools.valid)
        self._check_budget(header, files, grpi, pools, size)
        self.scheme = replace(
            scheme,
            hash=hash_seed,
            grpi=grpi_seed,
            pool_a=pools.keys.seed_a,
            pool_w=pools.keys.seed_w,
            mask_a=pools.keys.mask_a,
            mask_w=pools.keys.mask_w,
        )
        self.header = header
        self.files = files
        self.grpi = grpi
        self.pools = pools
        self._chunk_ends = grpi["comp_end"].astype(np.int64)
        self.variant = (
            "paged"
            if src.paged
            else ("recovered" if recovered or scheme.name == "recovered" else scheme.name)
        )
        self.encoding = pools.encoding
        self._check_encoding()
        self._cache: OrderedDict[int, bytes] = OrderedDict()
        self._cache_bytes = 0
        self._keys_map: LazyKeys | None = None
        self._index: PathIndex | None = None
        self._pool_lookup: PoolLookup | None = None
        self._pool_lookups = 0
        self._last_find: tuple[str, int | None] | None = None
        self._check_body_key(src)

    @staticmethod
    def _check_budget(
        header: hdr.Header, files: np.ndarray, grpi: np.ndarray, pools: StringPools, size: int
    ) -> None:
        """Everything the archive inflates to, and every payload summed, within `archive_budget` of its
        size (files may share bytes, so a million entries over one region would be a bomb of their own)."""
        budget = archive_budget(size)
        inflated = int(grpi["raw"].astype(np.int64).sum()) + pools.size_a + pools.size_w
        if inflated > budget:
            raise over_budget(
                header.grpi_offset,
                "the chunks and string pools together",
                inflated,
                budget,
                f"a {size:,}-byte archive",
            )
        payloads = int(files["size"].astype(np.int64).sum())
        if payloads > budget:
            raise over_budget(
                header.file_table_offset,
                "the file table's payloads together",
                payloads,
                budget,
                f"a {size:,}-byte archive",
            )

    @staticmethod
    def _same_name_table(twin: NkpiArchive, nt_raw: bytes) -> bool:
        """True when `nt_raw` is byte-for-byte the name table `twin` wrote (or kept) in its last save."""
        written = getattr(twin, "_written_name_table", None)
        if written is not None:
            return written == nt_raw
        return (
            not twin.pools.dirty
            and twin.header.name_table_size == len(nt_raw)
            and twin._src.read(twin.header.name_table_offset, len(nt_raw)) == nt_raw
        )

    def _check_encoding(self) -> None:
        """Warn (never fail) when sTrA does not read cleanly in the encoding in use (research §5.4)."""
        sample = self.pools.raw_a_view()[: 4 * 1024 * 1024]
        bad = 0 if sample.isascii() else sample.decode(self.encoding, errors="replace").count("\ufffd")
        guessed = self._requested_encoding is None and self.encoding != "utf-8"
        if bad or guessed:
            self.warnings.append(
                BridgeError(
                    ErrorCode.ENCODING_MISMATCH,
                    f"the sTrA string pool is not valid UTF-8; it is read as {self.encoding}"
                    + (f" with {bad} undecodable bytes in the first 4 MiB" if bad else " (guessed)"),
                    data={"encoding": self.encoding, "undecodable": bad, "guessed": guessed},
                )
            )

    @staticmethod
    def _hash_sizes_ok(src: _Source, header: hdr.Header, seed: int) -> bool:
        """True when `seed` decrypts the hash table's two size words to what `_hash_ok` demands of the
        whole table: the pair count is FileCount and the sorted offsets fill the table exactly."""
        size, at, count = header.hash_table_size, header.hash_table_offset, header.file_count
        word = 1 + 2 * count  # the count of sorted offsets follows the pairs
        if size < 8 or 4 * word + 4 > size:
            return False
        first = int.from_bytes(src.read(at, 4), "little") ^ keystream_word_at(seed, 0)
        n = int.from_bytes(src.read(at + 4 * word, 4), "little") ^ keystream_word_at(seed, word)
        return first == count and 8 + 8 * count + 4 * n == size

    @staticmethod
    def _hash_ok(plain: bytes, header: hdr.Header) -> bool:
        try:
            pairs, _ = parse_hash_table(plain, header.hash_table_offset)
        except BridgeError:
            return False
        return len(pairs) == header.file_count

    @staticmethod
    def _grpi_ok(plain: bytes, header: hdr.Header) -> bool:
        try:
            parse_grpi(plain, header.grpi_offset, header.body_size)
        except BridgeError:
            return False
        return True

    @staticmethod
    def _section_seed(
        raw: bytes,
        seed: int,
        word: int,
        plain_word: int,
        ok: Callable[[bytes], bool],
        strict: Callable[[bytes], object],
        offset: int,
        label: str,
    ) -> tuple[int, bool]:
        """The scheme's seed if it decrypts the section sensibly, else one recovered from a known word."""
        if ok(crypt(raw, seed)):
            return seed, False
        found = recover_word_seed(raw, word, plain_word, MAGIC_DATA, lambda s: ok(crypt(raw, s)))
        if found is None:
            strict(crypt(raw, seed))  # no other key explains it: say what is wrong under the archive's key
            raise corrupt(offset, f"a {label} readable under the archive's key or a recoverable one")
        return found, True

    def _parse_pools(self, raw: bytes, base: int, scheme: KeyScheme) -> tuple[StringPools, bool]:
        masks = [(scheme.mask_a, scheme.mask_w)] + [
            m for m in _KNOWN_POOL_MASKS if m != (scheme.mask_a, scheme.mask_w)
        ]
        first_error: BridgeError | None = None
        for mask_a, mask_w in masks:
            try:
                return StringPools.parse(
                    raw,
                    base,
                    PoolKeys(scheme.pool_a, scheme.pool_w, mask_a, mask_w),
                    encoding=self._requested_encoding,
                    allow_recover=self._recover,
                )
            except BridgeError as exc:
                first_error = first_error or exc
        assert first_error is not None
        raise first_error

    def _check_body_key(self, src: _Source) -> None:
        """Confirm the body key on up to three non-empty chunks; recover it when none of them inflates.

        One damaged chunk must not make the whole archive unreadable: if the key works on any probe the
        archive opens, and only reads from the damaged chunk fail (`PVF_CORRUPT` at that chunk).
        """
        probes: list[tuple[int, bytes, int]] = []
        for i in range(len(self.grpi)):
            comp = self._chunk_cipher(i, src)
            if comp:
                probes.append((i, comp, int(self.grpi["raw"][i])))
                if len(probes) == 3:
                    break
        if not probes or any(inflate_exact(crypt(c, self.scheme.body), n) is not None for _, c, n in probes):
            return
        i, comp, raw_len = probes[0]
        seed = recover_zlib_seed(comp, raw_len, MAGIC_DATA) if self._recover else None
        if seed is not None:
            self.scheme = replace(self.scheme, body=seed)
            if self.variant != "paged":
                self.variant = "recovered"
            return
        self.warnings.append(
            corrupt(
                self.header.body_offset + self._chunk_start(i),
                f"chunk {i}: a zlib stream inflating to {raw_len} bytes under the body key "
                "(reads from damaged chunks will fail)",
            )
        )

    # ------------------------------------------------------------------------------------------ chunks
    def _chunk_start(self, i: int) -> int:
        return int(self._chunk_ends[i - 1]) if i else 0

    def _chunk_cipher(self, i: int, src: _Source | None = None) -> bytes:
        src = src or self._src
        start, end = self._chunk_start(i), int(self._chunk_ends[i])
        return src.read(self.header.body_offset + start, end - start)

    def chunk(self, i: int) -> bytes:
        """Decompressed chunk `i` (LRU-cached); bounded inflate so a lying size cannot exhaust memory."""
        hit = self._cache.get(i)
        if hit is not None:
            self._cache.move_to_end(i)
            return hit
        raw_len = int(self.grpi["raw"][i])
        comp = self._chunk_cipher(i)
        plain = (
            inflate_exact(crypt(comp, self.scheme.body), raw_len) if comp else (b"" if raw_len == 0 else None)
        )
        if plain is None:
            raise corrupt(
                self.header.body_offset + self._chunk_start(i),
                f"chunk {i}: a zlib stream inflating to exactly {raw_len} bytes",
            )
        self._cache[i] = plain
        self._cache_bytes += len(plain)
        while self._cache_bytes > CHUNK_CACHE_BYTES and len(self._cache) > 1:
            _, old = self._cache.popitem(last=False)
            self._cache_bytes -= len(old)
        return plain

    # ------------------------------------------------------------------------------------------ names
    def entry_path(self, i: int) -> str:
        """Full path of file-table entry `i`: directory string + "/" + name string."""
        e = self.files[i]
        name = self.pools.resolve(int(e["name"]))
        folder = self.pools.resolve(int(e["path"]))
        return f"{folder}/{name}" if folder else name

    def _path_index(self) -> PathIndex:
        if self._index is None:
            self._index = PathIndex(self.files, self.pools)
            self._pool_lookup = None  # the index answers from now on; drop the lower-cased pool copy
        return self._index

    def _original_keys(self) -> Mapping[str, str]:
        if self._keys_map is None:
            self._keys_map = LazyKeys(self._find, self.entry_path, self._path_index)
        return self._keys_map

    POOL_LOOKUPS = 8
    """Lookups answered by searching the name pool before the path index is built for the rest."""

    def _find(self, key: str) -> int | None:
        """The first entry with lookup key `key`: the path index's answer, found without building the
        index for the first `POOL_LOOKUPS` lookups when the pool search can decide them (`PoolLookup`)."""
        last = self._last_find
        if last is not None and last[0] == key:
            return last[1]
        got: int | None = NOT_SURE
        if self._index is None and self._pool_lookups < self.POOL_LOOKUPS:
            if self._pool_lookup is None:
                self._pool_lookup = PoolLookup(self.files, self.pools, self.entry_path)
            got = self._pool_lookup.find(key)
            self._pool_lookups += 1
        if got == NOT_SURE:
            got = self._path_index().find(key)
        self._last_find = (key, got)
        return got

    def _entry(self, key: str) -> int:
        i = self._find(key)
        if i is None:
            raise KeyError(key)
        return i

    def paths(self) -> Sequence[str]:  # type: ignore[override]
        """Every path in file-table order (staged new files last, staged deletions left out). Without
        staged changes a `PathList`: a list-like sequence that decodes blocks of paths on demand."""
        index = self._path_index()
        if not self._overlay:
            return PathList(index)
        listed = index.display_paths()
        shadowed = index.shadowed()
        if shadowed:
            listed = [p for i, p in enumerate(listed) if i not in shadowed]
        if not self._overlay:
            return listed
        deleted = {k for k, v in self._overlay.items() if v is None}
        if deleted:
            listed = [p for p in listed if norm_path(p) not in deleted]
        listed.extend(
            self._overlay_names[k]
            for k, v in self._overlay.items()
            if v is not None and index.find(k) is None
        )
        return listed

    def stored_paths(self) -> list[str]:
        return self._path_index().display_paths()

    def original_entries(self) -> list[int]:
        """The file-table index of each path the unstaged `paths()` lists, in the same order (the content
        index reads payloads by entry, without a path lookup per file)."""
        shadowed = self._path_index().shadowed()
        n = len(self.files)
        return [i for i in range(n) if i not in shadowed] if shadowed else list(range(n))

    def _read_original(self, key: str) -> bytes:
        return self.read_entry(self._entry(key))

    def read_entry(self, i: int) -> bytes:
        """Payload of file-table entry `i` as stored (ignores staged changes)."""
        e = self.files[i]
        start = int(e["offset"])
        return self.chunk(int(e["chunk"]))[start : start + int(e["size"])]

    def _original_info(self, key: str) -> FileInfo:
        i = self._entry(key)
        e = self.files[i]
        dt = int(e["type"])
        kind = "script" if dt == DATA_SCRIPT else "text" if dt == DATA_UTF16 else "binary"
        return FileInfo(
            self._original_keys()[key],
            int(e["size"]),
            kind,
            False,
            {"chunk": int(e["chunk"]), "data_offset": int(e["offset"]), "data_type": dt, "index": i},
        )

    def _staged_kind(self, key: str, data: bytes, base: FileInfo | None) -> str:
        # A compiled nkpi script has no magic bytes (guess_kind would call it binary), and the writer keeps an
        # existing entry's DataType: so a staged edit of an entry keeps that entry's kind.
        return base.kind if base is not None else super()._staged_kind(key, data, base)

    def data_type(self, path: str) -> int:
        """DataType of a path: its entry's, or for a new file 3 for `.str` and 1 otherwise (PF `createFile`)."""
        key = norm_path(path)
        if key in self._original_keys():
            return int(self.files[self._entry(key)]["type"])
        return DATA_UTF16 if key.endswith(".str") else DATA_SCRIPT

    # ------------------------------------------------------------------------------------------ text
    def read_text(self, path: str) -> str:
        from deskbridge.kinds.pvf.script import nkpi_codec as codec

        data = self.read(path)
        dt = self.data_type(path)
        if dt == DATA_UTF16:
            return codec.decode_utf16_text(data)[0]
        if dt == DATA_SCRIPT:
            return codec.decompile(data, self.pools, lst=norm_path(path).endswith(".lst"))
        raise BridgeError(
            ErrorCode.UNSUPPORTED_CHANGE,
            f"'{path}' has DataType {dt}, which has no text form",
            data={"path": path, "data_type": dt},
        )

    def list_prefix_text(self, path: str, data: bytes, count: int) -> tuple[str, int] | None:
        """The text of the first `count` tokens of a `.lst` script made of int and string tokens only (the
        first lines of `read_text`'s text) and how many tokens it has; None for any other payload, and when
        the whole text would be over the text budget (`read_text` refuses it)."""
        from deskbridge.kinds.pvf.script import nkpi_codec as codec

        if not norm_path(path).endswith(".lst") or self.data_type(path) != DATA_SCRIPT:
            return None
        recs = codec.records(data)
        types = recs["t"]
        strs = types == codec.T_STRING
        if not (strs | (types == codec.T_INT)).all():
            return None
        pools = self.pools
        offs = recs["v"][strs].astype(np.int64) & 0xFFFFFFFF
        resolve = pools.resolve
        chars = sum(len(resolve(o)) for o in offs[pools.valid(offs)].tolist())
        if chars > text_budget(len(data)):
            return None
        return codec.decompile(data[: 5 * max(0, count)], pools, lst=True), len(recs)

    def text_to_payload(self, path: str, text: str) -> bytes:
        from deskbridge.kinds.pvf.script import nkpi_codec as codec

        key = norm_path(path)
        original = self._read_original(key) if key in self._original_keys() else None
        dt = self.data_type(path)
        if dt == DATA_UTF16:
            was = codec.decode_utf16_text(original)[1] if original is not None else False
            return codec.encode_utf16_text(text, mojibake=was)
        if dt == DATA_SCRIPT:
            return codec.compile_text(text, self.pools, original=original)
        raise BridgeError(ErrorCode.UNSUPPORTED_CHANGE, f"'{path}' has DataType {dt}, which has no text form")

    def refs(self):  # type: ignore[no-untyped-def]
        """`<table::key>` resolver over this archive's `n_string.lst` and `.str` tables (built once)."""
        from .nkpi_lists import StringRefs

        if getattr(self, "_refs", None) is None:
            self._refs = StringRefs(self)
        return self._refs

    def string(self, offset: int) -> str:
        """The pool string at a magic offset (script string tokens, file and folder names)."""
        return self.pools.resolve(offset)

    # ------------------------------------------------------------------------------------------ saving
    def _write_unchanged(self, out: BinaryIO, progress: Progress | None) -> None:
        """The source bytes verbatim (page guards included): kernel-side copy where possible."""
        from .nkpi_writer import copy_source

        size = self._src.size
        step = 64 * 1024 * 1024
        for pos in range(0, size, step):
            n = min(step, size - pos)
            if not copy_source(self._src, out, pos, n):
                out.write(self._src.raw(pos, n))
            if progress:
                progress(pos + n, size)
        self._release_if_replacing()

    def _release_if_replacing(self) -> None:
        """Close the source handle once it is fully read when the save will rename over it (Windows cannot
        replace an open file); any later read reopens it, e.g. after a failed rename."""
        if getattr(self, "_replacing_source", False):
            self._src.suspend()

    def _begin_write(self) -> None:
        # Set by this write (where each staged file landed, the name table written) for its verify.
        self._landed = {}
        self._written_name_table = None
        self._written_pools = None
        self._written_payloads = {}

    def written_payloads(self) -> Mapping[str, bytes]:
        """Payloads the last write stored differently from the staged bytes (lookup key → bytes): string
        offsets renumbered because strings nothing referred to were left out of the pools
        (`nkpi_writer._pools_to_write`). Empty when every staged payload was written as staged."""
        return dict(getattr(self, "_written_payloads", {}))

    def _write(self, out: BinaryIO, progress: Progress | None) -> None:
        from .nkpi_writer import write_archive

        self._landed = write_archive(self, out, progress)
        self._release_if_replacing()

    def _verify_written(self, path: Path, expected: Mapping[str, bytes | None]) -> int:
        """Re-open the written file; each staged file must sit where the writer put it and read back equal.

        Files are checked at the file-table index the writer reported (no full path index is built, which
        matters on a million-file archive); deletions are checked by lookup.
        """
        again = NkpiArchive(path, encoding=self.encoding, keys=self.keys, _pools_of=self)
        landed = getattr(self, "_landed", {})
        written = getattr(self, "_written_payloads", {})
        try:
            for key, data in expected.items():
                name = self._overlay_names.get(key, key)
                if data is None:
                    if again.exists(key):
                        raise BridgeError(
                            ErrorCode.INTERNAL, f"verify failed: deleted '{name}' is still present"
                        )
                    continue
                data = written.get(key, data)
                i = landed.get(key)
                if i is None or i >= len(again.files) or norm_path(again.entry_path(i)) != key:
                    raise BridgeError(
                        ErrorCode.INTERNAL, f"verify failed: '{name}' is not where it was written"
                    )
                if again.read_entry(i) != data:
                    raise BridgeError(
                        ErrorCode.INTERNAL, f"verify failed: '{name}' reads back different bytes"
                    )
            self._release_if_replacing()
            return len(expected)
        finally:
            again.close()

    def _save_to(self, target: Path, *, backup: bool, progress: Progress | None, **kw):  # type: ignore[no-untyped-def]
        self._replacing_source = (
            self.source is not None and target.exists() and os.path.samefile(target, self.source)
        )
        try:
            return super()._save_to(target, backup=backup, progress=progress, **kw)
        finally:
            self._replacing_source = False

    def _reopen(self, path: Path) -> None:
        self._src.close()
        self._refs = None
        self._landed = {}
        self._written_name_table = None
        self._written_pools = None
        self._written_payloads = {}
        self._load(path)

    def close(self) -> None:
        self._src.close()

    def info(self) -> dict[str, object]:
        """Header fields and layout for `pvf info`."""
        h = self.header
        return {
            "family": self.family,
            "variant": self.variant,
            "encoding": self.encoding,
            "files": h.file_count,
            "chunks": h.group_count,
            "bodySize": h.body_size,
            "hashTableSize": h.hash_table_size,
            "nameTableSize": h.name_table_size,
            "poolA": self.pools.size_a,
            "poolW": self.pools.size_w,
            "decompressedSize": int(self.grpi["raw"].astype(np.int64).sum()) if len(self.grpi) else 0,
            "fileSize": self._src.size,
        }


def open_nkpi(
    source: Path | str | bytes,
    *,
    encoding: str | None = None,
    keys: object | None = None,
    recover: bool = True,
) -> NkpiArchive:
    """Open an nkpi archive from a path or bytes; `keys`: `NkpiKeys`, a key-file path or `load_keys` fields."""
    if isinstance(source, str):
        source = Path(source)
    return NkpiArchive(source, encoding=encoding, keys=as_keys(keys), recover=recover)


def as_keys(keys: object | None) -> NkpiKeys | None:
    """Accept `NkpiKeys`, a key-file path, or a mapping of `load_keys` parameters."""
    if keys is None or isinstance(keys, NkpiKeys):
        return keys
    if isinstance(keys, (str, Path)):
        return load_keys(key_file=keys)
    if isinstance(keys, Mapping):
        return load_keys(**dict(keys))
    raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"unusable key material of type {type(keys).__name__}")


__all__ = ["NkpiArchive", "NkpiKeys", "looks_like_nkpi", "open_nkpi"]
