"""Classic PVF script codec: binary token stream ↔ the shared text dialect, lossless both ways.

Binary (research/pvf.md §2A): `B0 D0` then 5-byte records `u8 type + i32 value`. Types: 2 int,
3 IntEx, 4 float32, 5 section, 6 command, 7 string, 8 command separator (5-8 and 10 hold a stringtable.bin
index), 9 string-link id (followed by 10 = key index).

Text mapping (docs/pvf-script-text.md): 2 `123`; 3 `{3=123}`; 4 `1.5`; 5 `[tag]`; 7 `` `s` ``;
6/8 `` {6=`s`} ``; 9+10 `` <id::key`text`> `` (text from n_string.lst → .str, display only). Whatever would
not read back to the same bytes is printed in the raw typed form `{N=value}`: a string index that is out of
range, not decodable, or a later duplicate of an earlier equal string; a non-finite float; a 9 without a
10; any other type code. Compiling never turns a link into a plain string (the pvfUtility trap).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Protocol

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.base import corrupt
from deskbridge.kinds.pvf.archive.budget import check_text, text_budget
from deskbridge.kinds.pvf.script import text as dialect
from deskbridge.kinds.pvf.script.text import Kind, Token

MAGIC = b"\xb0\xd0"
HEADER_LINE = "#PVF_File"
T_INT, T_INTEX, T_FLOAT, T_SECTION, T_COMMAND, T_STRING, T_SEPARATOR, T_LINK_ID, T_LINK_KEY = range(2, 11)
STRING_TYPES = frozenset({T_SECTION, T_COMMAND, T_STRING, T_SEPARATOR, T_LINK_KEY})
TOKEN_DTYPE = np.dtype([("t", "u1"), ("v", "<u4")])
MAX_SCRIPT_BYTES = 64 << 20
"""Scripts larger than this are refused (64 MiB; real ones are far smaller)."""


class StringSource(Protocol):
    """What the codec needs from stringtable.bin (`strings.stringtable.StringTable` implements it)."""

    def get(self, index: int) -> str | None: ...
    def is_canonical(self, index: int) -> bool: ...
    def intern(self, text: str) -> int: ...


LinkText = Callable[[int, str], str | None]
"""`link_text(table_id, key)` → the text a string link shows (None when it cannot be resolved)."""


def is_script(data: bytes) -> bool:
    return data[:2] == MAGIC


def read_tokens(data: bytes) -> np.ndarray:
    """Structured array (t: u1, v: u4) of the records; PVF_CORRUPT on a missing header or a cut record."""
    if data[:2] != MAGIC:
        raise corrupt(0, "script header B0 D0", what="script")
    body = len(data) - 2
    if body % 5:
        raise corrupt(2 + body - body % 5, f"a whole 5-byte token ({body % 5} trailing bytes)", what="script")
    return np.frombuffer(data, dtype=TOKEN_DTYPE, offset=2)


def _signed(v: int) -> int:
    return v - (1 << 32) if v & 0x80000000 else v


def _string_token(code: int, index: int, strings: StringSource) -> Token:
    if strings.is_canonical(index):
        s = strings.get(index)
        assert s is not None
        if code == T_STRING:
            return dialect.string_token(s)
        if code == T_SECTION and dialect.is_section_text(s):
            return dialect.section_token(s)
        return dialect.typed_token(code, s)
    return dialect.typed_token(code, _signed(index))


def record_token(t: int, v: int, strings: StringSource) -> Token:
    """The token of one record that is not a string link's id (type 9): what `to_tokens` prints for it."""
    if t == T_INT:
        return Token(Kind.INT, _signed(v))
    if t in STRING_TYPES:
        return _string_token(t, v, strings)
    if t == T_FLOAT:
        return (
            dialect.float_token(v)
            if dialect.format_float32(v) is not None
            else dialect.typed_token(t, _signed(v))
        )
    return dialect.typed_token(t, _signed(v))


def link_tokens(
    link_id: int, key_index: int, strings: StringSource, link_text: LinkText | None
) -> list[Token]:
    """The token(s) of a type-9 record followed by a type-10 record: one string link, or (when the key is not
    a printable table string) the raw id and the key's own token."""
    key = strings.get(key_index) if strings.is_canonical(key_index) else None
    if key is not None and dialect.is_link_key(key):
        text = link_text(link_id, key) if link_text is not None else None
        return [dialect.link_token(link_id, key, text or "")]
    return [dialect.typed_token(T_LINK_ID, link_id), _string_token(T_LINK_KEY, key_index, strings)]


TOKEN_CACHE_MAX = 1 << 17
"""Record → token entries one string table keeps (tokens are immutable; ≈ 250 bytes each with the key and
the string: 32 MiB at most, which the script worker counts against its memory limit)."""


def _token_cache(strings: StringSource) -> dict[int, Token]:
    cache = getattr(strings, "token_cache", None)
    if cache is None:
        return {}
    if len(cache) > TOKEN_CACHE_MAX:
        cache.clear()
    return cache


def to_tokens(data: bytes, strings: StringSource, link_text: LinkText | None = None) -> list[Token]:
    """Binary script → dialect tokens (see the module docstring for the mapping).

    Game data repeats a small set of records (the same strings, tags and numbers in thousands of files), so
    the token of each record is looked up in a per-table cache instead of being decided again; only string
    links (which read n_string.lst and `.str` files) are resolved per use. The text budget is checked
    against a bound (the table's longest string times the string records); a file that could exceed it
    takes the record-at-a-time path, which counts exactly as the budget specifies."""
    if len(data) > MAX_SCRIPT_BYTES:
        raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"script of {len(data)} bytes is over the 64 MiB limit")
    recs = read_tokens(data)
    n = len(recs)
    max_chars = getattr(strings, "max_chars", None)
    if max_chars is None or n * max_chars() > text_budget(len(data)) - (1 << 16):
        return _to_tokens_reference(data, recs, strings, link_text)
    out, chars = records_tokens(recs, strings, link_text)
    if chars > (1 << 16):  # long link texts: the bound above did not cover them
        return _to_tokens_reference(data, recs, strings, link_text)
    return out


def records_tokens(
    recs: np.ndarray, strings: StringSource, link_text: LinkText | None
) -> tuple[list[Token], int]:
    """The tokens of a run of records (cached per table) and the characters of their string links' keys
    and texts. No budget check: `to_tokens` bounds the whole file first. A run that starts after a tag
    decodes to the same tokens as in the whole file (only a type-9 record looks at its neighbour, and a
    tag is never one of the pair), which is what lazy documents of the script worker rely on."""
    types = recs["t"]
    n = len(recs)
    keys = ((types.astype(np.int64) << 32) | recs["v"].astype(np.int64)).tolist()
    cache = _token_cache(strings)
    size = len(strings) if hasattr(strings, "__len__") else 0  # type: ignore[arg-type]
    out: list[Token] = []
    start = 0
    chars = 0
    nines = np.flatnonzero(types == T_LINK_ID).tolist()
    nines.append(n)
    get = cache.get
    for p in nines:
        if p < start:
            continue
        out.extend([get(k) or _miss(k, cache, strings, size) for k in keys[start:p]])
        if p >= n:
            break
        v = keys[p] & 0xFFFFFFFF
        if p + 1 < n and types[p + 1] == T_LINK_KEY and v <= dialect.INT32_MAX:
            toks = link_tokens(v, keys[p + 1] & 0xFFFFFFFF, strings, link_text)
            if len(toks) == 1:
                chars += len(str(toks[0].value)) + len(toks[0].link_text)
            out.extend(toks)
            start = p + 2
        else:
            out.append(dialect.typed_token(T_LINK_ID, _signed(v)))
            start = p + 1
    return out, chars


def _miss(k: int, cache: dict[int, Token], strings: StringSource, size: int) -> Token:
    """The token of record key `k` (type << 32 | value), kept in `cache` unless the value is a string index
    past the table's `size` (it may name a string appended later)."""
    t, v = k >> 32, k & 0xFFFFFFFF
    tok = record_token(t, v, strings)
    if t not in STRING_TYPES or v < size:
        cache[k] = tok
    return tok


_RECORD = struct.Struct("<BI")
_LINK_ID_BYTE = bytes([T_LINK_ID])


def run_tokens(data: bytes, a: int, b: int, strings: StringSource, link_text: LinkText | None) -> list[Token]:
    """`records_tokens(read_tokens(data)[a:b], …)[0]` of a short run of a script's records, read with
    `struct`: for the one or two values of a section, numpy's per-call cost is most of the work."""
    run = data[2 + 5 * a : 2 + 5 * b]
    if _LINK_ID_BYTE in run[::5]:  # the type bytes: a string link reads its neighbour
        return records_tokens(read_tokens(data)[a:b], strings, link_text)[0]
    cache = _token_cache(strings)
    size = len(strings) if hasattr(strings, "__len__") else 0  # type: ignore[arg-type]
    get = cache.get
    return [get(t << 32 | v) or _miss(t << 32 | v, cache, strings, size) for t, v in _RECORD.iter_unpack(run)]


def _to_tokens_reference(
    data: bytes, recs: np.ndarray, strings: StringSource, link_text: LinkText | None
) -> list[Token]:
    """One record at a time: the mapping as specified, used where `to_tokens`' cached path cannot decide
    the text budget alone (and by the tests as the reference the cached path must equal)."""
    types = recs["t"].tolist()
    values = recs["v"].tolist()
    out: list[Token] = []
    append = out.append
    n = len(types)
    i = 0
    # String tokens repeat table strings by index: count their characters so that a small script cannot
    # print gigabytes (docs/pvf-format.md "Budgets").
    chars, budget = 0, text_budget(len(data))
    while i < n:
        t, v = types[i], values[i]
        if t == T_INT:
            append(Token(Kind.INT, _signed(v)))
        elif t in (T_STRING, T_SECTION, T_COMMAND, T_SEPARATOR):
            tok = _string_token(t, v, strings)
            if isinstance(tok.value, str):
                chars += len(tok.value)
                if chars > budget:
                    check_text(chars, len(data))
            append(tok)
        elif t == T_FLOAT:
            append(
                dialect.float_token(v)
                if dialect.format_float32(v) is not None
                else dialect.typed_token(T_FLOAT, _signed(v))
            )
        elif t == T_LINK_ID and i + 1 < n and types[i + 1] == T_LINK_KEY and v <= dialect.INT32_MAX:
            key_index = values[i + 1]
            key = strings.get(key_index) if strings.is_canonical(key_index) else None
            if key is not None and dialect.is_link_key(key):
                text = link_text(v, key) if link_text is not None else None
                chars += len(key) + len(text or "")
                if chars > budget:
                    check_text(chars, len(data))
                append(dialect.link_token(v, key, text or ""))
            else:
                append(dialect.typed_token(T_LINK_ID, v))
                append(_string_token(T_LINK_KEY, key_index, strings))
            i += 1
        elif t == T_LINK_KEY:
            append(_string_token(t, v, strings))
        else:
            append(dialect.typed_token(t, _signed(v)))
        i += 1
    return out


def decompile(
    data: bytes, strings: StringSource, link_text: LinkText | None = None, *, record_width: int | None = None
) -> str:
    """Binary script → editable text starting with `#PVF_File` (`record_width=2` for `.lst` registries)."""
    return dialect.print_tokens(
        to_tokens(data, strings, link_text), header=HEADER_LINE, record_width=record_width
    )


def from_tokens(tokens: list[Token], strings: StringSource, source_text: str = "") -> bytes:
    """Dialect tokens → binary script; unknown strings are appended to the string table.

    A string the pack's code page cannot hold is `ENCODING_MISMATCH` at its line and column in
    `source_text` (the table only knows the string)."""
    try:
        return _from_tokens(tokens, strings, source_text)
    except BridgeError as exc:
        tok = exc.data.pop("_token", None)
        if exc.code != ErrorCode.ENCODING_MISMATCH or tok is None or not source_text:
            raise
        ch = exc.data.get("character", "")
        pos = source_text.find(ch, max(tok.pos, 0)) if ch else -1
        if pos < 0:
            raise
        from deskbridge.kinds.pvf.strings.encodings import cannot_encode

        where = UnicodeEncodeError(exc.data.get("encoding", ""), source_text, pos, pos + 1, "")
        raise cannot_encode(source_text, exc.data.get("encoding", ""), where, where="script") from None


def _from_tokens(tokens: list[Token], strings: StringSource, source_text: str) -> bytes:
    # Python lists, then one bulk store per column: setting numpy record fields one token at a time was
    # most of the cost of a compile after the lexer.
    types: list[int] = []
    values: list[int] = []
    put_t, put_v = types.append, values.append
    intern = strings.intern
    k_int, k_float, k_section, k_string = Kind.INT, Kind.FLOAT, Kind.SECTION, Kind.STRING
    tok = None
    try:
        for tok in tokens:
            kind = tok.kind
            value = tok.value
            if kind is k_int:
                put_t(T_INT)
                put_v(int(value) & 0xFFFFFFFF)
            elif kind is k_float:
                put_t(T_FLOAT)
                put_v(int(value))
            elif kind is k_section:
                put_t(T_SECTION)
                put_v(intern(str(value)))
            elif kind is k_string:
                put_t(T_STRING)
                put_v(intern(str(value)))
            elif kind is Kind.TYPED:
                put_t(tok.code)
                put_v(intern(value) if isinstance(value, str) else value & 0xFFFFFFFF)
            elif kind is Kind.LINK:
                put_t(T_LINK_ID)
                put_v(tok.link_id)
                put_t(T_LINK_KEY)
                put_v(intern(str(value)))
            else:
                raise dialect.syntax_error(
                    source_text,
                    max(tok.pos, 0),
                    f"bare word {str(value)[:40]!r}: classic scripts quote strings with backticks (`{value}`)",
                )
    except BridgeError as exc:
        exc.data["_token"] = tok  # where it happened, for from_tokens
        raise
    recs = np.empty(len(types), dtype=TOKEN_DTYPE)
    recs["t"] = types
    recs["v"] = values
    return MAGIC + recs.tobytes()


def compile_text(text: str, strings: StringSource) -> bytes:
    """Editable text → binary script (byte-identical to the original for text `decompile` produced)."""
    return from_tokens(dialect.lex(text), strings, text)
