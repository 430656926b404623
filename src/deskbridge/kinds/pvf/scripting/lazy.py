"""Lazily read documents of the script worker: a classic script's tree from its tag records alone.

A price-raise over every equipment file reads one section of each file; decoding each whole file to tokens
and building its tree cost ≈ 1 ms per file, most of the run (issue 14, PVF-SCRIPT in TARGETS.md). Here a
document is built from the positions of its section-tag records (type 5 whose string is a tag, found with
one vectorised comparison over the 5-byte records), and each section's values are decoded from its own
record range when the script first reads them (`model.LazyDocument`). The tokens are the ones
`classic_codec.to_tokens` gives for the whole file (`records_tokens` on a run of records that starts after a
tag); `tests/kinds/pvf/test_script_lazy.py` checks reads and writes against whole-file documents.

Where the whole-file decode would take its record-at-a-time path (a file whose text could exceed the
decompile budget) the document is decoded whole, as before, so the budget is enforced the same way.
"""

from __future__ import annotations

import bisect
import contextlib
import struct
import weakref
from typing import Any

import numpy as np

from deskbridge.kinds.pvf.archive.budget import text_budget
from deskbridge.kinds.pvf.script import classic_codec as cc
from deskbridge.kinds.pvf.script.text import INT32_MAX, Kind, Token, typed_token, value_piece
from deskbridge.kinds.pvf.scripting import model

_MISS = object()
_U32 = struct.Struct("<I")
_TAG_CACHES: weakref.WeakKeyDictionary[Any, dict[int, Any]] = weakref.WeakKeyDictionary()
TAG_CACHE_MAX = 1 << 16
_LAST_TAGS: tuple[Any, dict[int, Any]] | None = None
_LAST: tuple[Any, str, int, tuple[bytes, ...]] | None = None
"""(weak reference to a string table, name, table size, `_tag_patterns`): the last answer."""
_LAST_INDEXES: tuple[tuple[bytes, ...], frozenset[int]] | None = None

RecordTags = tuple[list[int], list[int]]
"""(record numbers, string indexes) of a file's type-5 records (`batch_tags`)."""


def batch_tags(payloads: list[bytes]) -> list[RecordTags]:
    """Of each payload, the number and the string index of every whole 5-byte record of type 5 (a section
    tag type; records start at offset 2) — what `ClassicDocument._shape` and `_has_tag` read, found for a
    batch of files in a few numpy calls over their concatenation instead of a slice and a loop of `find`s per
    file. A record cut short by its file's end is not one (`classic_document` refuses such a file anyway)."""
    batch = BatchTags(payloads)
    return [batch.of(i) for i in range(len(payloads))]


class BatchTags:
    """The type-5 records of a batch of payloads (`batch_tags`), kept as numpy columns: a file's own lists
    are made only when its document needs them (`of`), and which files have no record of some string
    indexes is answered for the whole batch at once (`without`)."""

    def __init__(self, payloads: list[bytes]) -> None:
        n = len(payloads)
        self.n = n
        sizes = np.fromiter(map(len, payloads), dtype=np.int64, count=n)
        ends = np.cumsum(sizes)
        starts = ends - sizes
        buf = np.frombuffer(b"".join(payloads), dtype=np.uint8)
        self.sizes = sizes
        pos = np.flatnonzero(buf == cc.T_SECTION)
        f = np.searchsorted(ends, pos, side="right")
        rel = pos - starts[f] - 2
        keep = (rel >= 0) & (rel % 5 == 0) & (pos + 5 <= ends[f])
        pos, f, rel = pos[keep], f[keep], rel[keep]
        self.vals = (
            buf[pos + 1].astype(np.uint32)
            | (buf[pos + 2].astype(np.uint32) << 8)
            | (buf[pos + 3].astype(np.uint32) << 16)
            | (buf[pos + 4].astype(np.uint32) << 24)
        )
        self.recs = rel // 5
        self.file = f
        self.bounds = [0, *np.searchsorted(f, np.arange(1, n), side="left").tolist(), len(f)]

    def of(self, i: int) -> RecordTags:
        """(record numbers, string indexes) of the type-5 records of payload `i`."""
        a, b = self.bounds[i], self.bounds[i + 1]
        return self.recs[a:b].tolist(), self.vals[a:b].tolist()

    def without(self, indexes: frozenset[int]) -> np.ndarray:
        """Per payload: True where none of its type-5 records names one of these string indexes."""
        hit = np.isin(self.vals, np.fromiter(indexes, dtype=np.uint32, count=len(indexes)))
        return np.bincount(self.file[hit], minlength=self.n) == 0


def _pattern_indexes(patterns: tuple[bytes, ...]) -> frozenset[int]:
    """The string indexes of `_tag_patterns`' records (each is type 5 + that index)."""
    global _LAST_INDEXES
    last = _LAST_INDEXES
    if last is not None and last[0] is patterns:
        return last[1]
    out = frozenset(_U32.unpack_from(pat, 1)[0] for pat in patterns)
    _LAST_INDEXES = (patterns, out)
    return out


def _tag_cache(strings: cc.StringSource) -> dict[int, Any]:
    """String index of a type-5 record → its `model.tag_info`, or None where the record is not a tag (a
    string that is not tag text, or a later duplicate: `classic_codec.record_token`), per string table."""
    global _LAST_TAGS
    last = _LAST_TAGS  # a run reads one table: one comparison, not the weak dictionary
    if last is not None and last[0]() is strings and len(last[1]) <= TAG_CACHE_MAX:
        return last[1]
    try:
        cache = _TAG_CACHES.setdefault(strings, {})
    except TypeError:  # not weak-referenceable: no cache
        return {}
    if len(cache) > TAG_CACHE_MAX:
        cache.clear()
    _LAST_TAGS = (weakref.ref(strings), cache)
    return cache


def _tag_of(v: int, strings: cc.StringSource, cache: dict[int, Any]) -> model.TagInfo | None:
    tok = cc.record_token(cc.T_SECTION, v, strings)
    info = model.tag_info(str(tok.value)) if tok.kind is Kind.SECTION else None
    if v < (len(strings) if hasattr(strings, "__len__") else 0):  # a later index may be appended: not cached
        cache[v] = info
    return info


def classic_document(
    data: bytes,
    strings: cc.StringSource,
    link_text: cc.LinkText | None,
    *,
    header: str | None,
    record_width: int | None,
    tags: RecordTags | None = None,
) -> model.Document | None:
    """The lazy document of a classic binary script, or None where it must be decoded whole. `tags`: the
    file's type-5 records where `batch_tags` found them with its batch."""
    size = len(data)
    if size > cc.MAX_SCRIPT_BYTES:
        return None
    if data[:2] != cc.MAGIC or (size - 2) % 5:
        cc.read_tokens(data)  # raises its PVF_CORRUPT
    n = (size - 2) // 5
    max_chars = getattr(strings, "max_chars", None)
    if max_chars is None or n * max_chars() > text_budget(size) - (1 << 16):
        return None
    return ClassicDocument(data, strings, link_text, n, header, record_width, tags)


class ClassicDocument(model.LazyDocument):
    """`model.LazyDocument` over the records of a stored classic script. Its tags are found by their type
    byte (every fifth byte from offset 2: a C-level slice and `find`s over ≈ 16 tags cost less than the numpy
    calls that would do the same on one small file), and what `find` needs of them (which tags nest, which
    are top-level) from the tags alone (`model.TagShape`)."""

    def __init__(
        self,
        data: bytes,
        strings: cc.StringSource,
        link_text: cc.LinkText | None,
        n: int,
        header: str | None,
        record_width: int | None,
        tags: RecordTags | None = None,
    ) -> None:
        self._init_lazy(header, record_width, n, data)
        self._strings = strings
        self._link_text = link_text
        self._recs: Any = None
        self._rec_tags = tags
        self._keys: list[int] | None = None
        self._nines: list[int] = []

    def _all_tokens(self) -> list[Token]:
        return cc.to_tokens(self._data, self._strings, self._link_text)

    def _decode(self, a: int, b: int) -> list[Token]:
        if b - a <= SMALL_RUN:
            return cc.run_tokens(self._data, a, b, self._strings, self._link_text)
        recs = self._recs
        if recs is None:
            recs = self._recs = cc.read_tokens(self._data)
        return cc.records_tokens(recs[a:b], self._strings, self._link_text)[0]

    def _run_text(self, a: int, b: int, indent: int) -> str:
        """`model.values_block` of records `a:b` from each record's printed piece (kept per string table
        and indent, like the decoder's record tokens: `classic_codec.records_tokens`), without making the
        run's tokens; a string link (a type-9 record and its key: its text is resolved per use) is printed
        from its tokens."""
        keys = self._keys
        if keys is None:
            recs = self._recs
            if recs is None:
                recs = self._recs = cc.read_tokens(self._data)
            types = recs["t"]
            keys = self._keys = ((types.astype(np.int64) << 32) | recs["v"].astype(np.int64)).tolist()
            self._nines = np.flatnonzero(types == cc.T_LINK_ID).tolist()
        strings = self._strings
        pieces = _pieces(strings, indent)
        get = pieces.get
        nines = self._nines
        j = bisect.bisect_left(nines, a) if nines else 0
        if j == len(nines) or nines[j] >= b:
            parts = [get(k) or _piece(k, strings, pieces, indent) for k in keys[a:b]]
        else:  # `records_tokens`' reading of type-9 records, each pair's piece made from its tokens
            parts = []
            brk = "\n" + "\t" * indent
            start = a
            for p in nines[j:]:
                if p >= b:
                    break
                if p < start:
                    continue
                parts.extend([get(k) or _piece(k, strings, pieces, indent) for k in keys[start:p]])
                v = keys[p] & 0xFFFFFFFF
                if p + 1 < b and keys[p + 1] >> 32 == cc.T_LINK_KEY and v <= INT32_MAX:
                    toks = cc.link_tokens(v, keys[p + 1] & 0xFFFFFFFF, strings, self._link_text)
                    start = p + 2
                else:
                    toks = [typed_token(cc.T_LINK_ID, cc._signed(v))]
                    start = p + 1
                for tok in toks:
                    text, new_line = value_piece(tok)
                    parts.append(brk + text if new_line else "\t" + text)
            parts.extend([get(k) or _piece(k, strings, pieces, indent) for k in keys[start:b]])
        run = "".join(parts)
        # each piece is its separator and its text: the first value's line starts with the indent instead
        return run[1:] if run[0] == "\n" else "\t" * indent + run[1:]

    def _has_tag(self, want: str) -> bool:
        patterns = _tag_patterns(self._strings, want)
        if patterns is None:
            return True  # cannot tell without the tags
        tags = self._rec_tags
        if tags is not None:  # the records `batch_tags` found: a whole record is type 5 + one of these
            return not _pattern_indexes(patterns).isdisjoint(tags[1])
        return model.at_a_record(self._data, patterns, 2)  # classic records start after the 2-byte header

    def _shape(self) -> tuple[model.TagShape, list[int]]:
        shape = self._shape_of
        if shape is not None:
            return shape, self._positions  # type: ignore[return-value]
        data = self._data
        strings = self._strings
        cache = _tag_cache(strings)
        tags = self._rec_tags
        if tags is not None:
            at, vals = tags
        else:
            find = data[2::5].find
            at = []
            p = find(cc.T_SECTION)
            while p >= 0:
                at.append(p)
                p = find(cc.T_SECTION, p + 1)
            unpack = _U32.unpack_from
            vals = [unpack(data, 3 + 5 * p)[0] for p in at]
        get = cache.get
        got = [get(v, _MISS) for v in vals]
        if _MISS in got:
            got = [
                g if g is not _MISS else _tag_of(v, strings, cache) for g, v in zip(got, vals, strict=True)
            ]
        if None in got:  # tag-typed records that are no tag (a later duplicate, not tag text)
            keep = [j for j, g in enumerate(got) if g is not None]
            shape = model.TagShape(keep, [got[j] for j in keep])
            positions = [at[j] for j in keep]
        else:
            shape = model.TagShape(list(range(len(at))), got)
            positions = at
        self._shape_of, self._positions = shape, positions
        return shape, positions


PIECES_MAX = 1 << 16
"""Printed pieces one string table keeps per indent (`_pieces`)."""


def _pieces(strings: cc.StringSource, indent: int) -> dict[int, str]:
    """Record key (type << 32 | value) → its piece in a run of values indented by `indent` TABs: TAB + its
    text, or (string-like: it starts a new line) newline + the indent + its text (`text.value_piece`)."""
    cache = _tag_cache(strings)
    key = ("pieces", indent)
    got = cache.get(key)  # type: ignore[call-overload]
    if got is None or len(got) > PIECES_MAX:
        got = cache[key] = {}  # type: ignore[index]
    return got  # type: ignore[no-any-return]


def _piece(k: int, strings: cc.StringSource, pieces: dict[int, str], indent: int) -> str:
    """The piece of record key `k` (never type 9), kept unless it names a string index past the table's end
    (a string appended later may give it another text: `classic_codec._miss`'s rule)."""
    tokens = cc._token_cache(strings)
    size = len(strings) if hasattr(strings, "__len__") else 0  # type: ignore[arg-type]
    tok = tokens.get(k) or cc._miss(k, tokens, strings, size)
    text, new_line = value_piece(tok)
    piece = "\n" + "\t" * indent + text if new_line else "\t" + text
    t, v = k >> 32, k & 0xFFFFFFFF
    if t not in cc.STRING_TYPES or v < size:
        pieces[k] = piece
    return piece


SMALL_RUN = 16
"""Runs of at most this many records are decoded with `struct` (`classic_codec.run_tokens`): numpy's
per-call cost is most of the work for the one or two values of a section."""


def _tag_patterns(strings: cc.StringSource, want: str) -> tuple[bytes, ...] | None:
    """The 5-byte records (type 5 + string index) of every tag the string table reads as a section named
    `want` in any case (`model.tag_info(...)[3] == want`), or None when the table cannot be listed. Found
    once per name and table (one pass over the table's strings), so a run asking every file for `[price]`
    skips the tag scan of each file without one: no such record, no such section."""
    global _LAST
    last = _LAST  # a run asks every file for the same name: one comparison, not the cache lookup below
    if last is not None and last[1] == want and last[0]() is strings and last[2] == len(strings):  # type: ignore[arg-type]
        return last[3]
    size = len(strings) if hasattr(strings, "__len__") else None  # type: ignore[arg-type]
    get = getattr(strings, "get", None)
    if size is None or get is None:
        return None
    cache = _tag_cache(strings)
    key = ("patterns", want)
    hit = cache.get(key)  # type: ignore[call-overload]
    if hit is not None and hit[0] == size:
        with contextlib.suppress(TypeError):
            _LAST = (weakref.ref(strings), want, size, hit[1])
        return hit[1]
    target = f"[{want}]"
    out = []
    bracketed = getattr(strings, "bracketed", None)
    # only strings that start with `[` can lower to it: found by their first byte, not decoded
    candidates: Any = bracketed() if bracketed is not None else range(size)
    for i in candidates:
        s = get(i)
        if s is not None and s.lower() == target:
            tok = cc.record_token(cc.T_SECTION, i, strings)
            if tok.kind is Kind.SECTION and model.tag_info(str(tok.value))[3] == want:
                out.append(bytes([cc.T_SECTION]) + _U32.pack(i))
    found = tuple(out)
    cache[key] = (size, found)  # type: ignore[index]
    with contextlib.suppress(TypeError):  # not weak-referenceable: no memo
        _LAST = (weakref.ref(strings), want, size, found)
    return found
