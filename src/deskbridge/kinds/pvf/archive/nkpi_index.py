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

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from .base import norm_path
from .nkpi_pools import _unique_runs, string_spans

if TYPE_CHECKING:
    from .nkpi_pools import StringPools

_P = 1_000_003
_MASK64 = (1 << 64) - 1
_FAST_MAX_LEN = 96
_LOWER = np.arange(256, dtype=np.uint64)
_LOWER[ord("A") : ord("Z") + 1] += 32
_LOWER[ord("\\")] = ord("/")
_BLOCK = 16384


def key_hash(key: str) -> int:
    """The 64-bit hash of a lookup key (Horner over its UTF-8 bytes, mod 2^64)."""
    h = 0
    for b in key.encode("utf-8", errors="surrogatepass"):  # lone surrogates from odd pool bytes hash too
        h = (h * _P + b) & _MASK64
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
        self._src = (
            _Pool(np.frombuffer(pools.raw_a_view(), dtype=np.uint8)),
            _Pool(np.frombuffer(pools.raw_w_view()[: len(pools.raw_w_view()) & ~1], dtype="<u2")),
        )
        path = files["path"]
        # Names and folders measured together: one scan of each pool.
        kind, start, length, ok = self._measure(np.concatenate([files["name"], path]))
        n_kind, n_start, n_len, n_ok = kind[:n], start[:n], length[:n], ok[:n]
        d_kind, d_start, d_len, d_ok = kind[n:], start[n:], length[n:], ok[n:]
        del kind, start, length, ok
        slow = ~n_ok | ~d_ok | (n_len > _FAST_MAX_LEN)
        del n_ok, d_ok
        self._n = (n_kind, n_start, n_len)
        self._d = (d_kind, d_start, d_len)
        self._slow = slow

        # Name hashes: Horner over the code units (ASCII only on this path, so equal to the UTF-8 bytes a
        # query hashes), per pool, longest names first so each step works on a prefix.
        hashes = np.zeros(n, dtype=np.uint64)
        p = np.uint64(_P)
        for kind, pool in enumerate(self._src):
            sel = np.flatnonzero(~slow & (n_kind == kind))
            order = sel[np.argsort((-n_len[sel]).astype(np.int16), kind="stable")]  # int16: radix sort
            lens, pos = n_len[order], n_start[order].copy()
            h = np.zeros(len(order), dtype=np.uint64)
            unit = np.empty(len(order), dtype=pool.units.dtype)
            low = np.empty(len(order), dtype=np.uint64)
            # counts[k] = how many names are longer than k (lens is sorted longest first)
            counts = np.searchsorted(-lens, -np.arange(int(lens[0]) if len(lens) else 0), side="left")
            for count in counts.tolist():
                np.take(pool.units, pos[:count], out=unit[:count])
                np.take(_LOWER, unit[:count], out=low[:count])
                hc = h[:count]
                hc *= p
                hc += low[:count]
                pos[:count] += 1
            hashes[order] = h
        # Combine with the folder: hash(folder + "/" + name) = (h_dir*P + '/') * P^len(name) + h_name.
        fast = np.flatnonzero(~slow & (d_len > 0))
        powers = np.array([pow(_P, i, 1 << 64) for i in range(_FAST_MAX_LEN + 1)], dtype=np.uint64)
        dir_offs, dir_inv = _unique_runs(path[fast])
        dir_h = np.array(
            [
                (key_hash(norm_path(pools.resolve(int(o)))) * _P + ord("/")) & _MASK64
                for o in dir_offs.tolist()
            ],
            dtype=np.uint64,
        )
        combined = dir_h[dir_inv]
        del dir_inv
        combined *= powers[n_len[fast]]
        combined += hashes[fast]
        hashes[fast] = combined
        del combined, fast
        for i in np.flatnonzero(slow).tolist():
            hashes[i] = key_hash(norm_path(self.resolve_path(i)))
        # numpy's default (SIMD) argsort is ~6x faster than the stable one on a million uint64s. Only equal
        # hashes care about the order (`find` must meet the earliest entry of a repeated key first), so the
        # stable sort runs only when some hash repeats.
        order = np.argsort(hashes)
        ranked = hashes[order]
        dup = np.flatnonzero(ranked[1:] == ranked[:-1])
        if len(dup):
            order = np.argsort(hashes, kind="stable")
            ranked = hashes[order]
        self._order = order.astype(np.int32)
        self._sorted = ranked
        self._dup_positions = dup
        self._duplicates: set[int] | None = None

    def _measure(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(pool kind 0=sTrA/1=sTrW, start unit, length, fast-path ok) of each magic offset.

        int8/int32 throughout (pools are < 2 GiB): the index keeps these for a million entries."""
        kind = (offsets & 1).astype(np.int8)
        start = (offsets >> 1).astype(np.int32)
        length = np.zeros(len(offsets), dtype=np.int32)
        ok = np.zeros(len(offsets), dtype=bool)
        for k, pool in enumerate(self._src):
            sel = np.flatnonzero((kind == k) & (start < len(pool.units)))
            ln, ascii_only = pool.spans(start[sel])
            length[sel] = ln
            ok[sel] = ascii_only & (ln <= 4 * _FAST_MAX_LEN)
        return kind, start, length, ok

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
        for lo in range(0, len(self._files), _BLOCK):
            out.extend(self.display_block(lo))
        return out

    def display_block(self, lo: int) -> list[str]:
        """The paths of entries `lo` .. `lo + _BLOCK - 1` (fewer at the end), decoded in one go."""
        n = len(self._files)
        n_kind, n_start, n_len = self._n
        d_kind, d_start, d_len = self._d
        hi = min(n, lo + _BLOCK)
        dl = d_len[lo:hi].astype(np.int64)
        nl = n_len[lo:hi].astype(np.int64)
        has_dir = dl > 0
        # Spans: folder units + its terminator (later turned into "/"), then name units + terminator.
        src = np.empty(2 * (hi - lo), dtype=np.int64)
        ln = np.empty(2 * (hi - lo), dtype=np.int64)
        kind = np.empty(2 * (hi - lo), dtype=np.int8)
        src[0::2], ln[0::2], kind[0::2] = d_start[lo:hi], np.where(has_dir, dl + 1, 0), d_kind[lo:hi]
        src[1::2], ln[1::2], kind[1::2] = n_start[lo:hi], nl + 1, n_kind[lo:hi]
        slow = self._slow[lo:hi]
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
        for i in np.flatnonzero(self._slow[lo:hi]).tolist():
            block[i] = self.resolve_path(lo + i)
        return block


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
