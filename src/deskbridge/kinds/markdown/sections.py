"""Sections addressed by heading path (`Intro > Setup`): find them, read them by lines, patch them.

A section is a heading line plus everything up to the next heading of the same or a higher level (so it
includes its subsections). A path lists heading titles from the outside in, separated by `>`; it may leave
out outer levels when the rest is unique (`Setup` finds `Intro > Setup` if there is one Setup), and leading
`#` marks are ignored because models often copy them (research/markdown.md §2.3, mcp-obsidian issues).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Literal

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.offsets import OffsetMap
from deskbridge.kinds.markdown.outline import Heading, outline

PATH_SEPARATOR: Final = ">"

_CONTINUES: Final = re.compile(r"^\s{0,3}(?:[-+*]\s|\d{1,9}[.)]\s|\|)")
"""List items and table rows: appending another one continues the block instead of starting a paragraph."""

PatchOp = Literal["replace", "append", "prepend"]


def parse_path(path: str) -> list[str]:
    parts = [p.strip().lstrip("#").strip() for p in path.split(PATH_SEPARATOR)]
    parts = [p for p in parts if p]
    if not parts:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the heading path is empty (example: 'Intro > Setup')")
    return parts


def _norm(title: str) -> str:
    return " ".join(title.split()).casefold()


@dataclass(frozen=True)
class Section:
    heading: Heading
    start: int
    """Code point where the heading line starts."""
    body_start: int
    """Code point after the heading (after the setext underline for setext headings)."""
    end: int
    """Code point where the next same-or-higher heading starts (or the end of the text)."""

    def to_dict(self) -> dict[str, Any]:
        return {**self.heading.to_dict()}


def find_section(text: str, path: str, headings: list[Heading] | None = None) -> Section:
    """The one section matching `path`; NOT_FOUND (with the closest titles) or ambiguous INVALID_ARGUMENT."""
    wanted = [_norm(p) for p in parse_path(path)]
    headings = outline(text) if headings is None else headings
    matches = [h for h in headings if _suffix_match([_norm(t) for t in h.path], wanted)]
    if not matches:
        last = wanted[-1]
        similar = [h.to_dict() for h in headings if last in _norm(h.title) or _norm(h.title) in last][:10]
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"no heading matches the path {path!r}",
            hint="Call md_get_document_outline and copy a heading path from it.",
            data={"similar": similar} if similar else None,
        )
    if len(matches) > 1:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"the path {path!r} matches {len(matches)} headings; add the outer heading(s) to make it unique",
            data={"candidates": [h.to_dict() for h in matches[:20]]},
        )
    return section_of(text, matches[0])


def _suffix_match(have: list[str], wanted: list[str]) -> bool:
    return len(wanted) <= len(have) and have[-len(wanted) :] == wanted


def section_of(text: str, heading: Heading) -> Section:
    om = OffsetMap(text)
    start = om.line_starts[heading.line - 1]
    # body starts after the heading line; for setext headings after the underline too
    first_body_line = heading.line + 1
    line_text_end = om.line_starts[heading.line] - 1 if heading.line < om.line_count else len(text)
    is_atx = text[start:line_text_end].lstrip(" ").startswith("#")
    if not is_atx:
        # setext: the title may span lines; the underline is the line after the last title line
        n = first_body_line
        while n <= om.line_count:
            ls = om.line_starts[n - 1]
            le = om.line_starts[n] - 1 if n < om.line_count else len(text)
            stripped = text[ls:le].strip()
            if stripped and set(stripped) <= {"="} | {"-"} and len(set(stripped)) == 1:
                first_body_line = n + 1
                break
            n += 1
    body_start = om.line_starts[first_body_line - 1] if first_body_line <= om.line_count else len(text)
    end_line = heading.end_line
    end = om.line_starts[end_line] if end_line < om.line_count else len(text)
    return Section(heading, start, max(body_start, start), max(end, body_start))


def patch_section_edit(text: str, path: str, op: PatchOp, content: str) -> tuple[Section, Edit]:
    """The edit that replaces the body of, appends to, or prepends to the section at `path`.

    The edit is kept as small as possible (appending touches only the end of the section), so a person
    typing elsewhere in the section does not make it stale. A blank line is kept before the next heading.
    """
    if op not in ("replace", "append", "prepend"):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"operation {op!r} is not one of replace, append, prepend"
        )
    section = find_section(text, path)
    content = content.rstrip("\n") + "\n" if content.strip("\n") else ""
    lead = "\n" if section.body_start == len(text) and text and not text.endswith("\n") else ""
    before_next = section.end < len(text)
    old = text[section.body_start : section.end]
    if op == "prepend":
        blanks = len(old) - len(old.lstrip("\n"))
        at = section.body_start + blanks
        sep = "" if at == section.end and not before_next else "\n"
        return section, Edit(at, at, lead + ("\n" if not blanks else "") + content + sep)
    if op == "replace":
        new = ("\n" + content if content else "") + ("\n" if before_next and content else "")
        return section, Edit(section.body_start, section.end, lead + new)
    core = old.rstrip("\n")
    if core:
        last_line = core.rsplit("\n", 1)[-1]
        same_block = bool(_CONTINUES.match(last_line) and _CONTINUES.match(content))
        new = core + ("\n" if same_block else "\n\n") + content
    else:
        new = "\n" + content
    new = new.rstrip("\n") + ("\n\n" if before_next else "\n")
    keep = len(core)
    return section, Edit(section.body_start + keep, section.end, lead + new[keep:])


def read_lines(
    text: str,
    first_line: int,
    last_line: int | None,
    *,
    max_bytes: int,
    offsets: OffsetMap | None = None,
    start_column: int = 1,
) -> dict[str, Any]:
    """Lines first..last (1-based, inclusive) from `start_column` (1-based, code points) of the first line,
    capped at `max_bytes` of UTF-8; says `truncated` and where to go on.

    The one paging rule of the kind (md_get_current_document and md_read_section): a page ends at the end of
    a line when at least one whole line fits; a line longer than `max_bytes` is returned in pieces, and
    `nextStartLine` + `nextStartColumn` continue inside it. Following `nextStartLine`/`nextStartColumn`
    from (1, 1) and joining the pages gives the text back exactly, for any text and page size (every page
    holds at least one code point). Pass the document's `offsets` map (whose text is `text`) to reuse its
    line table."""
    om = offsets if offsets is not None else OffsetMap(text)
    total = om.line_count
    if first_line < 1 or first_line > total:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"startLine {first_line} is outside the document (1..{total})"
        )
    line_start = om.line_start(first_line)
    line_length = om.line_end(first_line) - line_start
    if start_column < 1 or start_column - 1 > line_length:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"startColumn {start_column} is outside line {first_line} (1..{line_length + 1})",
        )
    last = total if last_line is None else max(first_line, min(last_line, total))
    start = line_start + start_column - 1
    end = om.line_span(first_line, last)[1]
    chunk = text[start:end]
    out: dict[str, Any] = {"startLine": first_line}
    if start_column > 1:
        out["startColumn"] = start_column
    fits = len(chunk) <= max_bytes and len(chunk.encode("utf-8")) <= max_bytes
    next_line: int | None = None
    next_column = 1
    if not fits:
        head = text[start : start + max_bytes].encode("utf-8")[:max_bytes].decode("utf-8", "ignore")
        head = head or text[start : start + 1]  # a page smaller than one character still moves on
        nl = head.rfind("\n")
        if nl != -1:
            chunk = head[: nl + 1]
            next_line = first_line + chunk.count("\n")
            last = next_line - 1
        else:  # one line longer than the page: go on inside it
            chunk = head
            last, next_line, next_column = first_line, first_line, start_column + len(chunk)
    out.update(
        {
            "text": chunk,
            "endLine": last,
            "totalLines": total,
            "startOffset": start,
            "truncated": not fits,
        }
    )
    if next_line is not None:
        out["nextStartLine"] = next_line
        if next_column > 1:
            out["nextStartColumn"] = next_column
    return out
