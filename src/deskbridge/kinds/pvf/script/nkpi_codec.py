"""nkpi script payloads (DataType 1) and UTF-16 text files (DataType 3) ↔ the shared text dialect, losslessly.

Binary (research/pvf.md §2B, PF `file.go`): no header, `len/5` records of `u8 type + i32 value`. Types:
0 int, 2 float32, 3 tag/label string, 5 and 7 block strings, 6 inline string, 8 string-table reference,
10 multi-line command text ref; string values are magic pool offsets (see `archive/nkpi_pools.py`).
Text mapping: 0 → `123`; 2 → `1.5` (inf/NaN → `{2=bits}`); 3 → `[tag]` or a bare word, else `` {3=`…`} ``;
6 → `` `…` ``; 5/7/8/10 → `` {N=`…`} ``; anything else → `{N=value}` (raw value, also used for a string
offset that is invalid or would not compile back to the same offset). Compiling looks strings up first in the
file's original tokens (so an unchanged file compiles back byte-identical even where the pools hold the same
string twice), then in the pools, appending new strings by the pool rule.
"""

from __future__ import annotations

import struct
import weakref
from typing import Any, Protocol

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.budget import check_text, text_budget
from deskbridge.kinds.pvf.script.text import (
    Kind,
    Token,
    float_token,
    format_float32,
    int_token,
    is_section_text,
    is_word,
    lex,
    print_tokens,
    section_token,
    string_token,
    syntax_error,
    typed_token,
    word_token,
)

T_INT, T_FLOAT, T_TAG, T_BLOCK5, T_STRING, T_BLOCK7, T_REF8, T_CMD10 = 0, 2, 3, 5, 6, 7, 8, 10
STRING_TYPES = frozenset({T_TAG, T_BLOCK5, T_STRING, T_BLOCK7, T_REF8, T_CMD10})
RECORD = 5
_REC_DTYPE = np.dtype([("t", "u1"), ("v", "<i4")])


class Pools(Protocol):
    """What the codec needs from an archive's string pools."""

    def resolve(self, off: int) -> str: ...
    def is_valid(self, off: int) -> bool: ...
    def add(self, s: str) -> int: ...


def records(payload: bytes) -> np.ndarray:
    """The (type, value) records of a script payload; `PVF_CORRUPT` when it is not a whole token stream."""
    if len(payload) % RECORD:
        raise BridgeError(
            ErrorCode.PVF_CORRUPT,
            f"nkpi script payload of {len(payload)} bytes is not a whole number of 5-byte tokens",
            data={"offset": len(payload) - len(payload) % RECORD, "expected": "5-byte token records"},
        )
    return np.frombuffer(payload, dtype=_REC_DTYPE)


def _string_ok(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates from undecodable pool bytes: keep the raw offset
        return False
    return True


def record_token(t: int, v: int, pools: Pools) -> Token:
    """The token of one record (`v` signed) where it is the first use of its string in the file; a later
    record naming the same string at another offset prints raw (`to_tokens`)."""
    if t == T_INT:
        return int_token(v)
    if t == T_FLOAT:
        bits = v & 0xFFFFFFFF
        return float_token(bits) if format_float32(bits) is not None else typed_token(t, v)
    if t not in STRING_TYPES or not pools.is_valid(v & 0xFFFFFFFF):
        return typed_token(t, v)
    s = pools.resolve(v & 0xFFFFFFFF)
    if not _string_ok(s):
        return typed_token(t, v)
    if t == T_TAG:
        return section_token(s) if is_section_text(s) else word_token(s) if is_word(s) else typed_token(t, s)
    if t == T_STRING:
        return string_token(s)
    return typed_token(t, s)


_CACHES: weakref.WeakKeyDictionary[Any, dict[int, tuple[Any, ...]]] = weakref.WeakKeyDictionary()
CACHE_MAX = 1 << 17


def _cache_for(pools: Pools) -> dict[int, tuple[Any, ...]]:
    try:
        cache = _CACHES.setdefault(pools, {})
    except TypeError:  # not weak-referenceable: no cache
        return {}
    if len(cache) > CACHE_MAX:
        # Numbers fill the cache (a million files hold millions of distinct ints); the string records, few
        # and each a pool lookup to redo, stay unless they alone fill half of it.
        kept = [(k, e) for k, e in cache.items() if e[1] is not None]
        cache.clear()
        if len(kept) <= CACHE_MAX // 2:
            cache.update(kept)
    return cache


def record_key(t: int, v: int) -> int:
    """The cache key of a record: its type above its value's 32 bits."""
    return (t << 32) | (v & 0xFFFFFFFF)


def record_entry(k: int, pools: Pools, cache: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """What `to_tokens` keeps of record key `k` (`record_key`), stored in `cache` where it cannot change:
    `(token, None)` for a record without a string, else `(token where first in the file, (tag?, string),
    characters, signed value, the raw token of a later use at another offset)`."""
    t, u = k >> 32, k & 0xFFFFFFFF
    v = u - (1 << 32) if u & 0x80000000 else u
    tok = record_token(t, v, pools)
    if t in STRING_TYPES and pools.is_valid(u):
        s = pools.resolve(u)
        e: tuple[Any, ...] = (tok, (t == T_TAG, s), len(s), v, typed_token(t, v))
        cache[k] = e
    elif t in STRING_TYPES:
        e = (tok, None)  # an offset past the pools may be valid once strings are added: not cached
    else:
        e = cache[k] = (tok, None)
    return e


def cache_for(pools: Pools) -> dict[int, tuple[Any, ...]]:
    """The record cache of `pools` (`record_entry`), shared by whole and lazy decodes."""
    return _cache_for(pools)


def to_tokens(payload: bytes, pools: Pools) -> list[Token]:
    """Text tokens for a script payload (see the module docstring for the mapping).

    Each record's token is decided once per pool set and cached (pool strings never change; an offset
    that is not valid yet is not cached); only the per-file rule — a string compiles to the first offset it
    had in this file — and the text budget are applied per file."""
    recs = records(payload)
    keys = ((recs["t"].astype(np.int64) << 32) | (recs["v"].astype(np.int64) & 0xFFFFFFFF)).tolist()
    cache = _cache_for(pools)
    get = cache.get
    out: list[Token] = []
    append = out.append
    seen: dict[tuple[bool, str], int] = {}  # a string compiles to the first offset it had in this file
    # One 5-byte token can print a whole pool string: count characters so that a small script cannot
    # print gigabytes (docs/pvf-format.md "Budgets").
    chars, budget = 0, text_budget(len(payload))
    for k in keys:
        e = get(k)
        if e is None:
            e = record_entry(k, pools, cache)
        sig = e[1]
        if sig is None:
            append(e[0])
            continue
        chars += e[2]
        if chars > budget:
            check_text(chars, len(payload))
        append(e[0] if seen.setdefault(sig, e[3]) == e[3] else e[4])
    return out


def decompile(payload: bytes, pools: Pools, *, lst: bool = False) -> str:
    """Editable text of a script payload; `.lst` registries print one `id TAB `path`` record per line."""
    return print_tokens(to_tokens(payload, pools), record_width=2 if lst else None)


def _hints(original: bytes | None, pools: Pools) -> dict[tuple[bool, str], int]:
    """String → offset as the original payload used them (first use wins), for byte-identical recompiles."""
    hints: dict[tuple[bool, str], int] = {}
    if not original or len(original) % RECORD:
        return hints
    recs = records(original)
    keys = ((recs["t"].astype(np.int64) << 32) | (recs["v"].astype(np.int64) & 0xFFFFFFFF)).tolist()
    cache = _cache_for(pools)
    get = cache.get
    setdefault = hints.setdefault
    for k in keys:  # the (tag?, string) and signed value `to_tokens` keeps of each record (`record_entry`)
        e = get(k)
        if e is None:
            if k >> 32 not in STRING_TYPES:
                continue
            e = record_entry(k, pools, cache)
        sig = e[1]
        if sig is not None:
            setdefault(sig, e[3])
    return hints


def _records_of(
    tokens: list[Token], text: str, pools: Pools, hints: dict[tuple[bool, str], int]
) -> tuple[list[int], list[int]]:
    """The (types, signed values) of the records `tokens` compile to."""

    def offset(s: str, tag: bool, tok: Token) -> int:
        hit = hints.get((tag, s))
        if hit is None:
            try:
                hit = pools.add(s)
            except ValueError as exc:
                raise syntax_error(text, tok.pos, str(exc)) from None
            hints[(tag, s)] = hit
        return hit - (1 << 32) if hit >= 1 << 31 else hit

    types: list[int] = []
    values: list[int] = []
    put_t, put_v = types.append, values.append
    # The kinds as locals: an enum member read through its class costs a lookup on every token.
    k_int, k_float, k_section, k_word, k_string, k_typed = (
        Kind.INT,
        Kind.FLOAT,
        Kind.SECTION,
        Kind.WORD,
        Kind.STRING,
        Kind.TYPED,
    )
    get = hints.get
    for tok in tokens:
        kind = tok.kind
        if kind is k_int:
            put_t(T_INT)
            put_v(int(tok.value))
        elif kind is k_float:
            bits = int(tok.value)
            put_t(T_FLOAT)
            put_v(bits - (1 << 32) if bits >= 1 << 31 else bits)
        elif kind is k_section or kind is k_word or kind is k_string:
            tag = kind is not k_string
            s = str(tok.value)
            hit = get((tag, s))
            if hit is None:
                hit = offset(s, tag, tok)  # signed already
            elif hit >= 1 << 31:
                hit -= 1 << 32
            put_t(T_TAG if tag else T_STRING)
            put_v(hit)
        elif kind is k_typed:
            put_t(tok.code)
            value = tok.value
            put_v(offset(value, tok.code == T_TAG, tok) if isinstance(value, str) else int(value))
        else:
            raise syntax_error(
                text,
                tok.pos,
                "string links <id::key`…`> do not exist in nkpi scripts; "
                "write {8=`<table::key>`} for a string-table reference",
            )
    return types, values


def compile_text(text: str, pools: Pools, *, original: bytes | None = None) -> bytes:
    """Script payload for `text`; strings missing from the pools are appended to them."""
    tokens = lex(text)
    hints = _hints(original, pools)
    types, values = _records_of(tokens, text, pools, hints)
    arr = np.empty(len(types), dtype=_REC_DTYPE)
    if types:
        arr["t"] = types
        arr["v"] = values
    return arr.tobytes()


# --- DataType 3: UTF-16LE text (.str) ------------------------------------------------------------------

_BOX_LOW, _BOX_HIGH = 0x2500, 0x25FF


def _looks_like_korean_mojibake(text: str) -> bool:
    """EUC-KR bytes painted through CP437 show as dense box-drawing/Latin-1 symbols (PF `fixKoreanMojibake`)."""
    letters = [c for c in text if not c.isascii()]
    if len(letters) < 4:
        return False
    box = sum(1 for c in letters if _BOX_LOW <= ord(c) <= _BOX_HIGH)
    return box * 4 >= len(letters)


def fix_korean_mojibake(text: str) -> str | None:
    """Readable Korean for CP437-painted EUC-KR text, or None when it is not that (exact round trip only)."""
    if not _looks_like_korean_mojibake(text):
        return None
    try:
        fixed = text.encode("cp437").decode("cp949")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None
    return fixed if paint_korean_mojibake(fixed) == text else None


def paint_korean_mojibake(text: str) -> str | None:
    """The CP437-painted form of Korean text (what a KR-server pack stores), or None if not representable."""
    try:
        return text.encode("cp949").decode("cp437")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return None


def decode_utf16_text(payload: bytes) -> tuple[str, bool]:
    """(text, was_mojibake) of a DataType 3 payload; NUL padding stays in the text as `\\0` characters."""
    if len(payload) % 2:
        raise BridgeError(
            ErrorCode.PVF_CORRUPT,
            f"UTF-16 text payload has an odd length {len(payload)}",
            data={"offset": len(payload) - 1, "expected": "whole UTF-16 code units"},
        )
    text = payload.decode("utf-16-le", errors="surrogatepass")
    fixed = fix_korean_mojibake(text)
    return (fixed, True) if fixed is not None else (text, False)


def encode_utf16_text(text: str, *, mojibake: bool = False) -> bytes:
    """The DataType 3 payload for `text`; `mojibake` re-paints Korean the way the original file stored it."""
    if mojibake:
        painted = paint_korean_mojibake(text)
        if painted is not None:
            text = painted
    return text.encode("utf-16-le", errors="surrogatepass")


def pack_records(recs: list[tuple[int, int]]) -> bytes:
    """Raw records → payload (used by the synthesiser and tests)."""
    return b"".join(struct.pack("<Bi", t, v) for t, v in recs)
