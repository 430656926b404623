"""Turning an MCP client's edit request into exact code-point edits, with the checks that keep it honest.

Three ways to say where (research/markdown.md §2.2): a range with the text expected there (offsets or
line/column), an exact `oldText` with the number of occurrences expected, and a heading path. Each fails
loudly with the current text around the spot instead of editing the wrong place.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.offsets import OffsetMap

CONTEXT_CHARS: Final = 120
"""Characters of current text shown either side of a refused range."""

NEAR_MISS_SCAN_LINES: Final = 50_000
"""Lines compared by similarity when looking for the nearest near-miss of an `oldText`."""


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


def context_around(text: str, start: int, end: int, radius: int = CONTEXT_CHARS) -> dict[str, Any]:
    """The current text at [start, end) and around it, with line numbers (for error data)."""
    om = OffsetMap(text)
    start = max(0, min(start, len(text)))
    end = max(start, min(end, len(text)))
    line, col = om.cp_to_line_col(start)
    return {
        "startOffset": start,
        "endOffset": end,
        "line": line,
        "column": col,
        "before": text[max(0, start - radius) : start],
        "currentText": _cut(text[start:end], 4 * radius),
        "after": text[end : end + radius],
    }


@dataclass(frozen=True)
class Range:
    start: int
    end: int


def resolve_range(
    om: OffsetMap,
    *,
    start_offset: int | None = None,
    length: int | None = None,
    end_offset: int | None = None,
    start_line: int | None = None,
    start_column: int | None = None,
    end_line: int | None = None,
    end_column: int | None = None,
) -> Range:
    """A code-point range from offsets (start + length or end) or from 1-based line/column pairs."""
    if start_offset is not None:
        if start_line is not None:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "give either startOffset or startLine, not both")
        start = start_offset
        if length is not None and end_offset is not None:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "give either length or endOffset, not both")
        end = start + (length or 0) if end_offset is None else end_offset
        om.cp_to_utf16(start)  # bounds checks with a clear message
        om.cp_to_utf16(end)
    elif start_line is not None:
        start = om.line_col_to_cp(start_line, start_column or 1)
        if end_line is None:
            end = start if end_column is None else om.line_col_to_cp(start_line, end_column)
        else:
            end = om.line_col_to_cp(end_line, end_column or 1)
    else:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, "say where: startOffset (+ length), or startLine/startColumn"
        )
    if end < start:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"the range ends ({end}) before it starts ({start})")
    return Range(start, end)


def check_expected_text(text: str, rng: Range, expected: str | None) -> None:
    """EXPECTED_TEXT_MISMATCH (with the current text around the range) when the range does not hold `expected`."""
    if expected is None:
        return
    current = text[rng.start : rng.end]
    if current == expected:
        return
    raise BridgeError(
        ErrorCode.EXPECTED_TEXT_MISMATCH,
        f"the text at {rng.start}..{rng.end} is not the expectedText "
        f"({len(current)} characters there, {len(expected)} expected)",
        data=context_around(text, rng.start, rng.end),
    )


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def find_occurrences(text: str, old: str) -> list[int]:
    """Start offsets of every non-overlapping exact occurrence of `old`."""
    out: list[int] = []
    pos = text.find(old)
    while pos != -1:
        out.append(pos)
        pos = text.find(old, pos + len(old))
    return out


def _ws_pattern(old: str) -> re.Pattern[str]:
    parts = [re.escape(p) for p in old.split()]
    return re.compile(r"\s+".join(parts))


def nearest_near_miss(text: str, old: str) -> dict[str, Any] | None:
    """Where `old` almost appears: same text with other whitespace or case, else the most similar lines."""
    if not old.strip():
        return None
    m = _ws_pattern(old).search(text)
    if m:
        return {
            "line": _line_of(text, m.start()),
            "startOffset": m.start(),
            "text": _cut(m.group(0), 400),
            "difference": "whitespace",
        }
    low = text.lower().find(old.lower())
    if low != -1:
        return {
            "line": _line_of(text, low),
            "startOffset": low,
            "text": _cut(text[low : low + len(old)], 400),
            "difference": "letter case",
        }
    old_lines = old.split("\n")
    probe = max(old_lines, key=len).strip()
    if not probe:
        return None
    lines = text.split("\n", NEAR_MISS_SCAN_LINES)[:NEAR_MISS_SCAN_LINES]
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(probe)
    best: tuple[float, int] = (0.0, -1)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped:
            continue
        matcher.set_seq1(stripped)
        if matcher.real_quick_ratio() <= best[0] or matcher.quick_ratio() <= best[0]:
            continue
        r = matcher.ratio()
        if r > best[0]:
            best = (r, i)
    if best[1] < 0 or best[0] < 0.5:
        return None
    return {
        "line": best[1] + 1,
        "text": _cut(lines[best[1]], 400),
        "similarity": round(best[0], 2),
        "difference": "similar line",
    }


def replace_text_edits(text: str, old: str, new: str, expected_occurrences: int = 1) -> list[Edit]:
    """Edits replacing every exact occurrence of `old` when there are exactly `expected_occurrences`."""
    if not old:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "oldText is empty; use md_insert_text to insert")
    if expected_occurrences < 1:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "expectedOccurrences must be at least 1")
    found = find_occurrences(text, old)
    if not found:
        near = nearest_near_miss(text, old)
        where = f"; nearest near-miss at line {near['line']} ({near['difference']})" if near else ""
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"oldText does not occur in the document{where}",
            hint="Read the text around the near-miss and copy oldText from it exactly (whitespace included).",
            data={"occurrences": 0, "nearMiss": near} if near else {"occurrences": 0},
        )
    if len(found) != expected_occurrences:
        lines = [_line_of(text, p) for p in found[:50]]
        raise BridgeError(
            ErrorCode.EXPECTED_TEXT_MISMATCH,
            f"oldText occurs {len(found)} times (on lines {', '.join(map(str, sorted(set(lines))[:10]))}"
            f"{'…' if len(set(lines)) > 10 else ''}), expected {expected_occurrences}",
            hint="Add surrounding text to oldText to make it unique, or pass the real expectedOccurrences.",
            data={"occurrences": len(found), "lines": lines},
        )
    return [Edit(p, p + len(old), new) for p in found]


REFINE_MIN_CHARS: Final = 32
"""An edit replacing fewer characters than this is applied as it is."""

REFINE_MAX_LINES: Final = 200_000
"""Lines of a replaced span diffed at most (a bigger one stays a single edit)."""


def _trim(old: str, new: str) -> tuple[int, int]:
    """Lengths of the common prefix and (not overlapping it) common suffix of `old` and `new`."""
    limit = min(len(old), len(new))
    prefix = 0
    while prefix < limit and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
        suffix += 1
    return prefix, suffix


def minimal_edits(old: str, new: str, at: int = 0) -> list[Edit]:
    """Edits (code points, ascending, from `at`) turning `old` into `new` that leave unchanged lines alone.

    An AI that replaces a whole document or section usually changes a few places in it. Sent as one big range,
    the person's keystrokes inside it (typed while the change travelled) can only be put at its edge, and the
    cursor jumps there (issue 10 data loss 2: "the rest typed after the final newline"). As line hunks, every
    unchanged line is retained, so the editor rebases the person's typing exactly where it was.
    """
    if old == new:
        return []
    prefix, suffix = _trim(old, new)
    o_mid, n_mid = old[prefix : len(old) - suffix], new[prefix : len(new) - suffix]
    base = at + prefix
    a, b = o_mid.splitlines(keepends=True), n_mid.splitlines(keepends=True)
    if len(a) + len(b) <= 2 or max(len(a), len(b)) > REFINE_MAX_LINES:
        return [Edit(base, base + len(o_mid), n_mid)]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=len(a) > 5000)
    a_pos = [0]
    for line in a:
        a_pos.append(a_pos[-1] + len(line))
    b_pos = [0]
    for line in b:
        b_pos.append(b_pos[-1] + len(line))
    out: list[Edit] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        o_part = o_mid[a_pos[i1] : a_pos[i2]]
        n_part = n_mid[b_pos[j1] : b_pos[j2]]
        p, s = _trim(o_part, n_part)
        start = base + a_pos[i1] + p
        out.append(Edit(start, start + len(o_part) - p - s, n_part[p : len(n_part) - s]))
    return out


def refine_edits(text: str, edits: list[Edit]) -> list[Edit]:
    """`edits` on `text` with every large replacement split into `minimal_edits` (same result)."""
    out: list[Edit] = []
    for e in edits:
        if e.end - e.start >= REFINE_MIN_CHARS and e.insert:
            out.extend(minimal_edits(text[e.start : e.end], e.insert, e.start))
        else:
            out.append(e)
    return out
