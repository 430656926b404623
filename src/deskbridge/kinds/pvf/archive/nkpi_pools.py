"""The nkpi name table: the sTrA (single-byte/UTF-8) and sTrW (UTF-16LE) string pools (research/pvf.md §1B).

On disk: an 8-byte prefix kept verbatim, then for sTrA and then sTrW `u32 encSize ^ mask, u32 rawLen ^ encSize,
encSize bytes` (LCG magic 0x269EC9 over a zlib stream). Every string reference in the archive (file and
directory names, script string tokens) is a "magic offset": even → sTrA byte `off >> 1`, odd → sTrW byte
`(off >> 1) * 2`. New strings reuse an existing equal string; otherwise non-ASCII goes to sTrW — the client
resolves CJK only from the UTF-16 pool (PF CHANGELOG v0.5.0) — and ASCII to sTrA unless sTrA is empty (110US).
"""

from __future__ import annotations

import os
import struct
import zlib
from dataclasses import dataclass

import numpy as np

from .budget import over_budget, stream_budget
from .nkpi_cipher import MAGIC_POOL, crypt
from .nkpi_errors import corrupt
from .nkpi_recover import inflate_exact, recover_zlib_seed

PREFIX_SIZE = 8
_POOL_HEAD = struct.Struct("<II")
MAX_POOL_RAW = 1 << 31
"""Largest decompressed pool (magic offsets are 32-bit, so a pool beyond 2 GiB cannot be addressed)."""
STRA_ENCODINGS = ("utf-8", "gbk", "big5", "cp949")
"""Candidates for sTrA: pvfine assumes UTF-8, pvfVSCode guesses among GBK/Big5/EUC-KR/UTF-8 (research §5.4)."""


PARALLEL_SEGMENT = 4 * 1024 * 1024
SPAN_BLOCK = 1 << 22
"""Pool units scanned per step by `string_spans` (bounds its temporaries to a few tens of MB)."""


def _unique_runs(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(values, return_inverse=True)`, sorting only the first value of each run of equal
    neighbours: file tables list a folder's files together, so 4.3 M folder offsets are a few thousand runs."""
    if len(values) == 0:
        return np.unique(values, return_inverse=True)
    heads = np.flatnonzero(np.concatenate(([True], values[1:] != values[:-1])))
    if len(heads) > len(values) // 2:
        return np.unique(values, return_inverse=True)
    uniq, head_inv = np.unique(values[heads], return_inverse=True)
    return uniq, np.repeat(head_inv.ravel(), np.diff(np.append(heads, len(values))))


def string_spans(units: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(length, ascii) of the NUL-terminated strings starting at `starts` (each < len(units)).

    Memory is bounded by the number of starts plus one block, never by the pool: a pool of 512 MB of NULs
    (512 M terminators) must not become an int64 per terminator. The pool is scanned block by block; a
    string still open at a block's end is carried into the next (all carried strings end at the same NUL).
    A string without a terminator ends at the end of the pool.
    """
    n = len(units)
    # distinct starts, sorted (a million entries share a few thousand folder strings)
    s, back = _unique_runs(np.asarray(starts, dtype=np.int64))
    ends = np.full(len(s), n, dtype=np.int64)
    wide = np.zeros(len(s), dtype=bool)
    lo = 0  # first string whose end is not known yet
    for b in range(0, n, SPAN_BLOCK):
        if lo == len(s):
            break
        e = min(n, b + SPAN_BLOCK)
        hi = int(np.searchsorted(s, e))
        if hi == lo:
            continue
        block = units[b:e]
        nul = np.flatnonzero(block == 0)
        high = np.flatnonzero(block >= 0x80)
        seg_lo = np.maximum(s[lo:hi] - b, 0)
        j = np.searchsorted(nul, seg_lo)
        found = j < len(nul)
        seg_hi = np.where(found, nul[np.minimum(j, max(len(nul) - 1, 0))] if len(nul) else 0, e - b)
        if len(high):
            wide[lo:hi] |= np.searchsorted(high, seg_hi) > np.searchsorted(high, seg_lo)
        done = np.flatnonzero(found)
        ends[lo + done] = seg_hi[done] + b
        # `found` is a prefix of the sorted starts (their ends are non-decreasing), so lo moves past it
        lo += len(done)
    return (ends - s)[back], (~wide)[back]


def compress_parallel(data: bytes, level: int = 6, segment: int = PARALLEL_SEGMENT) -> bytes:
    """One zlib stream compressed in independent segments on several threads (pigz's layout).

    Each segment is raw deflate ending in a sync flush (the last one finishes the stream); zlib releases the
    GIL, so a 60 MB pool that must be rewritten after adding one string compresses on every core. Readers
    see an ordinary `78 9C` stream; only the size differs slightly from a single-threaded `zlib.compress`.
    """
    if len(data) <= segment:
        return zlib.compress(data, level)
    from concurrent.futures import ThreadPoolExecutor

    pieces = [data[i : i + segment] for i in range(0, len(data), segment)]

    def deflate(k: int) -> bytes:
        c = zlib.compressobj(level, zlib.DEFLATED, -15)
        last = k == len(pieces) - 1
        return c.compress(pieces[k]) + c.flush(zlib.Z_FINISH if last else zlib.Z_SYNC_FLUSH)

    with ThreadPoolExecutor(max_workers=min(len(pieces), os.cpu_count() or 2)) as pool:
        body = b"".join(pool.map(deflate, range(len(pieces))))
    header = b"\x78\x9c" if level == 6 else zlib.compress(b"", level)[:2]
    return header + body + zlib.adler32(data).to_bytes(4, "big")


class _Segmented:
    """Pool bytes as the immutable original plus an appended tail.

    Appending never copies the original (60+ MB on a million-file archive), and views of the original
    (the path index keeps one) stay valid while strings are added.
    """

    __slots__ = ("base", "tail")

    def __init__(self, base: bytes) -> None:
        self.base = base
        self.tail = bytearray()

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)

    def __bytes__(self) -> bytes:
        return self.base + bytes(self.tail) if self.tail else self.base

    def __iadd__(self, data: bytes) -> _Segmented:
        self.tail += data
        return self

    def __getitem__(self, key: slice) -> bytes:
        i, j, _ = key.indices(len(self))
        nb = len(self.base)
        if j <= nb:
            return self.base[i:j]
        if i >= nb:
            return bytes(self.tail[i - nb : j - nb])
        return self.base[i:] + bytes(self.tail[: j - nb])

    def find(self, sub: bytes, start: int = 0) -> int:
        """First index of `sub` at or after `start`, matches across the seam included."""
        b, nb = self.base, len(self.base)
        if start < nb:
            i = b.find(sub, start)
            if i >= 0:
                return i
            if self.tail and len(sub) > 1:
                lo = max(start, nb - len(sub) + 1)
                i = (b[lo:] + bytes(self.tail[: len(sub) - 1])).find(sub)
                if i >= 0:
                    return lo + i
        j = self.tail.find(sub, max(0, start - nb))
        return -1 if j < 0 else nb + j


@dataclass
class PoolKeys:
    """Seeds and size masks of the two pools (from the key scheme, or recovered)."""

    seed_a: int
    seed_w: int
    mask_a: int
    mask_w: int


def _read_pool(
    table: bytes, pos: int, base: int, seed: int, mask: int, label: str, allow_recover: bool
) -> tuple[bytes, int, int, bool]:
    """One pool: (raw bytes, position after it, seed used, whether the seed was recovered)."""
    if pos + 8 > len(table):
        raise corrupt(base + pos, f"the {label} pool header (8 bytes)", f"{len(table) - pos} bytes left")
    f_size, f_raw = _POOL_HEAD.unpack_from(table, pos)
    enc_size = f_size ^ mask
    raw_len = f_raw ^ enc_size
    end = pos + 8 + enc_size
    if end > len(table):
        raise corrupt(
            base + pos,
            f"{label} pool size inside the name table ({len(table) - pos - 8} bytes)",
            str(enc_size),
        )
    if raw_len > MAX_POOL_RAW or (raw_len and not enc_size):
        raise corrupt(base + pos + 4, f"{label} pool length within zlib's bound", str(raw_len))
    if raw_len > stream_budget(enc_size):
        raise over_budget(
            base + pos + 4,
            f"the {label} string pool",
            raw_len,
            stream_budget(enc_size),
            f"{enc_size:,} compressed bytes",
        )
    cipher = table[pos + 8 : end]
    if enc_size == 0:
        return b"", end, seed, False
    plain = inflate_exact(crypt(cipher, seed, MAGIC_POOL), raw_len)
    recovered = False
    if plain is None and allow_recover:
        found = recover_zlib_seed(cipher, raw_len, MAGIC_POOL)
        if found is not None:
            seed, recovered = found, True
            plain = inflate_exact(crypt(cipher, seed, MAGIC_POOL), raw_len)
    if plain is None:
        raise corrupt(base + pos + 8, f"{label} pool: a zlib stream inflating to {raw_len} bytes")
    return plain, end, seed, recovered


def _detect_stra_encoding(pool: bytes) -> str:
    """UTF-8 when the pool is valid UTF-8, else the candidate with the fewest undecodable bytes."""
    if pool.isascii():  # the common case, checked without decoding 60 MB
        return "utf-8"
    best, best_bad = "utf-8", None
    for enc in STRA_ENCODINGS:
        bad = pool.decode(enc, errors="replace").count("\ufffd")
        if bad == 0:
            return enc
        if best_bad is None or bad < best_bad:
            best, best_bad = enc, bad
    return best


class StringPools:
    """Both pools decompressed, with magic-offset resolution, reverse lookup and appending."""

    def __init__(
        self, prefix: bytes, a: bytes, w: bytes, keys: PoolKeys, encoding: str | None = None
    ) -> None:
        self.prefix = prefix
        self._a = _Segmented(bytes(a))
        self._w = _Segmented(bytes(w))
        self.keys = keys
        self.encoding = encoding or _detect_stra_encoding(a)
        self.original_size_a = len(a)
        self.original_size_w = len(w)
        self.dirty = False
        self._lookup_a: dict[str, int] | None = None
        self._lookup_w: dict[str, int] | None = None
        self._cache: dict[int, str] = {}

    # --- reading -------------------------------------------------------------------------------------
    @classmethod
    def parse(
        cls,
        table: bytes,
        base: int,
        keys: PoolKeys,
        *,
        encoding: str | None = None,
        allow_recover: bool = True,
    ) -> tuple[StringPools, bool]:
        """Pools from the raw name table at archive offset `base`; also says whether a seed was recovered."""
        if len(table) < PREFIX_SIZE:
            raise corrupt(base, "a name table of at least 8 bytes", f"{len(table)} bytes")
        a, pos, seed_a, rec_a = _read_pool(
            table, PREFIX_SIZE, base, keys.seed_a, keys.mask_a, "sTrA", allow_recover
        )
        w, pos, seed_w, rec_w = _read_pool(table, pos, base, keys.seed_w, keys.mask_w, "sTrW", allow_recover)
        if pos != len(table):
            raise corrupt(
                base + pos, "the name table to end after the sTrW pool", f"{len(table) - pos} extra bytes"
            )
        if len(w) % 2:
            raise corrupt(base, "an even-length UTF-16 pool", f"{len(w)} bytes")
        pools = cls(table[:PREFIX_SIZE], a, w, PoolKeys(seed_a, seed_w, keys.mask_a, keys.mask_w), encoding)
        return pools, rec_a or rec_w

    @property
    def size_a(self) -> int:
        return len(self._a)

    @property
    def size_w(self) -> int:
        return len(self._w)

    def raw_a(self) -> bytes:
        return bytes(self._a)

    def raw_a_view(self) -> bytes:
        """The sTrA bytes as opened (immutable; strings added since are not in it)."""
        return self._a.base

    def raw_w_view(self) -> bytes:
        """The sTrW bytes as opened (immutable; strings added since are not in it)."""
        return self._w.base

    def raw_w(self) -> bytes:
        return bytes(self._w)

    def valid(self, offsets: np.ndarray) -> np.ndarray:
        """Which magic offsets point inside their pool (vectorised, for validating a million entries).
        File-table offsets are uint32 (half < 2^31: no overflow in `2 * half + 2`); when none is odd (every
        name in sTrA, as the legacy variants write) the sTrW test is skipped: 0.39 -> ~0.05 s on 4.3 M."""
        off = np.asarray(offsets)
        if off.dtype != np.uint32:
            off = off.astype(np.int64)
        half = off >> 1
        in_a = half < len(self._a)
        odd = (off & 1).astype(bool)
        if not odd.any():
            return in_a
        in_w = half.astype(np.int64) * 2 + 2 <= len(self._w)
        return np.where(odd, in_w, in_a)

    def is_valid(self, off: int) -> bool:
        return (off >> 1) * 2 + 2 <= len(self._w) if off & 1 else (off >> 1) < len(self._a)

    def resolve(self, off: int) -> str:
        """The string at a magic offset (sTrA up to NUL, sTrW up to an aligned NUL code unit)."""
        hit = self._cache.get(off)
        if hit is not None:
            return hit
        if not self.is_valid(off):
            raise corrupt(off, "a string offset inside the name pools", f"offset {off}")
        if off & 1:
            pos = (off >> 1) * 2
            end = pos
            w = self._w
            while True:
                end = w.find(b"\0\0", end)
                if end < 0:
                    end = len(w) - (len(w) - pos) % 2
                    break
                if (end - pos) % 2 == 0:
                    break
                end += 1
            s = w[pos:end].decode("utf-16-le", errors="surrogatepass")
        else:
            pos = off >> 1
            end = self._a.find(b"\0", pos)
            if end < 0:
                end = len(self._a)
            s = self._a[pos:end].decode(self.encoding, errors="surrogateescape")
        if len(self._cache) < 1 << 16:
            self._cache[off] = s
        return s

    # --- lookup and appending ------------------------------------------------------------------------
    def index_all(self) -> None:
        """Build a full string → offset dictionary (for bulk appends such as the synthesiser)."""
        look_a: dict[str, int] = {}
        pos = 0
        for part in bytes(self._a).split(b"\0") if len(self._a) else ():
            if pos < len(self._a):  # the piece after a final NUL is not a string
                look_a.setdefault(part.decode(self.encoding, errors="surrogateescape"), pos * 2)
            pos += len(part) + 1
        look_w: dict[str, int] = {}
        pos = 0
        text = bytes(self._w).decode("utf-16-le", errors="surrogatepass")
        for part in text.split("\0") if text else ():
            if pos < len(text):
                look_w.setdefault(part, pos * 2 + 1)
            pos += len(part) + 1
        self._lookup_a, self._lookup_w = look_a, look_w

    def _scan_a(self, s: str) -> int | None:
        """First sTrA offset holding exactly `s`, by searching the pool bytes (no index needed)."""
        try:
            enc = s.encode(self.encoding, errors="surrogateescape")
        except UnicodeEncodeError:  # e.g. a lone UTF-16 surrogate from sTrW: cannot be in sTrA
            return None
        a = self._a
        if a[0 : len(enc) + 1] == enc + b"\0":
            return 0
        pos = a.find(b"\0" + enc + b"\0")
        return None if pos < 0 else (pos + 1) * 2

    def _scan_w(self, s: str) -> int | None:
        """First aligned sTrW offset holding exactly `s`."""
        enc = s.encode("utf-16-le", errors="surrogatepass")
        w = self._w
        if w[0 : len(enc) + 2] == enc + b"\0\0":
            return 1
        needle = b"\0\0" + enc + b"\0\0"
        pos = w.find(needle)
        while pos >= 0 and pos % 2:
            pos = w.find(needle, pos + 1)
        return None if pos < 0 else pos + 2 + 1

    def find(self, s: str) -> int | None:
        """The canonical offset of an existing string: the UTF-16 pool first for non-ASCII, sTrA first otherwise."""
        if self._lookup_a is not None and self._lookup_w is not None:
            look_a, look_w = self._lookup_a.get, self._lookup_w.get
        else:
            look_a, look_w = self._scan_a, self._scan_w
        first, second = (look_w, look_a) if not s.isascii() else (look_a, look_w)
        off = first(s)
        return off if off is not None else second(s)

    def add(self, s: str) -> int:
        """The offset of `s`, appending it to the right pool when it is not there yet."""
        off = self.find(s)
        if off is not None:
            return off
        if "\0" in s:
            raise ValueError("strings in the name pools cannot contain NUL")
        self._cache.clear()
        to_w = not s.isascii() or len(self._a) == 0
        if to_w:
            if len(self._w) == 0:
                self._w += b"\0\0"  # keep offset 1 = "" as every pool seen starts with the empty string
                if self._lookup_w is not None:
                    self._lookup_w.setdefault("", 1)
            pos = len(self._w)
            self._w += s.encode("utf-16-le", errors="surrogatepass") + b"\0\0"
            off = pos + 1
            if self._lookup_w is not None:
                self._lookup_w[s] = off
        else:
            try:
                enc = s.encode(self.encoding, errors="surrogateescape")
            except UnicodeEncodeError as exc:
                raise ValueError(f"cannot store {s!r} in the {self.encoding} pool") from exc
            pos = len(self._a)
            self._a += enc + b"\0"
            off = pos * 2
            if self._lookup_a is not None:
                self._lookup_a[s] = off
        if len(self._a) > MAX_POOL_RAW or len(self._w) > MAX_POOL_RAW:
            raise ValueError("the name pools would exceed 2 GiB")
        self.dirty = True
        return off

    def appended_raw(self) -> tuple[bytes, bytes]:
        """The sTrA and sTrW bytes appended since the archive was opened (for `append_raw` in another process
        that opened the same file: the same bytes give the same offsets)."""
        return self._a[self.original_size_a : len(self._a)], self._w[self.original_size_w : len(self._w)]

    def append_raw(self, a: bytes, w: bytes) -> None:
        """Append what `appended_raw` of pools opened from the same file returned, so offsets those pools
        handed out resolve here too (the script worker sees the workspace's unsaved strings)."""
        if len(w) % 2:
            raise ValueError("an odd-length UTF-16 pool tail")
        if not a and not w:
            return
        self._cache.clear()
        self._a += a
        self._w += w
        self._lookup_a = self._lookup_w = None  # rebuilt on demand by index_all / scanned by find

    def adopt_tail(self, a: bytes, w: bytes) -> None:
        """`append_raw`, for strings this session's archive is to keep: the recovered payloads of a crashed
        session name them, so the next save writes the pools with them."""
        self.append_raw(a, w)
        if a or w:
            self.dirty = True

    def _added_from(self) -> tuple[int, int]:
        """Where the added strings start in sTrA and sTrW (bytes). A previously empty sTrW gained the empty
        string at offset 1 before its first string (`add`): that is structure, not an added string."""
        w = self.original_size_w if self.original_size_w or not len(self._w) else 2
        return self.original_size_a, w

    def added(self) -> list[int]:
        """Magic offsets of the strings appended since the archive was opened, in pool order."""
        out: list[int] = []
        pos_a, pos_w = self._added_from()
        for part in self._a[pos_a : len(self._a)].split(b"\0")[:-1]:
            out.append(pos_a * 2)
            pos_a += len(part) + 1
        tail = self._w[pos_w : len(self._w)].decode("utf-16-le", errors="surrogatepass")
        for part in tail.split("\0")[:-1]:
            out.append(pos_w + 1)
            pos_w += 2 * (len(part) + 1)
        return out

    def without(self, drop: set[int]) -> tuple[StringPools, dict[int, int]]:
        """A copy of these pools without the added strings at the magic offsets `drop` (nothing refers to
        them, e.g. a discarded plan compiled them), and `old offset → new offset` of the added strings that
        moved. The strings of the archive as opened keep their offsets; these pools are left unchanged."""
        from_a, from_w = self._added_from()
        keep_a, keep_w = bytearray(), bytearray()
        moved: dict[int, int] = {}
        for off in self.added():
            if off in drop:
                continue
            text = self.resolve(off)
            if off & 1:
                new = from_w + len(keep_w) + 1
                keep_w += text.encode("utf-16-le", errors="surrogatepass") + b"\0\0"
            else:
                new = (from_a + len(keep_a)) * 2
                keep_a += text.encode(self.encoding, errors="surrogateescape") + b"\0"
            if new != off:
                moved[off] = new
        a = self._a[0:from_a] + bytes(keep_a)
        w = self._w[0:from_w] + bytes(keep_w) if keep_w else self._w[0 : self.original_size_w]
        pools = StringPools(self.prefix, a, w, self.keys, self.encoding)
        pools.original_size_a, pools.original_size_w = self.original_size_a, self.original_size_w
        pools.dirty = bool(keep_a or keep_w)
        return pools, moved

    def freeze(self) -> None:
        """Fold strings added so far into the immutable part (lets `sort_offsets` use its fast path)."""
        for seg in (self._a, self._w):
            if seg.tail:
                seg.base, seg.tail = bytes(seg), bytearray()

    # --- ordering ------------------------------------------------------------------------------------
    def sort_offsets(self, offsets: np.ndarray) -> np.ndarray:
        """`offsets` ordered by their strings in UTF-16 code-unit order, equal strings in input order.

        The hash table needs this for every name and folder (a million on nkpi-1m), so plain ASCII strings of
        the original sTrA are compared as fixed-width byte rows with numpy (ASCII byte order equals UTF-16
        order); the rest (sTrW, non-ASCII, strings added this session) is sorted in Python and merged in by
        binary search — for a first difference between ASCII and anything else both orders agree.
        """
        offsets = np.asarray(offsets, dtype=np.int64)
        base = np.frombuffer(self._a.base, dtype=np.uint8)
        nb = len(base)
        pos = offsets >> 1
        simple = ((offsets & 1) == 0) & (pos < nb)
        lens = np.zeros(len(offsets), dtype=np.int64)
        if nb and simple.any():
            sel = np.flatnonzero(simple)
            lens[sel], ascii_only = string_spans(base, pos[sel])
            simple[sel[~ascii_only]] = False
            simple &= lens <= 512
        s_idx = np.flatnonzero(simple)
        width = max(1, int(lens[s_idx].max())) if len(s_idx) else 1
        rows = np.zeros((len(s_idx), width), dtype=np.uint8)
        cols = np.arange(width, dtype=np.int64)
        block = max(1, (1 << 21) // width)
        for lo in range(0, len(s_idx), block):
            sel = s_idx[lo : lo + block]
            idx = pos[sel][:, None] + cols[None, :]
            keep = cols[None, :] < lens[sel][:, None]
            rows[lo : lo + len(sel)] = np.where(keep, base[np.minimum(idx, nb - 1)], 0)
        keys = rows.view(f"S{width}").ravel() if len(s_idx) else np.zeros(0, dtype=f"S{width}")
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
        result = s_idx[order]
        c_idx = np.flatnonzero(~simple)
        if len(c_idx):
            texts = [self.resolve(int(offsets[i])) for i in c_idx.tolist()]
            c_sorted = sorted(
                range(len(c_idx)), key=lambda k: texts[k].encode("utf-16-be", errors="surrogatepass")
            )
            probes = np.array(
                [texts[k].encode("utf-8", errors="surrogatepass") for k in c_sorted], dtype=f"S{width}"
            )  # truncation is safe with side="right"
            at = np.searchsorted(sorted_keys, probes, side="right")
            result = np.insert(result, at, c_idx[c_sorted])
        return offsets[result]

    # --- writing -------------------------------------------------------------------------------------
    def serialize(self, level: int = 6) -> bytes:
        """The on-disk name table (prefix + both pools, recompressed and encrypted)."""
        out = [self.prefix]
        for raw, seed, mask in (
            (self._a, self.keys.seed_a, self.keys.mask_a),
            (self._w, self.keys.seed_w, self.keys.mask_w),
        ):
            enc = crypt(compress_parallel(bytes(raw), level), seed, MAGIC_POOL) if raw else b""
            out.append(_POOL_HEAD.pack(len(enc) ^ mask, len(raw) ^ len(enc)))
            out.append(enc)
        return b"".join(out)
