"""Search across the Markdown files in scope, open documents searched in their live (unsaved) text.

Results are paginated with an opaque cursor bound to the query, so a page can be fetched again without
re-sending matches; every match gives path, 1-based line and column, code-point offset and a short preview.

A query is the caller's: a regex like `(a+)+$` backtracks for ever on a crafted line. Patterns run on the
`regex` engine with a time limit (`SEARCH_TIME_LIMIT_S` for the whole call) and `concurrent=True`, which
releases the interpreter while matching; the tool runs `search_files` in a worker thread and sets `cancel`
when the caller goes away. Files are read with `core.files.read_regular_file` (a FIFO named `x.md` is
skipped, never opened for blocking).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import regex

from deskbridge.core import files as core_files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paging import decode_cursor, encode_cursor
from deskbridge.kinds.markdown.document import DOCUMENT_MAX_BYTES, decode_file

PATTERN_MAX_CHARS: Final = 500
PREVIEW_CHARS: Final = 160
MATCHES_PER_PAGE_MAX: Final = 500
FILES_MAX: Final = 20_000
SEARCH_TIME_LIMIT_S: Final = 5.0
"""Seconds one md_search call may spend matching, over all files."""


@dataclass(frozen=True)
class Query:
    text: str
    regex: bool = False
    case_sensitive: bool = False
    whole_word: bool = False

    def compile(self) -> regex.Pattern[str]:
        if not self.text:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the search text is empty")
        if len(self.text) > PATTERN_MAX_CHARS:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"the search text is longer than {PATTERN_MAX_CHARS} characters"
            )
        body = self.text if self.regex else regex.escape(self.text)
        if self.whole_word:
            body = rf"\b(?:{body})\b"
        try:
            return regex.compile(body, regex.V0 | (0 if self.case_sensitive else regex.IGNORECASE))
        except (regex.error, ValueError, OverflowError) as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, f"the regular expression does not compile: {exc}"
            ) from None

    def key(self) -> str:
        raw = json.dumps([self.text, self.regex, self.case_sensitive, self.whole_word])
        return hashlib.sha256(raw.encode()).hexdigest()[:12]


def _encode_cursor(query: Query, file_index: int, offset: int) -> str:
    return encode_cursor({"q": query.key(), "f": file_index, "o": offset})


def _decode_cursor(query: Query, cursor: str | None) -> tuple[int, int]:
    if not cursor:
        return 0, 0
    data = decode_cursor(cursor, tool="md_search", expect={"q": query.key()}, ints=("f", "o"))
    return data["f"], data["o"]


def _preview(text: str, start: int, end: int) -> str:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end
    line = text[line_start:line_end]
    if len(line) <= PREVIEW_CHARS:
        return line
    rel = start - line_start
    lo = max(0, rel - PREVIEW_CHARS // 3)
    return ("…" if lo else "") + line[lo : lo + PREVIEW_CHARS] + "…"


def search_files(
    files: list[Path],
    query: Query,
    *,
    live_text: Callable[[Path], tuple[str, str] | None],
    relative: Callable[[Path], str],
    cursor: str | None = None,
    limit: int = 50,
    time_limit_s: float = SEARCH_TIME_LIMIT_S,
    cancel: threading.Event | None = None,
) -> dict[str, Any]:
    """One page of matches over `files`; `live_text(path)` gives (docId, text) for open documents.

    LIMIT_EXCEEDED when matching takes longer than `time_limit_s` in all; stops once `cancel`
    is set (the caller went away). Safe to run in a worker thread (`live_text` must then not touch loop-owned state)."""
    pattern = query.compile()
    deadline = time.monotonic() + time_limit_s
    cancel = cancel or threading.Event()

    def left() -> float:
        if cancel.is_set():
            raise BridgeError(ErrorCode.LIMIT_EXCEEDED, "the search was cancelled (the caller went away)")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _too_slow(time_limit_s)
        return remaining

    limit = max(1, min(limit, MATCHES_PER_PAGE_MAX))
    file_index, offset = _decode_cursor(query, cursor)
    files = files[:FILES_MAX]
    matches: list[dict[str, Any]] = []
    skipped: list[str] = []
    while file_index < len(files):
        path = files[file_index]
        live = live_text(path)
        doc_id = None
        if live is not None:
            doc_id, text = live
        else:
            try:
                data = core_files.read_regular_file(
                    path, max_bytes=DOCUMENT_MAX_BYTES, shown_as=relative(path)
                )
                text = decode_file(data).text
            except (OSError, BridgeError):
                skipped.append(relative(path))
                file_index, offset = file_index + 1, 0
                continue
        line = text.count("\n", 0, offset) + 1
        counted_to = offset
        try:
            found = list(_matches(pattern, text, offset, limit + 1 - len(matches), left))
        except TimeoutError:
            raise _too_slow(time_limit_s) from None
        for m in found:
            if m.end() == m.start():
                continue  # empty regex matches carry no information
            line += text.count("\n", counted_to, m.start())
            counted_to = m.start()
            col = m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
            if len(matches) >= limit:
                return {
                    "matches": matches,
                    "nextCursor": _encode_cursor(query, file_index, m.start()),
                    "truncated": True,
                    "skippedFiles": skipped,
                }
            matches.append(
                {
                    "path": relative(path),
                    "docId": doc_id,
                    "line": line,
                    "column": col,
                    "startOffset": m.start(),
                    "length": m.end() - m.start(),
                    "preview": _preview(text, m.start(), m.end()),
                }
            )
        file_index, offset = file_index + 1, 0
    return {"matches": matches, "nextCursor": None, "truncated": False, "skippedFiles": skipped}


def _matches(pattern: Any, text: str, offset: int, wanted: int, left: Callable[[], float]) -> Any:
    """Non-empty matches from `offset`, at most `wanted`, each search bounded by the time left."""
    pos = 0
    for m in pattern.finditer(text, offset, timeout=left(), concurrent=True):
        if m.end() == m.start():
            continue
        yield m
        pos += 1
        if pos >= wanted:
            return
        left()


def _too_slow(limit_s: float) -> BridgeError:
    return BridgeError(
        ErrorCode.LIMIT_EXCEEDED,
        f"the search took longer than {limit_s:g} s and was stopped",
        hint="Use a simpler pattern (nested repetition like (a+)+ backtracks without end), or search as text.",
        data={"timeLimitS": limit_s},
    )
