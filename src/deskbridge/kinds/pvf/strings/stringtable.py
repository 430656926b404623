"""Classic `stringtable.bin`: read, look up by index or value, append, and regenerate (research/pvf.md §2A).

Layout: `u32 count; u32 offsets[count+1]; bytes`, offsets relative to byte 4, string i =
`data[off[i]+4 : off[i+1]+4]`, not NUL-terminated, in the pack encoding. Lookup by value is
first-occurrence (pvfUtility). Regeneration writes offsets starting at `4*count + 4` with the raw entries
back to back (pvf-parser-ts / pvfVSCode); an unchanged table serialises to its original bytes.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.base import corrupt
from deskbridge.kinds.pvf.strings.encodings import ambiguous_chars, cannot_encode

MAX_STRING_BYTES = 1 << 20
"""Longest single entry we accept when appending (1 MiB); real entries are short."""


class StringTable:
    """Indexed strings of a classic pack; `intern` appends unknown strings (the table grows, never reorders)."""

    def __init__(self, entries: list[bytes], encoding: str, original: bytes | None = None) -> None:
        self._raw = entries
        self.encoding = encoding
        self._original = original
        self._decoded: dict[int, str | None] = {}
        self._index: dict[str, int] | None = None
        self._list: list[str | None] | None = None
        self.appended = 0
        self._max_bytes: int | None = None
        self._by_bytes: dict[bytes, int] | None = None
        self._by_bytes_tried = False
        self._doubles: dict[str, tuple[bytes, ...]] = {}
        self._nul = False
        self.token_cache: dict[int, object] = {}
        """Record → decompiled token, kept by `classic_codec.to_tokens` (entries never change meaning: the
        table only grows, and a record naming an index past its end is not cached)."""

    @classmethod
    def parse(cls, data: bytes, encoding: str) -> StringTable:
        """Parse `stringtable.bin` bytes; PVF_CORRUPT (offset + expectation) on a bad count or offsets."""
        size = len(data)
        if size == 0:
            return cls([], encoding, b"")
        if size < 8:
            raise corrupt(0, "u32 count and at least one u32 offset", what="stringtable.bin")
        count = struct.unpack_from("<I", data, 0)[0]
        if 4 + 4 * (count + 1) > size:
            raise corrupt(
                0,
                f"{count} strings need {4 + 4 * (count + 1)} bytes of offsets, file has {size}",
                what="stringtable.bin",
            )
        offs = np.frombuffer(data, dtype="<u4", count=count + 1, offset=4).astype(np.int64) + 4
        if count and (np.any(offs[1:] < offs[:-1]) or offs[0] < 4 * count + 8 or offs[-1] > size):
            bad = int(np.argmax(offs[1:] < offs[:-1])) if np.any(offs[1:] < offs[:-1]) else count
            raise corrupt(8 + 4 * bad, "offsets ascending and inside the file", what="stringtable.bin")
        starts = offs.tolist()
        entries = [data[starts[i] : starts[i + 1]] for i in range(count)]
        return cls(entries, encoding, bytes(data))

    def __len__(self) -> int:
        return len(self._raw)

    def raw(self, index: int) -> bytes:
        return self._raw[index]

    def max_chars(self) -> int:
        """An upper bound on the characters of any one entry (its bytes: no pack encoding has a character
        shorter than a byte); the decompiler's text-budget bound."""
        if self._max_bytes is None:
            self._max_bytes = max(map(len, self._raw), default=0)
        return self._max_bytes

    def get(self, index: int) -> str | None:
        """Decoded string (trailing NULs trimmed), or None when out of range or not decodable."""
        lst = self._list
        if lst is not None and 0 <= index < len(lst):
            return lst[index]
        try:
            return self._decoded[index]
        except KeyError:
            pass
        if not 0 <= index < len(self._raw):
            return None
        try:
            text: str | None = self._raw[index].rstrip(b"\0").decode(self.encoding)
        except UnicodeDecodeError:
            text = None
        self._decoded[index] = text
        return text

    def _bulk_decode(self) -> list[str | None]:
        """Every entry decoded; one decode call over NUL-joined entries when they allow it (no multibyte
        pack encoding has a 0x00 trail byte), per entry otherwise."""
        raw = self._raw
        joined = b"\0".join(raw)
        if joined.count(b"\0") == max(0, len(raw) - 1):
            try:
                return list(joined.decode(self.encoding).split("\0")) if raw else []
            except UnicodeDecodeError:
                pass
        return [self.get(i) for i in range(len(raw))]

    def _build_index(self) -> dict[str, int]:
        if self._index is None:
            self._by_bytes = None  # the index answers from now on (`is_canonical`)
            decoded = self._bulk_decode()
            n = len(decoded)
            # reversed insertion keeps the first occurrence of equal strings (pvfUtility lookup rule)
            index: dict[str | None, int] = dict(zip(reversed(decoded), range(n - 1, -1, -1), strict=True))
            index.pop(None, None)
            self._index = index  # type: ignore[assignment]
            self._list = decoded
        return self._index

    def texts(self) -> Sequence[str | None]:
        """Every entry decoded (None where it is not decodable), in index order: the list the lookup index
        is built with (built once; it grows with the table). Read-only for callers."""
        self._build_index()
        assert self._list is not None
        return self._list

    def index_of(self, text: str) -> int | None:
        """First index whose string equals `text`."""
        return self._build_index().get(text)

    def is_canonical(self, index: int) -> bool:
        """True when `index` is what `index_of(get(index))` returns (so text → index round-trips). Until the
        index is built, from the entries' bytes where the encoding's bytes tell its texts apart
        (`_canonical_by_bytes`): a run that decodes a few thousand strings does not decode the whole table."""
        if self._index is None:
            got = self._canonical_by_bytes(index)
            if got is not None:
                return got
        s = self.get(index)
        return s is not None and self.index_of(s) == index

    def _canonical_by_bytes(self, index: int) -> bool | None:
        """`is_canonical` from the first index of each entry's bytes, or None where that cannot tell. Where
        the encoding decodes some characters from two byte forms (`encodings.ambiguous_chars`), an entry with
        such a character is looked up under each spelling of its text (each form of each such character that
        decodes to it): two different byte strings read the same only that way."""
        first = self._first_bytes()
        if first is None:
            return None
        raw = self._raw
        if not 0 <= index < len(raw):
            return False
        s = self.get(index)
        if s is None:
            return False
        key = raw[index].rstrip(b"\0") if self._nul else raw[index]
        doubles = self._doubles
        if doubles and not key.isascii():
            chars = [doubles.get(c) for c in s]
            if any(chars):
                spellings = [b""]
                try:
                    for c, forms in zip(s, chars, strict=True):
                        options = forms if forms is not None else (c.encode(self.encoding),)
                        spellings = [p + f for p in spellings for f in options]
                        if len(spellings) > 64:
                            return None
                except UnicodeEncodeError:
                    return None
                found = [first[v] for v in spellings if v in first and self.get(first[v]) == s]
                return bool(found) and min(found) == index
        return first.get(key) == index

    def _first_bytes(self) -> dict[bytes, int] | None:
        """Each entry's bytes (without trailing NULs) → the first index holding them; None where the encoding's
        bytes do not tell its texts apart (`encodings.ambiguous_chars`)."""
        first = self._by_bytes
        if first is None and not self._by_bytes_tried:
            self._by_bytes_tried = True
            doubles = ambiguous_chars(self.encoding)
            if doubles is None:
                return None
            self._doubles = doubles
            raw = self._raw
            self._nul = any(r.endswith(b"\0") for r in raw) if b"\0" in b"".join(raw) else False
            keys = [r.rstrip(b"\0") for r in raw] if self._nul else raw
            first = self._by_bytes = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
        return first

    def bracketed(self) -> list[int]:
        """The indexes of the entries whose text starts with `[` (section tags, in any case), in order; by
        their first byte where the encoding tells that by it (`encodings.ambiguous_chars`), so undecodable
        entries may be among them."""
        raw = self._raw
        if self._list is None and ambiguous_chars(self.encoding) is not None and raw:
            sizes = np.fromiter(map(len, raw), dtype=np.int64, count=len(raw))
            starts = np.cumsum(sizes) - sizes
            some = np.flatnonzero(sizes)
            firsts = np.frombuffer(b"".join(raw), dtype=np.uint8)[starts[some]]
            return some[firsts == ord("[")].tolist()  # type: ignore[no-any-return]
        return [i for i, s in enumerate(self.texts()) if s and s[0] == "["]

    def intern(self, text: str) -> int:
        """Index of `text`, appending it when new; ENCODING_MISMATCH when the pack encoding cannot hold it."""
        index = self._index if self._index is not None else self._build_index()  # the hot path of a compile
        found = index.get(text)
        if found is not None:
            return found
        return self.append(text)

    def append(self, text: str) -> int:
        """Append `text` as a new entry even if an equal one exists (lookups keep the first); its index."""
        try:
            raw = text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise cannot_encode(text, self.encoding, exc, where=f"string {text[:40]!r}") from None
        if len(raw) > MAX_STRING_BYTES:
            raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"string of {len(raw)} bytes is over the 1 MiB limit")
        lookup = self._build_index()  # before the new entry exists: built after, it would list it twice
        index = len(self._raw)
        self._raw.append(raw)
        if self._max_bytes is not None:
            self._max_bytes = max(self._max_bytes, len(raw))
        self._decoded[index] = text
        lookup.setdefault(text, index)
        if self._list is not None:
            self._list.append(text)
        self.appended += 1
        return index

    def entries(self) -> list[bytes]:
        return list(self._raw)

    def to_bytes(self) -> bytes:
        """Serialise; byte-identical to the parsed input when nothing was appended."""
        if self.appended == 0 and self._original is not None:
            return self._original
        return build_stringtable(self._raw)


def build_stringtable(entries: list[bytes]) -> bytes:
    """`count, offsets[count+1] (relative to byte 4, first = 4*count+4), entries back to back`."""
    count = len(entries)
    lengths = np.fromiter((len(e) for e in entries), dtype=np.int64, count=count)
    offs = np.empty(count + 1, dtype=np.int64)
    offs[0] = 4 * count + 4
    np.cumsum(lengths, out=offs[1:])
    offs[1:] += offs[0]
    if offs[-1] > 0xFFFFFFFF:
        raise BridgeError(ErrorCode.LIMIT_EXCEEDED, "stringtable.bin would exceed 4 GiB")
    return struct.pack("<I", count) + offs.astype("<u4").tobytes() + b"".join(entries)
