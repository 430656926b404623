"""The one place where text positions change units: code points (MCP, Python), UTF-16 (browser), UTF-8 bytes.

Why this module exists: Python `str` indexes by Unicode code point, CodeMirror and every browser API count
UTF-16 code units, and byte offsets are what files and some libraries use (research/markdown.md §2.2 item 6,
§4.5). A character outside the Basic Multilingual Plane ("😀", U+1F600) is 1 code point, 2 UTF-16 units and
4 UTF-8 bytes, so mixing the units silently shifts every later edit. All conversions go through `OffsetMap`.

Wire convention (docs/markdown.md "Offsets"): MCP tool offsets are code points of the current text; lines
and columns are 1-based, columns counted in code points; the browser collab wire is UTF-16.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode

_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")
"""Characters that take two UTF-16 units (a surrogate pair)."""

_SMALL: Final = 4096
"""Below this many characters a regex scan beats numpy's setup cost."""


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units, as a browser's `String.length` reports it."""
    if text.isascii():
        return len(text)
    return len(text) + len(_astral_of(text))


def _astral_of(text: str) -> np.ndarray:
    if text.isascii():
        return _EMPTY
    if len(text) < _SMALL:
        return np.fromiter((m.start() for m in _ASTRAL.finditer(text)), dtype=np.int64)
    units = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return np.flatnonzero(units > 0xFFFF).astype(np.int64)


def _newlines_of(text: str) -> np.ndarray:
    if len(text) < _SMALL:
        out, pos = [], text.find("\n")
        while pos != -1:
            out.append(pos)
            pos = text.find("\n", pos + 1)
        return np.array(out, dtype=np.int64)
    if text.isascii():
        return np.flatnonzero(np.frombuffer(text.encode("ascii"), dtype=np.uint8) == 10).astype(np.int64)
    units = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    return np.flatnonzero(units == 10).astype(np.int64)


_EMPTY: Final = np.zeros(0, dtype=np.int64)


def _shift_positions(old: np.ndarray, edits: Sequence[Any], finder: Any) -> np.ndarray:
    """Positions of some character in the text after `edits`, from its positions before them: kept
    positions shift by the running length change, positions inside replaced spans go, and the inserted
    texts' own positions come in (each edit: start, end, insert in code points of the old text)."""
    pieces: list[np.ndarray] = []
    prev = 0
    delta = 0
    for e in edits:
        i0 = int(np.searchsorted(old, e.start, "left"))
        i1 = int(np.searchsorted(old, e.end, "left"))
        pieces.append(old[prev:i0] + delta)
        inserted = finder(e.insert)
        if len(inserted):
            pieces.append(inserted + (e.start + delta))
        delta += len(e.insert) - (e.end - e.start)
        prev = i1
    pieces.append(old[prev:] + delta)
    return np.concatenate(pieces) if len(pieces) > 1 else pieces[0]


class OffsetMap:
    """Converts positions in one fixed text between code points, UTF-16 units, UTF-8 bytes and line/column.

    Built lazily (an ASCII-only text needs no astral table) and, after an edit, derived from the previous
    map (`after_edits`) instead of rescanning the whole text: the 10 MB stress document has ~180,000
    astral characters, and a rescan per keystroke would cost ~100 ms. A derived map may even hold its text
    lazily (a callable), so an edit needs no copy of a 40 MB string until someone reads the text.
    """

    __slots__ = (
        "_ascii",
        "_astral",
        "_astral_u16",
        "_length",
        "_line_starts",
        "_newlines",
        "_source",
        "_text",
    )

    def __init__(
        self,
        text: str | None = None,
        *,
        source: Callable[[], str] | None = None,
        length: int | None = None,
        ascii_only: bool | None = None,
    ) -> None:
        if text is None and (source is None or length is None):
            raise ValueError("OffsetMap needs the text, or a source callable and the length")
        self._text = text
        self._source = source
        self._length = len(text) if text is not None else int(length)  # type: ignore[arg-type]
        self._ascii = ascii_only
        self._astral: np.ndarray | None = None
        self._astral_u16: np.ndarray | None = None
        self._newlines: np.ndarray | None = None
        self._line_starts: list[int] | None = None

    @property
    def text(self) -> str:
        if self._text is None:
            assert self._source is not None
            self._text = self._source()
            self._source = None
        return self._text

    def __len__(self) -> int:
        return self._length

    def after_edits(self, edits: Sequence[Any], new_text: str | Callable[[], str]) -> OffsetMap:
        """The map of the text after `edits` (ascending code-point edits of this text); `new_text` may be a
        callable that builds it on first use."""
        delta = sum(len(e.insert) - (e.end - e.start) for e in edits)
        ascii_only = None
        if self._ascii is not None or self._text is not None:
            was_ascii = self._ascii if self._ascii is not None else self.text.isascii()
            ascii_only = was_ascii and all(e.insert.isascii() for e in edits)
        if isinstance(new_text, str):
            out = OffsetMap(new_text, ascii_only=ascii_only)
        else:
            out = OffsetMap(source=new_text, length=self._length + delta, ascii_only=ascii_only)
        if self._astral is not None:
            out._astral = _EMPTY if ascii_only else _shift_positions(self._astral, edits, _astral_of)
        if self._newlines is not None:
            out._newlines = _shift_positions(self._newlines, edits, _newlines_of)
        return out

    def ensure_tables(self) -> None:
        """Compute the astral table now (once per document), so maps derived by `after_edits` carry it."""
        _ = self.astral_positions

    @property
    def astral_positions(self) -> np.ndarray:
        """Code-point positions of the characters that are surrogate pairs in UTF-16, ascending."""
        if self._astral is None:
            self._astral = _EMPTY if self._ascii else _astral_of(self.text)
        return self._astral

    @property
    def length_cp(self) -> int:
        return self._length

    @property
    def length_utf16(self) -> int:
        return self._length + len(self.astral_positions)

    # --- code points <-> UTF-16 -------------------------------------------------------------------------

    def cp_to_utf16(self, cp: int) -> int:
        """UTF-16 offset of code-point offset `cp` (0 ≤ cp ≤ len(text))."""
        self._check_cp(cp)
        return cp + int(np.searchsorted(self.astral_positions, cp, "left"))

    def utf16_to_cp(self, u16: int) -> int:
        """Code-point offset of UTF-16 offset `u16`; refuses an offset that falls inside a surrogate pair."""
        if u16 < 0 or u16 > self.length_utf16:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"UTF-16 offset {u16} is outside the document (0..{self.length_utf16})",
                data={"offset": u16, "lengthUtf16": self.length_utf16},
            )
        astral = self.astral_positions
        if not len(astral):
            return u16
        if self._astral_u16 is None or len(self._astral_u16) != len(astral):
            # the k-th astral character (code point a_k) starts at UTF-16 offset a_k + k
            self._astral_u16 = astral + np.arange(len(astral), dtype=np.int64)
        k = int(np.searchsorted(self._astral_u16, u16, "left"))  # astral chars starting before u16
        if k > 0 and int(self._astral_u16[k - 1]) + 1 == u16:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"UTF-16 offset {u16} falls inside a surrogate pair (between the halves of one character)",
                data={"offset": u16},
            )
        return u16 - k

    # --- code points <-> UTF-8 bytes --------------------------------------------------------------------

    def cp_to_utf8(self, cp: int) -> int:
        """UTF-8 byte offset of code-point offset `cp`."""
        self._check_cp(cp)
        prefix = self.text[:cp]
        return cp if prefix.isascii() else len(prefix.encode("utf-8", "surrogatepass"))

    def utf8_to_cp(self, byte_offset: int) -> int:
        """Code-point offset of a UTF-8 byte offset; refuses an offset inside a multi-byte character."""
        data = self.text.encode("utf-8", "surrogatepass")
        if byte_offset < 0 or byte_offset > len(data):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"byte offset {byte_offset} is outside the document (0..{len(data)})",
                data={"offset": byte_offset},
            )
        if byte_offset < len(data) and (data[byte_offset] & 0xC0) == 0x80:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"byte offset {byte_offset} falls inside a multi-byte UTF-8 character",
                data={"offset": byte_offset},
            )
        return len(data[:byte_offset].decode("utf-8", "surrogatepass"))

    # --- code points <-> line/column -------------------------------------------------------------------

    @property
    def newline_positions(self) -> np.ndarray:
        if self._newlines is None:
            self._newlines = _newlines_of(self.text)
        return self._newlines

    @property
    def line_starts(self) -> list[int]:
        """Code-point offset where each line starts; line 1 starts at 0. Lines end at '\\n'."""
        if self._line_starts is None:
            self._line_starts = [0, *(self.newline_positions + 1).tolist()]
        return self._line_starts

    @property
    def line_count(self) -> int:
        return len(self.newline_positions) + 1

    def line_of(self, cp: int) -> int:
        """1-based line number containing code-point offset `cp`."""
        self._check_cp(cp)
        return int(np.searchsorted(self.newline_positions, cp, "left")) + 1

    def line_start(self, line: int) -> int:
        """Code-point offset where 1-based `line` starts."""
        return 0 if line <= 1 else int(self.newline_positions[line - 2]) + 1

    def line_end(self, line: int) -> int:
        """Code-point offset of the '\\n' ending 1-based `line` (or the text's end for the last line)."""
        nl = self.newline_positions
        return int(nl[line - 1]) if line - 1 < len(nl) else self._length

    def cp_to_line_col(self, cp: int) -> tuple[int, int]:
        """(line, column), both 1-based, column in code points."""
        line = self.line_of(cp)
        return line, cp - self.line_start(line) + 1

    def line_col_to_cp(self, line: int, column: int = 1) -> int:
        """Code-point offset of 1-based (line, column); column may be one past the line's last character."""
        count = self.line_count
        if line < 1 or line > count:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"line {line} is outside the document (1..{count})",
                data={"line": line, "lineCount": count},
            )
        start, end = self.line_start(line), self.line_end(line)
        if column < 1 or start + column - 1 > end:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"column {column} is outside line {line} (1..{end - start + 1})",
                data={"line": line, "column": column, "lineLength": end - start},
            )
        return start + column - 1

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """Code-point range [start, end) covering 1-based lines first..last, including the last line's '\\n'."""
        first = max(1, first)
        last = min(self.line_count, last)
        end = self.line_end(last)
        return self.line_start(first), min(end + 1, self._length)

    def _check_cp(self, cp: int) -> None:
        if cp < 0 or cp > self._length:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"offset {cp} is outside the document (0..{self._length} code points)",
                data={"offset": cp, "length": self._length},
            )
