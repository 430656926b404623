"""A compact path index over the nkpi file table: a million paths listable and findable without a million dicts.

Holding every path as a Python string in a dict costs ~250 MB for 1 M files — more than the archive.
Instead each entry gets a 64-bit polynomial hash of its lookup key (`norm_path`: lower case, `/`),
computed with numpy straight from the sTrA pool bytes; a lookup hashes the query the same way, binary-
searches the sorted hashes and confirms the candidate by resolving its real path (so collisions are
harmless). Listing gathers all `folder/name` bytes with one vectorised copy per block and decodes them in
one go. Entries the fast path cannot express (names in the UTF-16 pool, non-ASCII bytes, very long names)
are hashed and listed through the ordinary Python path resolution.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

import numpy as np

from .base import norm_path

if TYPE_CHECKING:
    from .nkpi_pools import StringPools

_P = 1_000_003
_MASK64 = (1 << 64) - 1
_FAST_MAX_LEN = 96
_LOWER = np.arange(256, dtype=np.uint64)
_LOWER[ord("A") : ord("Z") + 1] += 32
_LOWER[ord("\\")] = ord("/")
_BLOCK = 65536


def key_hash(key: str) -> int:
    """The 64-bit hash of a lookup key (Horner over its UTF-8 bytes, mod 2^64)."""
    h = 0
    for b in key.encode("utf-8", errors="surrogatepass"):  # lone surrogates from odd pool bytes hash too
        h = (h * _P + b) & _MASK64
    return h


class PathIndex:
    """Lookup key → first file-table entry, and the display path of every entry."""

    def __init__(self, files: np.ndarray, pools: StringPools) -> None:
        self._files = files
        self._pools = pools
        n = len(files)
        a = np.frombuffer(pools.raw_a_view(), dtype=np.uint8)
        name = files["name"].astype(np.int64)
        path = files["path"].astype(np.int64)
        nul = np.append(np.flatnonzero(a == 0), len(a))
        n_start = name >> 1
        n_len = nul[np.searchsorted(nul, n_start)] - n_start
        d_start = path >> 1
        d_len = nul[np.searchsorted(nul, d_start)] - d_start
        slow = ((name & 1) == 1) | ((path & 1) == 1) | (n_len > _FAST_MAX_LEN) | (d_len > 4 * _FAST_MAX_LEN)
        high = np.flatnonzero(a >= 0x80)
        if len(high):
            slow |= np.searchsorted(high, n_start + n_len) > np.searchsorted(high, n_start)
            slow |= np.searchsorted(high, d_start + d_len) > np.searchsorted(high, d_start)
        # int32 is enough (pools are < 2 GiB) and halves what the index keeps for a million entries.
        self._n_start, self._n_len = n_start.astype(np.int32), n_len.astype(np.int32)
        self._d_start, self._d_len = d_start.astype(np.int32), d_len.astype(np.int32)
        self._slow = slow
        self._a = a

        # Name hashes, Horner over the bytes, longest names first so each step works on a prefix.
        fast = np.flatnonzero(~slow)
        order = fast[np.argsort(-n_len[fast], kind="stable")]
        lens = n_len[order]
        starts = n_start[order]
        h = np.zeros(len(order), dtype=np.uint64)
        p = np.uint64(_P)
        max_len = int(lens[0]) if len(lens) else 0
        count = len(lens)
        for k in range(max_len):
            while count and lens[count - 1] <= k:
                count -= 1
            h[:count] = h[:count] * p + _LOWER[a[starts[:count] + k]]
        hashes = np.zeros(n, dtype=np.uint64)
        hashes[order] = h
        # Combine with the folder: hash(folder + "/" + name) = (h_dir*P + '/') * P^len(name) + h_name.
        powers = np.array([pow(_P, i, 1 << 64) for i in range(_FAST_MAX_LEN + 1)], dtype=np.uint64)
        dir_offs, dir_inv = np.unique(path[fast], return_inverse=True)
        dir_h = np.array([(key_hash(norm_path(pools.resolve(int(o)))) * _P + ord("/")) & _MASK64
                          for o in dir_offs.tolist()], dtype=np.uint64)
        has_dir = d_len[fast] > 0
        combined = dir_h[dir_inv] * powers[n_len[fast]] + hashes[fast]
        hashes[fast] = np.where(has_dir, combined, hashes[fast])
        for i in np.flatnonzero(slow).tolist():
            hashes[i] = key_hash(norm_path(self.resolve_path(i)))
        self._order = np.argsort(hashes, kind="stable").astype(np.int32)
        self._sorted = hashes[self._order]
        dup = np.flatnonzero(self._sorted[1:] == self._sorted[:-1])
        self._dup_positions = dup
        self._duplicates: set[int] | None = None

    def __len__(self) -> int:
        return len(self._files)

    def resolve_path(self, i: int) -> str:
        e = self._files[i]
        name = self._pools.resolve(int(e["name"]))
        folder = self._pools.resolve(int(e["path"]))
        return f"{folder}/{name}" if folder else name

    def find(self, key: str) -> int | None:
        """The first entry whose lookup key equals `key` (already normalised), or None."""
        h = np.uint64(key_hash(key))
        j = int(np.searchsorted(self._sorted, h, side="left"))
        while j < len(self._sorted) and self._sorted[j] == h:
            i = int(self._order[j])
            if norm_path(self.resolve_path(i)) == key:
                return i
            j += 1
        return None

    def shadowed(self) -> set[int]:
        """Entries whose key repeats an earlier entry's key (listed once, like a dictionary would)."""
        if self._duplicates is None:
            dups: set[int] = set()
            for j in self._dup_positions.tolist():
                i0, i1 = int(self._order[j]), int(self._order[j + 1])
                if norm_path(self.resolve_path(i0)) == norm_path(self.resolve_path(i1)):
                    first = self.find(norm_path(self.resolve_path(i1)))
                    dups.update(x for x in (i0, i1) if x != first)
            self._duplicates = dups
        return self._duplicates

    def display_paths(self) -> list[str]:
        """Every entry's path in file-table order (shadowed duplicates included; see `shadowed`)."""
        out: list[str] = []
        a = self._a
        n = len(self._files)
        for lo in range(0, n, _BLOCK):
            hi = min(n, lo + _BLOCK)
            d_len = self._d_len[lo:hi].astype(np.int64)
            n_len = self._n_len[lo:hi].astype(np.int64)
            has_dir = d_len > 0
            # Spans: folder bytes + its NUL (NUL later turned into "/"), then name bytes + its NUL.
            src = np.empty(2 * (hi - lo), dtype=np.int64)
            ln = np.empty(2 * (hi - lo), dtype=np.int64)
            src[0::2], ln[0::2] = self._d_start[lo:hi], np.where(has_dir, d_len + 1, 0)
            src[1::2], ln[1::2] = self._n_start[lo:hi], n_len + 1
            ends = np.cumsum(ln)
            out_off = ends - ln
            total = int(ends[-1]) if len(ends) else 0
            idx = np.repeat(src - out_off, ln) + np.arange(total, dtype=np.int64)
            buf = a[np.minimum(idx, len(a) - 1)].copy()
            buf[idx >= len(a)] = 0
            sep = out_off[0::2][has_dir] + d_len[has_dir]
            buf[sep] = ord("/")
            block = buf.tobytes().decode(self._pools.encoding, errors="surrogateescape").split("\0")[:-1]
            if len(block) != hi - lo:  # a NUL-less tail or odd bytes: resolve this block one by one
                block = [self.resolve_path(i) for i in range(lo, hi)]
            out.extend(block)
        for i in np.flatnonzero(self._slow).tolist():
            out[i] = self.resolve_path(i)
        return out


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
