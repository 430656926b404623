"""Lazily read nkpi documents of the script worker: the tree from the tag records, values decoded per section.

The classic reading (`lazy.py`) with nkpi's records (`script/nkpi_codec.py`: `len/5` records of `u8 type +
i32 value`, no header; tags are type 3). Over all 142,855 equipment files of nkpi-1m a whole decode of each
file (tokens, then the tree) was ≈ 1.5–2 ms a file, the whole run (issue 14).

What makes nkpi different: a string record prints raw (`{N=offset}`) where the file used the same string
earlier at another offset (`nkpi_codec.to_tokens`: a string compiles back to the first offset it had), so a
run of records does not decode on its own. Here that rule is kept per file without decoding it: tags take
part in it only among tags (the rule's key is (is it a tag, the string)), so the tag scan applies it to the
type-3 records it reads anyway; a short run of numbers (`[price]`) decodes on its own, and any run that
holds a string record is a slice of one whole decode of the file (`to_tokens`, the same record cache). The
text budget is kept by decoding whole (as before) any file whose text could exceed it by the pools'
longest string.

`doc.sections(name)` of a file with no tag record naming `[name]` answers without the tag scan: the offsets
of every pool string that reads `[name]` (any case) are found once per name and pools by searching the
lower-cased pools, and a file has such a tag only if one of those 5-byte records is in it (one `bytes.find`
each). `tests/kinds/pvf/test_script_lazy_nkpi.py` checks reads and writes against whole-file documents.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any

import numpy as np

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive.budget import text_budget
from deskbridge.kinds.pvf.script import nkpi_codec as nc
from deskbridge.kinds.pvf.script.text import Kind, Token
from deskbridge.kinds.pvf.scripting import model

_REC = struct.Struct("<Bi")
_U32 = struct.Struct("<I")
_TAG_KEY = nc.T_TAG << 32
SMALL_RUN = 16
"""Runs of at most this many records are unpacked with `struct` (numpy's per-call cost is most of the work
for the one or two values of a section)."""


# ------------------------------------------------------------------------------------------- pool facts


class _PoolFacts:
    """What the lazy reading needs of one state of the pools (their sizes): the longest string any offset
    can resolve to, the tag records found per name, and the tag reading of each type-3 value. No pool bytes
    are kept (a million-file archive's sTrA is ≈ 62 MB; the worker's memory is capped)."""

    def __init__(self, pools: Any) -> None:
        self.sizes = (pools.size_a, pools.size_w)
        a, w = _pool_bytes(pools)
        self.max_chars = max(_longest(a, np.uint8), _longest(w, np.dtype("<u2")))
        self.patterns: dict[str, tuple[bytes, ...] | None] = {}
        self.tags: dict[int, tuple[str | None, model.TagInfo | None]] = {}
        """Signed value of a type-3 record → `NkpiDocument._tag_entry`."""


def _pool_bytes(pools: Any) -> tuple[bytes, bytes]:
    """sTrA and sTrW as they are now: the bytes as opened (no copy) plus what was appended since."""
    tail_a, tail_w = pools.appended_raw()
    a, w = pools.raw_a_view(), pools.raw_w_view()
    return (a + tail_a if tail_a else a), (w + tail_w if tail_w else w)


def _longest(raw: bytes, dtype: Any) -> int:
    """An upper bound of the characters of any string of a pool: the longest run of units without a NUL
    unit (sTrA: ≥ 1 byte per character in every supported encoding, undecodable bytes one each; sTrW: one
    code unit per character at most, strings start on a unit and end at the next NUL unit)."""
    width = np.dtype(dtype).itemsize
    units = np.frombuffer(raw[: len(raw) - len(raw) % width], dtype=dtype)
    if len(units) == 0:
        return 0
    nul = np.flatnonzero(units == 0)
    bounds = np.concatenate(([-1], nul, [len(units)]))
    return int(np.diff(bounds).max())


_FACTS: weakref.WeakKeyDictionary[Any, _PoolFacts] = weakref.WeakKeyDictionary()
_LAST_FACTS: tuple[Any, _PoolFacts] | None = None


def pool_facts(pools: Any) -> _PoolFacts | None:
    """The `_PoolFacts` of `pools` as they are now (recomputed when they grew), or None for pools that
    cannot be listed (then documents are decoded whole)."""
    global _LAST_FACTS
    last = _LAST_FACTS  # a run reads one pool set: one comparison, not the weak dictionary
    if last is not None and last[0]() is pools and last[1].sizes == (pools.size_a, pools.size_w):
        return last[1]
    if not all(hasattr(pools, a) for a in ("raw_a_view", "raw_w_view", "appended_raw", "size_a", "size_w")):
        return None
    facts = _FACTS.get(pools)
    if facts is None or facts.sizes != (pools.size_a, pools.size_w):
        facts = _PoolFacts(pools)
        _FACTS[pools] = facts
    _LAST_FACTS = (weakref.ref(pools), facts)
    return facts


def tag_patterns(pools: Any, want: str) -> tuple[bytes, ...] | None:
    """The 5-byte records (type 3 + offset) of every pool string that reads as a section tag named `want`
    (`model.tag_info(...)[3] == want`, so any case), or None when that cannot be told by searching bytes:
    a name with a non-ASCII character, or with `k` (U+212A KELVIN SIGN is the one non-ASCII character that
    lower-cases to ASCII). For an ASCII name every such string is the name's ASCII bytes in some case,
    ended by a NUL unit (or the pool's end), in both pools (sTrA's encodings code ASCII as single bytes and
    never make it from other bytes at a character start; sTrW as one unit each); the search runs over the
    lower-cased bytes (a superset: each hit is checked by resolving its offset)."""
    facts = pool_facts(pools)
    if facts is None:
        return None
    hit = facts.patterns.get(want, False)
    if hit is not False:
        return hit  # type: ignore[return-value]
    target = f"[{want}]"
    if not target.isascii() or "k" in target or target.lower() != target:
        facts.patterns[want] = None
        return None
    a, w = _pool_bytes(pools)
    low_a, low_w = a.lower(), w.lower()  # for this search only
    offsets: list[int] = []
    pat_a = target.encode("ascii")
    needle = pat_a + b"\0"
    at = low_a.find(needle)
    while at >= 0:  # sTrA byte `at` is magic offset 2 * at
        offsets.append(at * 2)
        at = low_a.find(needle, at + 1)
    if low_a.endswith(pat_a):  # a last string without its NUL
        offsets.append((len(low_a) - len(pat_a)) * 2)
    pat_w = target.encode("utf-16-le")
    needle = pat_w + b"\0\0"
    at = low_w.find(needle)
    while at >= 0:  # sTrW byte `at` (a unit's start) is magic offset at + 1
        if at % 2 == 0:
            offsets.append(at + 1)
        at = low_w.find(needle, at + 1)
    if low_w.endswith(pat_w) and (len(low_w) - len(pat_w)) % 2 == 0:
        offsets.append(len(low_w) - len(pat_w) + 1)
    del low_a, low_w
    out = []
    for off in sorted(set(offsets)):
        tok = nc.record_token(nc.T_TAG, off - (1 << 32) if off >= 1 << 31 else off, pools)
        if tok.kind is Kind.SECTION and model.tag_info(str(tok.value))[3] == want:
            out.append(bytes([nc.T_TAG]) + _U32.pack(off))
    found = tuple(out)
    if len(facts.patterns) > 256:
        facts.patterns.clear()
    facts.patterns[want] = found
    return found


# ------------------------------------------------------------------------------------------- documents


def nkpi_document(data: bytes, pools: Any, *, record_width: int | None) -> model.Document | None:
    """The lazy document of an nkpi script payload, or None where it must be decoded whole (pools that
    cannot be listed, or a text that could exceed the decompile budget: the whole decode enforces it).
    `PVF_CORRUPT` for a payload that is not whole records."""
    nc.records(data)  # raises its PVF_CORRUPT
    facts = pool_facts(pools)
    if facts is None:
        return None
    n = len(data) // nc.RECORD
    if n * facts.max_chars > text_budget(len(data)):
        return None
    return NkpiDocument(data, pools, facts, n, record_width)


def archive_document(ar: Any, path: str, *, record_width: int | None) -> model.Document | None:
    """`nkpi_document` of an archive file when it is a script (DataType 1) the archive reads, else None
    (the caller decodes or refuses it as before)."""
    from deskbridge.kinds.pvf.archive.nkpi import DATA_SCRIPT

    try:
        if ar.data_type(path) != DATA_SCRIPT:
            return None
        return nkpi_document(ar.read(path), ar.pools, record_width=record_width)
    except BridgeError:
        return None


class NkpiDocument(model.LazyDocument):
    """`model.LazyDocument` over the records of a stored nkpi script (see the module docstring)."""

    def __init__(self, data: bytes, pools: Any, facts: _PoolFacts, n: int, record_width: int | None) -> None:
        self._init_lazy(None, record_width, n, data)  # `_source`: the whole decode, shared with `_decode`
        self._pools = pools
        self._cache = nc.cache_for(pools)
        self._tags_of = facts.tags
        self._whole: list[Token] | None = None

    def _all_tokens(self) -> list[Token]:
        whole = self._whole
        if whole is None:
            whole = self._whole = nc.to_tokens(self._data, self._pools)
        return whole

    def _decode(self, a: int, b: int) -> list[Token]:
        """Tokens of records `a:b`. A short run without string records (a section of numbers) decodes on
        its own; any other run is a slice of the whole file's tokens, decoded once (a string's token depends
        on the records before it, and a long run is a written file's print: one `to_tokens` costs less
        than working out the first offset of every string of the file)."""
        if b - a <= SMALL_RUN and self._whole is None:
            cache = self._cache
            get = cache.get
            out: list[Token] = []
            for t, v in _REC.iter_unpack(self._data[5 * a : 5 * b]):
                k = (t << 32) | (v & 0xFFFFFFFF)
                e = get(k)
                if e is None:
                    e = nc.record_entry(k, self._pools, cache)
                if e[1] is not None:
                    break
                out.append(e[0])
            else:
                return out
        return self._all_tokens()[a:b]

    def _has_tag(self, want: str) -> bool:
        patterns = tag_patterns(self._pools, want)
        if patterns is None:
            return True  # cannot tell without the tags
        return model.at_a_record(self._data, patterns, 0)

    def _shape(self) -> tuple[model.TagShape, list[int]]:
        shape = self._shape_of
        if shape is not None:
            return shape, self._positions  # type: ignore[return-value]
        recs = nc.records(self._data)
        where = np.flatnonzero(recs["t"] == nc.T_TAG)
        at = where.tolist()
        vals = recs["v"][where].tolist()
        tags = self._tags_of
        get = tags.get
        got = [get(v) for v in vals]
        if None in got:
            got = [g if g is not None else self._tag_entry(v) for g, v in zip(got, vals, strict=True)]
        strings = [g[0] for g in got]
        if None not in strings and len(set(strings)) == len(set(vals)):
            # each string at one offset: the raw rule changes nothing
            keep = [j for j, g in enumerate(got) if g[1] is not None]
        else:
            # The raw rule among tags alone: its key (tag?, string) never matches a record of another type.
            seen: dict[str, int] = {}
            keep = []
            for j, g in enumerate(got):
                s = g[0]
                if s is None or seen.setdefault(s, vals[j]) != vals[j]:
                    continue  # no string (a raw token), or a later use of it at another offset (raw)
                if g[1] is not None:
                    keep.append(j)
        if len(keep) == len(got):
            shape = model.TagShape(keep, [g[1] for g in got])
            positions = at
        else:
            shape = model.TagShape(keep, [got[j][1] for j in keep])
            positions = [at[j] for j in keep]
        self._shape_of, self._positions = shape, positions
        return shape, positions

    def _tag_entry(self, v: int) -> tuple[str | None, model.TagInfo | None]:
        """(the string, its `tag_info` where the record is a section tag) of a type-3 record of value
        `v`; (None, None) for an offset outside the pools (not kept: strings may be added)."""
        e = nc.record_entry(_TAG_KEY | (v & 0xFFFFFFFF), self._pools, self._cache)
        if e[1] is None:
            return (None, None)
        tok = e[0]
        got = (e[1][1], model.tag_info(str(tok.value)) if tok.kind is Kind.SECTION else None)
        tags = self._tags_of
        if len(tags) > TAG_CACHE_MAX:
            tags.clear()
        tags[v] = got
        return got


TAG_CACHE_MAX = 1 << 16
