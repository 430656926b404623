"""Search across the Markdown files in scope, open documents searched in their live (unsaved) text.

Results are paginated with an opaque cursor bound to the query, so a page can be fetched again without
re-sending matches; every match gives path, 1-based line and column, code-point offset and a short preview.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.document import DOCUMENT_MAX_BYTES, decode_file

PATTERN_MAX_CHARS: Final = 500
PREVIEW_CHARS: Final = 160
MATCHES_PER_PAGE_MAX: Final = 500
FILES_MAX: Final = 20_000


@dataclass(frozen=True)
class Query:
    text: str
    regex: bool = False
    case_sensitive: bool = False
    whole_word: bool = False

    def compile(self) -> re.Pattern[str]:
        if not self.text:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the search text is empty")
        if len(self.text) > PATTERN_MAX_CHARS:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"the search text is longer than {PATTERN_MAX_CHARS} characters"
            )
        body = self.text if self.regex else re.escape(self.text)
        if self.whole_word:
            body = rf"\b(?:{body})\b"
        try:
            return re.compile(body, 0 if self.case_sensitive else re.IGNORECASE)
        except re.error as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, f"the regular expression does not compile: {exc}"
            ) from None

    def key(self) -> str:
        raw = json.dumps([self.text, self.regex, self.case_sensitive, self.whole_word])
        return hashlib.sha256(raw.encode()).hexdigest()[:12]


def _encode_cursor(query: Query, file_index: int, offset: int) -> str:
    raw = json.dumps({"q": query.key(), "f": file_index, "o": offset}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(query: Query, cursor: str | None) -> tuple[int, int]:
    if not cursor:
        return 0, 0
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        if data["q"] != query.key():
            raise ValueError("cursor of another query")
        return int(data["f"]), int(data["o"])
    except (ValueError, KeyError, TypeError) as exc:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"the cursor is not valid for this search ({exc})",
            hint="Start the search again without a cursor.",
        ) from None


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
) -> dict[str, Any]:
    """One page of matches over `files`; `live_text(path)` gives (docId, text) for open documents."""
    pattern = query.compile()
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
                if path.stat().st_size > DOCUMENT_MAX_BYTES:
                    skipped.append(relative(path))
                    file_index, offset = file_index + 1, 0
                    continue
                text = decode_file(path.read_bytes()).text
            except (OSError, BridgeError):
                skipped.append(relative(path))
                file_index, offset = file_index + 1, 0
                continue
        line = text.count("\n", 0, offset) + 1
        counted_to = offset
        for m in pattern.finditer(text, offset):
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
