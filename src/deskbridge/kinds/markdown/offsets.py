"""The one place where text positions change units: code points (MCP, Python), UTF-16 (browser), UTF-8 bytes.

Why this module exists: Python `str` indexes by Unicode code point, CodeMirror and every browser API count
UTF-16 code units, and byte offsets are what files and some libraries use (research/markdown.md §2.2 item 6,
§4.5). A character outside the Basic Multilingual Plane ("😀", U+1F600) is 1 code point, 2 UTF-16 units and
4 UTF-8 bytes, so mixing the units silently shifts every later edit. All conversions go through `OffsetMap`.

Wire convention (docs/markdown.md "Offsets"): MCP tool offsets are code points of the current text; lines
and columns are 1-based, columns counted in code points; the browser collab wire is UTF-16.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import Final

from deskbridge.core.errors import BridgeError, ErrorCode

_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")
"""Characters that take two UTF-16 units (a surrogate pair)."""


def utf16_len(text: str) -> int:
    """Length of `text` in UTF-16 code units, as a browser's `String.length` reports it."""
    if text.isascii():
        return len(text)
    return len(text) + sum(1 for _ in _ASTRAL.finditer(text))


@dataclass
class OffsetMap:
    """Converts positions in one fixed text between code points, UTF-16 units, UTF-8 bytes and line/column.

    Built lazily: an ASCII-only text needs no tables at all, and the line table is made only when a
    line/column conversion is asked for. Build a new map after the text changes.
    """

    text: str
    _astral: list[int] | None = field(default=None, repr=False)
    _line_starts: list[int] | None = field(default=None, repr=False)

    @property
    def astral_positions(self) -> list[int]:
        """Code-point positions of the characters that are surrogate pairs in UTF-16, ascending."""
        if self._astral is None:
            self._astral = [] if self.text.isascii() else [m.start() for m in _ASTRAL.finditer(self.text)]
        return self._astral

    @property
    def length_cp(self) -> int:
        return len(self.text)

    @property
    def length_utf16(self) -> int:
        return len(self.text) + len(self.astral_positions)

    # --- code points <-> UTF-16 -------------------------------------------------------------------------

    def cp_to_utf16(self, cp: int) -> int:
        """UTF-16 offset of code-point offset `cp` (0 ≤ cp ≤ len(text))."""
        self._check_cp(cp)
        return cp + bisect.bisect_left(self.astral_positions, cp)

    def utf16_to_cp(self, u16: int) -> int:
        """Code-point offset of UTF-16 offset `u16`; refuses an offset that falls inside a surrogate pair."""
        if u16 < 0 or u16 > self.length_utf16:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"UTF-16 offset {u16} is outside the document (0..{self.length_utf16})",
                data={"offset": u16, "lengthUtf16": self.length_utf16},
            )
        astral = self.astral_positions
        # The k-th astral char (at code point a_k) starts at UTF-16 offset a_k + k; find how many astral
        # chars start strictly before u16 in UTF-16 terms.
        lo, hi = 0, len(astral)
        while lo < hi:
            mid = (lo + hi) // 2
            if astral[mid] + mid < u16:
                lo = mid + 1
            else:
                hi = mid
        k = lo
        if k > 0 and astral[k - 1] + (k - 1) + 1 == u16:
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
    def line_starts(self) -> list[int]:
        """Code-point offset where each line starts; line 1 starts at 0. Lines end at '\\n'."""
        if self._line_starts is None:
            starts = [0]
            find = self.text.find
            pos = find("\n")
            while pos != -1:
                starts.append(pos + 1)
                pos = find("\n", pos + 1)
            self._line_starts = starts
        return self._line_starts

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def line_of(self, cp: int) -> int:
        """1-based line number containing code-point offset `cp`."""
        self._check_cp(cp)
        return bisect.bisect_right(self.line_starts, cp)

    def cp_to_line_col(self, cp: int) -> tuple[int, int]:
        """(line, column), both 1-based, column in code points."""
        line = self.line_of(cp)
        return line, cp - self.line_starts[line - 1] + 1

    def line_col_to_cp(self, line: int, column: int = 1) -> int:
        """Code-point offset of 1-based (line, column); column may be one past the line's last character."""
        starts = self.line_starts
        if line < 1 or line > len(starts):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"line {line} is outside the document (1..{len(starts)})",
                data={"line": line, "lineCount": len(starts)},
            )
        start = starts[line - 1]
        end = starts[line] - 1 if line < len(starts) else len(self.text)
        if column < 1 or start + column - 1 > end:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"column {column} is outside line {line} (1..{end - start + 1})",
                data={"line": line, "column": column, "lineLength": end - start},
            )
        return start + column - 1

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """Code-point range [start, end) covering 1-based lines first..last, including the last line's '\\n'."""
        starts = self.line_starts
        first = max(1, first)
        last = min(len(starts), last)
        start = starts[first - 1]
        end = starts[last] if last < len(starts) else len(self.text)
        return start, end

    def _check_cp(self, cp: int) -> None:
        if cp < 0 or cp > len(self.text):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"offset {cp} is outside the document (0..{len(self.text)} code points)",
                data={"offset": cp, "length": len(self.text)},
            )
