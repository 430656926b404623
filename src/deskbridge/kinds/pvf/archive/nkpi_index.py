"""A compact path index over the nkpi file table: a million paths listable and findable without a million dicts.

Holding every path as a Python string in a dict costs ~250 MB for 1 M files — more than the archive.
Instead each entry gets a 64-bit hash of its lookup key (`norm_path`: lower case, `/`), computed with numpy
straight from the pool bytes; a lookup hashes the query the same way, binary-searches the sorted hashes and
confirms the candidate by resolving its real path (so collisions are harmless). Listing gathers all
`folder/name` bytes with one vectorised copy per block and decodes them in one go.

The hash (`path_hash`) is built for that vectorised pass (PVF-OPEN-4M: 4.3 M names): a key `folder/name` is
split at its last `/`, and each part is hashed eight bytes at a time (`_str_hash`: its bytes and a NUL,
zero-padded, as little-endian 64-bit words). A name then costs about three word steps, done for all names at
once in pool order (each step gathers one unaligned word per name, finds the terminator and lower-cases with
SWAR bit tricks), instead of one gather per character in length order, which touched the 140 MB pool at
random. The sort packs each hash with its entry number into one uint64, so a plain `np.sort` orders both
(numpy's SIMD sort of 4.3 M uint64 is ~5x faster than `argsort`). Entries the fast path cannot express
(non-ASCII bytes, `/` or `\\` inside a name, names over 96 bytes) are hashed through the ordinary Python path
resolution, which gives the same hash by definition.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from .base import norm_path
from .nkpi_pools import _unique_runs, string_spans

if TYPE_CHECKING:
    from .nkpi_pools import StringPools

_MASK64 = (1 << 64) - 1
_SEED = 0x243F6A8885A308D3
_M1 = 0x9E3779B97F4A7C15
_M2 = 0xC2B2AE3D27D4EB4F
_FAST_MAX_WORDS = 12
"""Names of up to 12 words (95 bytes plus the NUL) take the vectorised pass; longer ones the Python one."""
_FAST_MAX_LEN = 8 * _FAST_MAX_WORDS - 1
_BLOCK = 16384
_ROW_BLOCK = 1 << 15
"""Names hashed per block of `_word_hashes`."""
_HASH_BLOCK = 1 << 18
"""UTF-16 pool names are copied into a byte buffer this many at a time (bounds the temporaries)."""

_L7 = np.uint64(0x7F7F7F7F7F7F7F7F)
_H8 = np.uint64(0x8080808080808080)
_ONES = np.uint64(0x0101010101010101)
_C3F = np.uint64(0x3F3F3F3F3F3F3F3F)
_C25 = np.uint64(0x2525252525252525)
_SLASH = np.uint64(0x2F2F2F2F2F2F2F2F)
_BACKSLASH = np.uint64(0x5C5C5C5C5C5C5C5C)


def _fmix(h: int) -> int:
    h ^= h >> 33
    h = (h * _M2) & _MASK64
    return h ^ (h >> 29)


def _str_hash(data: bytes) -> int:
    """The hash of one key part: its bytes and a NUL, zero-padded to whole little-endian 64-bit words."""
    padded = data + b"\0" * (8 - len(data) % 8)
    h = _SEED
    for k in range(0, len(padded), 8):
        h ^= int.from_bytes(padded[k : k + 8], "little")
        h = (h * _M1) & _MASK64
        h ^= h >> 32
    return _fmix(h ^ len(data))


def _combine(folder: int, name: int) -> int:
    return _fmix(((folder * _M1) & _MASK64) ^ name)


def path_hash(key: str) -> int:
    """The 64-bit hash of a lookup key (already normalised): the folder part (up to the last `/`, empty
    without one) and the name part hashed apart (`_str_hash` over UTF-8) and combined."""
    cut = key.rfind("/")
    folder, name = (key[:cut], key[cut + 1 :]) if cut >= 0 else ("", key)
    enc = "utf-8"
    return _combine(
        _str_hash(folder.encode(enc, errors="surrogatepass")),  # lone surrogates from odd pool bytes hash too
        _str_hash(name.encode(enc, errors="surrogatepass")),
    )


key_hash = path_hash
"""The earlier name of `path_hash`."""


def _zero_bytes(w: np.ndarray) -> np.ndarray:
    """0x80 in every byte of `w` that is zero, 0 elsewhere (exact: no borrow between bytes)."""
    return ~(((w & _L7) + _L7) | w | _L7)


def _word_hashes(
    buf: bytes | np.ndarray, starts: np.ndarray, folders: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`_word_hashes_block` over `starts` a cache-sized block at a time: the dozen temporaries of a round
    stay in the CPU cache (on 4.3 M names this halves the time against one pass over everything). With
    `folders` (each row's folder hash) the hashes returned are the path hashes (`_combine`)."""
    n = len(starts)
    out_h = np.empty(n, dtype=np.uint64)
    out_len = np.empty(n, dtype=np.int32)
    out_ok = np.empty(n, dtype=bool)
    raw = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf
    if len(raw) < 16:
        raw = np.concatenate([raw, np.zeros(16, dtype=np.uint8)])  # a tiny pool: room for one word
    for lo in range(0, n, _ROW_BLOCK):
        hi = min(n, lo + _ROW_BLOCK)
        h, out_len[lo:hi], out_ok[lo:hi] = _word_hashes_block(raw, starts[lo:hi])
        out_h[lo:hi] = h if folders is None else _combine_np(folders[lo:hi], h)
    return out_h, out_len, out_ok


def _word_hashes_block(raw: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(hash, length, ok) of the NUL-terminated byte strings starting at `starts` in `buf`, all at once.

    `_str_hash` of the lower-cased bytes, vectorised: per round one unaligned 64-bit word of every open
    string (rows in `starts` order, so the gathers walk the pool forwards), its first zero byte found with a
    SWAR mask. `ok` is False for strings with a byte >= 0x80, a `/` or `\\`, or over `_FAST_MAX_LEN` bytes
    (their hash and length are then meaningless; the caller redoes them). The end of `buf` ends a string."""
    n = len(starts)
    out_h = np.zeros(n, dtype=np.uint64)
    out_len = np.zeros(n, dtype=np.int32)
    out_ok = np.zeros(n, dtype=bool)
    size = len(raw)
    words = np.ndarray((size - 7,), dtype="<u8", buffer=raw, strides=(1,))
    last = size - 8
    rows = np.arange(n, dtype=np.int64)
    pos = np.asarray(starts, dtype=np.int64)
    h = np.full(n, _SEED, dtype=np.uint64)
    length = np.zeros(n, dtype=np.int32)
    m1 = np.uint64(_M1)
    s32, s2, s8 = np.uint64(32), np.uint64(2), np.uint64(8)
    for _ in range(_FAST_MAX_WORDS):
        if not len(rows):
            break
        at = np.minimum(pos, last)
        w = words[at]
        tail = pos > last
        if tail.any():  # near the end of the buffer: shift the bytes past it out (they read as NUL)
            w[tail] >>= (pos[tail] - at[tail]).astype(np.uint64) * s8
            w[pos >= size] = 0
        z = _zero_bytes(w)
        low = z & (~z + np.uint64(1))  # the terminator's 0x80 bit alone (0: no terminator in this word)
        done = low != 0
        keep = np.where(done, low - np.uint64(1), np.uint64(_MASK64))  # the bytes before the terminator
        w &= keep
        bad = (w & _H8) != 0
        bad |= (_zero_bytes(w ^ _SLASH) & keep) != 0
        bad |= (_zero_bytes(w ^ _BACKSLASH) & keep) != 0
        w |= ((w + _C3F) & ~(w + _C25) & _H8) >> s2  # A-Z -> a-z (ASCII bytes, no carries)
        h ^= w
        h *= m1
        h ^= h >> s32
        # bytes of this word before the terminator: the bits below its 0x80 bit are 8 per byte plus 7
        got = np.full(len(rows), 8, dtype=np.int32)
        if done.any():
            got[done] = (np.bitwise_count(keep[done]).astype(np.int32) - 7) >> 3
        length += got
        fin = done | bad
        if fin.any():
            r = rows[fin]
            out_h[r], out_len[r], out_ok[r] = h[fin], length[fin], ~bad[fin]
            stay = ~fin
            rows, pos, h, length = rows[stay], pos[stay], h[stay], length[stay]
        pos = pos + 8
    # final mix (`_fmix(h ^ len)`) for the finished rows; rows still open are too long (ok stays False)
    hv = out_h ^ out_len.astype(np.uint64)
    hv ^= hv >> np.uint64(33)
    hv *= np.uint64(_M2)
    hv ^= hv >> np.uint64(29)
    return hv, out_len, out_ok


def _combine_np(folder: np.ndarray, name: np.ndarray) -> np.ndarray:
    h = folder * np.uint64(_M1)
    h ^= name
    h ^= h >> np.uint64(33)
    h *= np.uint64(_M2)
    h ^= h >> np.uint64(29)
    return h


class _Pool:
    """One pool as an array of code units (sTrA bytes or sTrW UTF-16 units). Strings are measured only
    where the file table points (`string_spans`), so the memory is bounded by the entries, not by how many
    terminators a pool holds (a CJK-heavy 400 MB sTrW on 110US, or a hostile pool of NULs)."""

    def __init__(self, units: np.ndarray) -> None:
        self.units = units

    def spans(self, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(length, ascii) of the strings starting at `start` (all inside the pool); a start inside a
        string is measured from there (the fast path hashes exactly those units)."""
        return string_spans(self.units, start)


class PathIndex:
    """Lookup key → first file-table entry, and the display path of every entry."""

    def __init__(self, files: np.ndarray, pools: StringPools) -> None:
        self._files = files
        self._pools = pools
        n = len(files)
        raw_a = pools.raw_a_view()
        self._src = (
            _Pool(np.frombuffer(raw_a, dtype=np.uint8)),
            _Pool(np.frombuffer(pools.raw_w_view()[: len(pools.raw_w_view()) & ~1], dtype="<u2")),
        )
        # Folders first: a few thousand distinct strings (a folder's files are listed together), hashed
        # in Python; each name's hash is then combined with its folder's in the same cache-sized block.
        path = files["path"]
        d_offs, d_inv = _unique_runs(path)
        d_offs = d_offs.astype(np.int64)
        u_kind = (d_offs & 1).astype(np.int8)
        u_start = (d_offs >> 1).astype(np.int32)
        u_len = np.zeros(len(d_offs), dtype=np.int32)
        u_ok = np.zeros(len(d_offs), dtype=bool)
        for k, pool in enumerate(self._src):
            at = np.flatnonzero((u_kind == k) & (u_start < len(pool.units)))
            if len(at):
                ln, ascii_only = pool.spans(u_start[at])
                u_len[at] = ln
                u_ok[at] = ascii_only & (ln <= 4 * _FAST_MAX_LEN)
        u_h = np.array(
            [_str_hash(self._norm_folder(int(o)).encode("utf-8", "surrogatepass")) for o in d_offs.tolist()],
            dtype=np.uint64,
        )
        d_inv = d_inv.astype(np.int32)
        names = files["name"]
        n_kind = (names & 1).astype(np.int8)
        n_start = (names >> 1).astype(np.int32)
        n_len = np.zeros(n, dtype=np.int32)
        n_ok = np.zeros(n, dtype=bool)
        hashes = np.zeros(n, dtype=np.uint64)
        # sTrA names: hashed and measured in place, one pass
        sel = np.flatnonzero((n_kind == 0) & (n_start < len(raw_a)))
        if len(sel) == n:
            hashes, n_len, n_ok = _word_hashes(raw_a, n_start, u_h[d_inv])
        elif len(sel):
            hashes[sel], n_len[sel], n_ok[sel] = _word_hashes(raw_a, n_start[sel], u_h[d_inv[sel]])
        # sTrW names (110US keeps every string there): measured, then the ASCII ones copied into bytes
        sel = np.flatnonzero((n_kind == 1) & (n_start < len(self._src[1].units)))
        if len(sel):
            self._hash_wide(sel, n_start, n_len, n_ok, hashes, u_h[d_inv[sel]])
        self._n = (n_kind, n_start, n_len, n_ok)
        self._d = (u_kind, u_start, u_len, u_ok, d_inv)
        for i in np.flatnonzero(~n_ok).tolist():  # only the name decides the hash; the folder is exact
            hashes[i] = path_hash(norm_path(self.resolve_path(i)))
        # One sort of (hash with its low bits replaced by the entry number): equal hashes end up adjacent
        # and in entry order, so `find` meets the earliest entry of a repeated key first.
        self._bits = max(1, (n - 1).bit_length())
        low = np.uint64((1 << self._bits) - 1)
        hashes &= ~low
        hashes |= np.arange(n, dtype=np.uint64)
        hashes.sort()
        self._sorted = hashes
        self._low = low
        same = (hashes[1:] ^ hashes[:-1]) <= low
        self._dup_positions = np.flatnonzero(same)
        self._duplicates: set[int] | None = None

    def _norm_folder(self, off: int) -> str:
        return norm_path(self._pools.resolve(off))

    def _hash_wide(
        self,
        sel: np.ndarray,
        n_start: np.ndarray,
        n_len: np.ndarray,
        n_ok: np.ndarray,
        hashes: np.ndarray,
        folders: np.ndarray,
    ) -> None:
        """sTrW names: lengths from the pool, then the ASCII ones (the UTF-16 units of plain names) copied
        into a NUL-separated byte buffer a block at a time and hashed like sTrA names."""
        units = self._src[1].units
        ln, ascii_only = string_spans(units, n_start[sel])
        n_len[sel] = ln
        fit = ascii_only & (ln <= _FAST_MAX_LEN)
        rows, folders = sel[fit], folders[fit]
        for lo in range(0, len(rows), _HASH_BLOCK):
            part = rows[lo : lo + _HASH_BLOCK]
            lens = n_len[part].astype(np.int64) + 1
            ends = np.cumsum(lens)
            out_off = ends - lens
            idx = np.repeat(n_start[part].astype(np.int64) - out_off, lens)
            idx += np.arange(int(ends[-1]), dtype=np.int64)
            buf = units[np.minimum(idx, len(units) - 1)].astype(np.uint8)
            buf[ends - 1] = 0
            h, got, ok = _word_hashes(buf, out_off, folders[lo : lo + _HASH_BLOCK])
            hashes[part], n_ok[part] = h, ok & (got == n_len[part])

    def __len__(self) -> int:
        return len(self._files)

    def resolve_path(self, i: int) -> str:
        e = self._files[i]
        name = self._pools.resolve(int(e["name"]))
        folder = self._pools.resolve(int(e["path"]))
        return f"{folder}/{name}" if folder else name

    def find(self, key: str) -> int | None:
        """The first entry whose lookup key equals `key` (already normalised), or None."""
        low = self._low
        h = np.uint64(path_hash(key)) & ~low
        ranked = self._sorted
        j = int(np.searchsorted(ranked, h, side="left"))
        while j < len(ranked) and (ranked[j] & ~low) == h:
            i = int(ranked[j] & low)
            if norm_path(self.resolve_path(i)) == key:
                return i
            j += 1
        return None

    def shadowed(self) -> set[int]:
        """Entries whose key repeats an earlier entry's key (listed once, like a dictionary would)."""
        if self._duplicates is None:
            dups: set[int] = set()
            low = int(self._low)
            for j in self._dup_positions.tolist():
                i0, i1 = int(self._sorted[j]) & low, int(self._sorted[j + 1]) & low
                if norm_path(self.resolve_path(i0)) == norm_path(self.resolve_path(i1)):
                    first = self.find(norm_path(self.resolve_path(i1)))
                    dups.update(x for x in (i0, i1) if x != first)
            self._duplicates = dups
        return self._duplicates

    def display_paths(self) -> list[str]:
        """Every entry's path in file-table order (shadowed duplicates included; see `shadowed`)."""
        out: list[str] = []
        for lo in range(0, len(self._files), _BLOCK):
            out.extend(self.display_block(lo))
        return out

    def display_block(self, lo: int) -> list[str]:
        """The paths of entries `lo` .. `lo + _BLOCK - 1` (fewer at the end), decoded in one go."""
        n = len(self._files)
        n_kind, n_start, n_len, n_ok = self._n
        u_kind, u_start, u_len, u_ok, d_inv = self._d
        hi = min(n, lo + _BLOCK)
        folder = d_inv[lo:hi]
        d_kind, d_start, d_len = u_kind[folder], u_start[folder], u_len[folder]
        slow = ~n_ok[lo:hi] | ~u_ok[folder]
        dl = d_len.astype(np.int64)
        nl = n_len[lo:hi].astype(np.int64)
        has_dir = dl > 0
        # Spans: folder units + its terminator (later turned into "/"), then name units + terminator.
        src = np.empty(2 * (hi - lo), dtype=np.int64)
        ln = np.empty(2 * (hi - lo), dtype=np.int64)
        kind = np.empty(2 * (hi - lo), dtype=np.int8)
        src[0::2], ln[0::2], kind[0::2] = d_start, np.where(has_dir, dl + 1, 0), d_kind
        src[1::2], ln[1::2], kind[1::2] = n_start[lo:hi], nl + 1, n_kind[lo:hi]
        # Slow rows (redone below) become an empty string: no folder, a lone terminator (kind 2 = zeros),
        # so an unterminated or huge span can never be gathered.
        ln[0::2][slow], ln[1::2][slow], kind[1::2][slow] = 0, 1, 2
        has_dir &= ~slow
        ends = np.cumsum(ln)
        out_off = ends - ln
        total = int(ends[-1]) if len(ends) else 0
        idx = np.repeat(src - out_off, ln)
        idx += np.arange(total, dtype=np.int64)
        used = np.unique(kind[(ln > 0) & (kind < 2)])
        if len(used) == 1:  # the usual case: every string of the block lives in one pool
            units = self._src[int(used[0])].units
            buf = units[np.minimum(idx, len(units) - 1)].astype(np.uint8)
        else:
            kinds = np.repeat(kind, ln)
            buf = np.zeros(total, dtype=np.uint8)
            for k, pool in enumerate(self._src):
                at = np.flatnonzero(kinds == k)
                if len(at) and len(pool.units):
                    buf[at] = pool.units[np.minimum(idx[at], len(pool.units) - 1)].astype(np.uint8)
        buf[out_off[1::2] + ln[1::2] - 1] = 0  # name terminators (and the lone one of slow rows)
        buf[out_off[0::2][has_dir] + dl[has_dir]] = ord("/")
        block = buf.tobytes().decode("ascii").split("\0")[:-1]
        if len(block) != hi - lo:  # a terminator missing somewhere: resolve this block one by one
            block = [self.resolve_path(i) for i in range(lo, hi)]
        for i in np.flatnonzero(slow).tolist():
            block[i] = self.resolve_path(lo + i)
        return block


NOT_SURE = -1
"""`PoolLookup.find`: this lookup needs the path index (the pool search cannot decide it)."""
_LOWER_TABLE = bytes(
    (b + 32 if 65 <= b <= 90 else 47 if b == 92 else b) for b in range(256)
)  # A-Z -> a-z, `\` -> `/`: `norm_path` on ASCII bytes


class PoolLookup:
    """Single lookups answered from the name pool, without building the path index (PVF-OPEN-4M: a
    `pvf get` or the first `read` of a 4.3 M-file archive need one path, not 4.3 M hashes).

    Applies when every name lives in an ASCII sTrA (the legacy, guard and protected variants pvfine and
    the synthesiser write). The pool is lower-cased once (`\\` → `/`, so it reads like `norm_path`); the
    key's last component plus its NUL is searched in it, and every entry whose name starts inside a string
    holding such a match is a candidate (a name may itself hold `/`), confirmed against its real path. Since
    every name normalises to ASCII, the candidates include every entry with that key, so the first
    confirmed one is the index's answer and none confirmed means absent. What it cannot decide cheaply
    (a key ending in `/`, a name used in thousands of folders, many matches) is `NOT_SURE`."""

    MAX_MATCHES = 64
    MAX_CANDIDATES = 4096

    def __init__(self, files: np.ndarray, pools: StringPools, resolve) -> None:  # type: ignore[no-untyped-def]
        self._names = files["name"]
        self._resolve = resolve
        raw = pools.raw_a_view()
        self.usable = bool(len(self._names)) and raw.isascii() and not bool((self._names & 1).any())
        self._low = raw.translate(_LOWER_TABLE) if self.usable else b""
        self._starts = (self._names >> np.uint32(1)) if self.usable else self._names

    def find(self, key: str) -> int | None:
        """The first entry whose lookup key is `key` (normalised), None when there is none, or `NOT_SURE`."""
        base = key[key.rfind("/") + 1 :]
        if not self.usable or not base:
            return NOT_SURE
        if not base.isascii():
            return None  # every name normalises to ASCII: no entry ends in this component
        needle = base.encode("ascii") + b"\0"
        low = self._low
        ranges: list[tuple[int, int]] = []
        at = low.find(needle)
        while at >= 0:
            if len(ranges) == self.MAX_MATCHES:
                return NOT_SURE
            ranges.append((low.rfind(b"\0", 0, at) + 1, at))  # names starting in [string start, match]
            at = low.find(needle, at + 1)
        if not ranges:
            return None
        starts = self._starts
        hit = np.zeros(len(starts), dtype=bool)
        for lo, hi in ranges:
            hit |= (starts >= lo) & (starts <= hi)
        candidates = np.flatnonzero(hit)
        if len(candidates) > self.MAX_CANDIDATES:
            return NOT_SURE
        for i in candidates.tolist():
            if norm_path(self._resolve(i)) == key:
                return i
        return None


class LazyKeys(Mapping[str, str]):
    """`norm key → display path` for `ArchiveBase`: membership and lookups go through `lookup` (a pool
    search until the index exists), iterating and counting build the path index (`index()`)."""

    def __init__(self, lookup, resolve, index) -> None:  # type: ignore[no-untyped-def]
        self._lookup, self._resolve, self._index = lookup, resolve, index

    def __getitem__(self, key: str) -> str:
        i = self._lookup(key)
        if i is None:
            raise KeyError(key)
        return self._resolve(i)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._lookup(key) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(KeysView(self._index()))

    def items(self):  # type: ignore[override]
        return KeysView(self._index()).items()

    def __len__(self) -> int:
        return len(KeysView(self._index()))


class PathList(Sequence[str]):
    """Every listed path of an archive without staged changes, in file-table order, decoded on demand.

    `len`, indexing, slices and iteration behave like the list `display_paths` would build, but a block of
    paths is decoded only when something asks for one of its entries (the last few blocks are kept), so
    opening a 4.3 M-file archive does not create 4.3 M strings before anything is read (PVF-OPEN-4M);
    iterating decodes block by block (vectorised gathers, `PathIndex.display_block`)."""

    _KEEP = 8

    def __init__(self, index: PathIndex) -> None:
        self._index = index
        shadowed = index.shadowed()
        self._rows: np.ndarray | None = (
            np.setdiff1d(np.arange(len(index), dtype=np.int64), np.fromiter(shadowed, dtype=np.int64))
            if shadowed
            else None
        )
        self._blocks: dict[int, list[str]] = {}

    def __len__(self) -> int:
        return len(self._index) if self._rows is None else len(self._rows)

    def _block(self, b: int) -> list[str]:
        block = self._blocks.pop(b, None)
        if block is None:
            block = self._index.display_block(b * _BLOCK)
            while len(self._blocks) >= self._KEEP:
                self._blocks.pop(next(iter(self._blocks)))
        self._blocks[b] = block
        return block

    def _entry(self, row: int) -> str:
        return self._block(row // _BLOCK)[row % _BLOCK]

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("path index out of range")
        return self._entry(i if self._rows is None else int(self._rows[i]))

    def __iter__(self) -> Iterator[str]:
        if self._rows is None:
            for lo in range(0, len(self._index), _BLOCK):
                yield from self._index.display_block(lo)
            return
        skip = set(self._index.shadowed())
        for lo in range(0, len(self._index), _BLOCK):
            for k, path in enumerate(self._index.display_block(lo)):
                if lo + k not in skip:
                    yield path

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        i = self._index.find(norm_path(path))
        return i is not None and self._entry(i) == path

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PathList | list | tuple):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # like a list

    def __repr__(self) -> str:
        return f"PathList({len(self)} paths)"


class KeysView(Mapping[str, str]):
    """`norm key → display path` over a `PathIndex`, the mapping `ArchiveBase` asks for."""

    def __init__(self, index: PathIndex) -> None:
        self._index = index

    def __getitem__(self, key: str) -> str:
        i = self._index.find(key)
        if i is None:
            raise KeyError(key)
        return self._index.resolve_path(i)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._index.find(key) is not None

    def __iter__(self) -> Iterator[str]:
        for _, key in self._pairs():
            yield key

    def items(self):  # type: ignore[override]
        for path, key in self._pairs():
            yield key, path

    def _pairs(self) -> Iterator[tuple[str, str]]:
        shadowed = self._index.shadowed()
        for i, path in enumerate(self._index.display_paths()):
            if i not in shadowed:
                yield path, norm_path(path)

    def __len__(self) -> int:
        return len(self._index) - len(self._index.shadowed())
