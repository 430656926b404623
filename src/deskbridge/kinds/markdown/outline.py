"""The heading outline of a Markdown text, found by a line scan fast enough for a 120,000-line document.

A full CommonMark parse of 10 MB takes seconds; the outline only needs ATX headings (`# Title`), setext
headings (`Title` over `===`/`---`), and to know which lines are inside fenced code blocks or front matter,
where a `#` is not a heading (CommonMark 0.31.2 §4.2, §4.3, §4.5). One regex pass finds the candidate lines;
a small state machine walks them in order. Vex's anchor for the same document is 154 ms (research §1).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

_LINE: Final = re.compile(
    r"\n {0,3}(?:(?P<atx>#{1,6})(?P<title>[ \t][^\n]*)?(?=\n|$)"
    r"|(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)"
    r"|(?P<setext>=+|-+)[ \t]*(?=\n|$)"
    r"|(?P<html><(?:[sS][cC][rR][iI][pP][tT]|[pP][rR][eE]|[sS][tT][yY][lL][eE]|[tT][eE][xX][tT][aA][rR][eE][aA])"
    r"(?=[ \t>]|\n|$)|<!--)"
    r"|(?P<html6></?(?i:address|article|aside|base|basefont|blockquote|body|caption|center|col|colgroup|dd|"
    r"details|dialog|dir|div|dl|dt|fieldset|figcaption|figure|footer|form|frame|frameset|h[1-6]|head|header|"
    r"hr|html|iframe|legend|li|link|main|menu|menuitem|nav|noframes|ol|optgroup|option|p|param|search|"
    r"section|summary|table|tbody|td|tfoot|th|thead|title|tr|track|ul)(?=[ \t/>]|\n|$))"
    r"|(?P<html7></?[A-Za-z][A-Za-z0-9-]*(?:[ \t]+[^<>\n]*)?/?>[ \t]*(?=\n|$)))"
)
_BLANK_LINE: Final = re.compile(r"\n[ \t]*(?:\n|$)")
"""HTML blocks of types 6 and 7 (§4.6) run to the next blank line."""
_TYPE1_ENDS: Final = ("</script>", "</pre>", "</style>", "</textarea>")
"""HTML blocks of types 1 (these tags) and 2 (`<!--` … `-->`) run to their end marker across blank lines (§4.6)."""
"""One pass over '\n' + text: a line that is an ATX heading, a fence, or a setext underline (§4.2, §4.3,
§4.5). The pattern starts with a literal newline, which lets `re` skip ahead quickly between lines."""

_CANDIDATE: Final = re.compile(
    r"(?: {0,3}(?:(?P<atx>#{1,6})(?:[ \t]+(?P<title>.*?))?[ \t]*"
    r"|(?P<fence>`{3,}|~{3,})(?P<info>.*)"
    r"|(?P<setext>=+|-+)[ \t]*))$",
    re.MULTILINE,
)
_CLOSING_HASHES: Final = re.compile(r"(?:^|[ \t]+)#+[ \t]*$")
_NOT_PARAGRAPH: Final = re.compile(
    r"^ {0,3}(?:[-+*](?:[ \t]|$)|>|\d{1,9}[.)](?:[ \t]|$)|#{1,6}(?:[ \t]|$)|```|~~~"
    r"|(?:\*[ \t]*){3,}$|(?:-[ \t]*){3,}$|(?:_[ \t]*){3,}$)"
)
_CONTAINER: Final = re.compile(r"^ {0,3}(?:[-+*](?:[ \t]|$)|\d{1,9}[.)](?:[ \t]|$)|>)")
"""A list item or block quote start: a paragraph under it continues it lazily (§5.1 laziness)."""
_INTERRUPTS: Final = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|```|~~~|(?:\*[ \t]*){3,}$|(?:_[ \t]*){3,}$)")
"""Lines that end a paragraph above them: ATX headings, fences, thematic breaks."""
_FRONT_MATTER: Final = re.compile(r"\A(?:---|\+\+\+)[ \t]*\n(?:.*\n)*?(?:---|\.\.\.|\+\+\+)[ \t]*(?:\n|\Z)")


@dataclass(slots=True)
class Heading:
    """One heading: level 1-6, its plain title, 1-based line, and the last line of its section."""

    level: int
    title: str
    line: int
    end_line: int
    path: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "level": self.level,
            "title": self.title,
            "line": self.line,
            "endLine": self.end_line,
            "path": " > ".join(self.path),
        }


def front_matter_span(text: str) -> int:
    """Code points taken by a leading YAML (`---`) or TOML (`+++`) front matter block, 0 when none."""
    if not text.startswith(("---", "+++")):
        return 0
    m = _FRONT_MATTER.match(text)
    return m.end() if m else 0


def _line_text(text: str, line_starts_pos: int) -> str:
    end = text.find("\n", line_starts_pos)
    return text[line_starts_pos : end if end != -1 else len(text)]


def _lines(text: str, skip_to: int):
    """Candidate lines; the first line has no '\n' before it, so it is matched against a one-line copy."""
    if skip_to == 0:
        first_end = text.find("\n")
        head = _LINE.match("\n" + (text if first_end == -1 else text[:first_end]))
        if head is not None:
            yield _Shifted(head)
    yield from _LINE.finditer(text, max(0, skip_to - 1))


class _Shifted:
    """A match on '\n' + first line, made to look like a match in the text (start -1 → line start 0)."""

    __slots__ = ("_m",)

    def __init__(self, m: re.Match[str]) -> None:
        self._m = m

    def start(self) -> int:
        return -1

    def group(self, name: str) -> str | None:
        return self._m.group(name)

    @property
    def lastgroup(self) -> str | None:
        return self._m.lastgroup


def outline(text: str) -> list[Heading]:
    """Every heading outside code fences and front matter, in document order, with section end lines."""
    raw: list[tuple[int, str, int]] = []  # (level, title, line)
    fence: str | None = None
    skip_to = front_matter_span(text)
    line_no = 1
    memo: dict[int, bool] = {}
    pos = 0  # text position up to which newlines were counted
    count = text.count
    skip_html = -1
    lower: str | None = None
    for m in _lines(text, skip_to):
        start = m.start() + 1  # the match starts at the '\n' before the line
        if start < skip_html:
            continue
        kind = m.lastgroup  # which alternative matched (its last named group)
        if kind == "info":  # a fence line
            f = m.group("fence")
            if fence is not None:
                if f[0] == fence[0] and len(f) >= len(fence) and not m.group("info").strip():
                    fence = None
            elif not (
                f[0] == "`" and "`" in m.group("info")
            ):  # a backtick in the info string: no fence (§4.5)
                fence = f
            continue
        if fence is not None:
            continue
        if kind == "title" or kind == "atx":
            line_no += count("\n", pos, start)
            pos = start
            title = (m.group("title") or "").strip()
            if title.endswith("#"):
                title = _CLOSING_HASHES.sub("", title).strip()
            raw.append((len(m.group("atx")), title, line_no))
        elif kind == "setext":
            line_no += count("\n", pos, start)
            pos = start
            # a paragraph cannot reach above the end of an HTML block
            floor = max(skip_to, skip_html if 0 <= skip_html <= start else 0)
            heading = _setext(text, start, line_no, floor, m.group("setext"), memo)
            if heading is not None:
                raw.append(heading)
        elif kind == "html":
            html = m.group("html")
            if html == "<!--":
                end = text.find("-->", start)
            else:  # type 1 ends at the first of any of the four end tags, in any letter case (§4.6)
                if lower is None:
                    lower = text.lower()
                found = [e for e in (lower.find(t, start) for t in _TYPE1_ENDS) if e != -1]
                end = min(found) if found else -1
            skip_html = len(text) if end == -1 else text.find("\n", end) + 1 or len(text)
        elif kind == "html6" or (kind == "html7" and _type7_can_start(text, start, max(skip_html, skip_to))):
            blank = _BLANK_LINE.search(text, start)
            skip_html = len(text) if blank is None else blank.start() + 1
    # a final '\n' ends the last line; it does not start an empty one
    total_lines = count("\n") + (0 if text.endswith("\n") else 1)
    return _with_sections(raw, total_lines)


def _setext(
    text: str, start: int, line_no: int, skip_to: int, underline: str, memo: dict[int, bool] | None = None
) -> tuple[int, str, int] | None:
    """A setext heading whose underline starts at `start`: the paragraph above it is the title (§4.3).

    Walks up the paragraph; a paragraph that continues a list item or block quote lazily is not a heading
    (an underline cannot be a lazy continuation line).
    """
    if start == 0 or start <= skip_to:
        return None
    lines: list[str] = []
    first_line = line_no
    s = start
    while s > skip_to:
        ps = text.rfind("\n", 0, s - 1) + 1
        if ps < skip_to:
            break
        line = text[ps : s - 1]
        if not line.strip() or _INTERRUPTS.match(line):
            break
        if _CONTAINER.match(line):
            return None
        cm = _CANDIDATE.match(line)
        if (
            cm is not None
            and cm.group("setext")
            and (cm.group("setext")[0] == "-" or _is_underline(text, ps, skip_to, memo))
        ):
            break  # a thematic break, or the underline of an earlier setext heading
        lines.insert(0, line)
        first_line -= 1
        s = ps
    # indented lines at the top are an indented code block: a paragraph cannot start with one (§4.4)
    while lines and (lines[0].startswith("    ") or lines[0].lstrip(" ").startswith("\t")):
        lines.pop(0)
        first_line += 1
    lines = [line.strip() for line in lines]
    if not lines:
        return None
    return (1 if underline[0] == "=" else 2, " ".join(lines), first_line)


def _is_underline(text: str, line_start: int, skip_to: int, memo: dict[int, bool] | None) -> bool:
    """Whether the '=' line at `line_start` underlines a heading (its paragraph is not a lazy continuation)."""
    memo = {} if memo is None else memo
    if line_start not in memo:
        memo[line_start] = _ends_paragraph(text, line_start) and (
            _setext(text, line_start, 2, skip_to, "=", memo) is not None
        )
    return memo[line_start]


def _type7_can_start(text: str, line_start: int, floor: int = 0) -> bool:
    """A type-7 HTML block cannot interrupt a paragraph (§4.6), so it starts only where the line above is not
    paragraph text (a list or quote line above counts as text: the paragraph inside may continue lazily)."""
    return not _in_paragraph(text, line_start - 1 if line_start else -1, floor)


def _in_paragraph(text: str, line_end: int, floor: int = 0) -> bool:
    """Whether the line ending at `line_end` (its '\\n') is paragraph text; indented lines are paragraph
    text only when they continue one (else they are indented code). Walks up through indented lines."""
    while line_end >= floor:  # nothing at or above `floor` (the end of an HTML block) continues a paragraph
        start = text.rfind("\n", 0, line_end) + 1
        if start < floor:
            return False
        line = text[start:line_end]
        if not line.strip():
            return False
        if _EQUALS_LINE.match(line):  # an underline ends a paragraph; otherwise it is paragraph text
            return not _is_underline(text, start, 0, None)
        if _AFTER_WHICH_HTML7.match(line):
            return False
        if not (line.startswith("    ") or line.lstrip(" ").startswith("\t")):
            return True
        line_end = start - 1
    return False


_AFTER_WHICH_HTML7: Final = re.compile(r"^ {0,3}(?:#{1,6}(?:[ \t]|$)|```|~~~|(?:[-*_][ \t]*){3,}$|-+[ \t]*$)")
_EQUALS_LINE: Final = re.compile(r"^ {0,3}=+[ \t]*$")


def _ends_paragraph(text: str, line_start: int) -> bool:
    """True when the line before `line_start` is paragraph text (so a '===' line there is an underline)."""
    if line_start == 0:
        return False
    ps = text.rfind("\n", 0, line_start - 1) + 1
    above = text[ps : line_start - 1]
    return bool(above.strip()) and not _NOT_PARAGRAPH.match(above)


def _with_sections(raw: list[tuple[int, str, int]], total_lines: int) -> list[Heading]:
    """Attach each heading's last line (before the next heading of the same or higher level) and its path."""
    out: list[Heading] = []
    stack: list[tuple[int, int, tuple[str, ...]]] = []  # (level, index in out, path)
    for level, title, line in raw:
        while stack and stack[-1][0] >= level:
            out[stack.pop()[1]].end_line = line - 1
        path = (*stack[-1][2], title) if stack else (title,)
        stack.append((level, len(out), path))
        out.append(Heading(level, title, line, total_lines, path))
    return out
