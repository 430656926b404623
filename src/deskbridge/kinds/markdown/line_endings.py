"""The line endings of a file whose lines do not all end alike, and how a save gives them back line by line.

A document's text is always '\\n'-separated (document.py). Most files end every line the same way and a save
just writes that one ending; a file pasted together from two systems has some CRLF lines and some LF ones,
and writing all of them in the majority ending would change lines nobody touched (every diff tool, and git,
would show them as changed). For such a file the document keeps `MixedEndings`: the text as last read or
saved and each line's own ending. A save matches the lines of the text to write against those lines
(`difflib.SequenceMatcher`, after cutting the common head and tail) and gives

* an untouched line its own ending,
* an edited line (one of a block of replaced lines) the ending of the line it replaces,
* a new line the ending of its neighbour above in the new text (at the very top: of the line below it),
  or the file's majority ending when it has no neighbour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

MATCHED_LINES_MAX: Final = 50_000
"""Most changed lines (after cutting the common head and tail) matched line by line; past it, the changed
lines take the endings of the old lines by position (a whole-text replacement of a huge file must not make a
save quadratic)."""

_LINE_BREAK: Final = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class MixedEndings:
    """`text` ('\\n'-separated, as last read or saved) and the ending of each of its lines, one per '\\n'."""

    text: str
    endings: tuple[str, ...]


def mixed_endings(raw: str, text: str) -> MixedEndings | None:
    """The endings of `raw` (the decoded file, before its line breaks were made '\\n') when they are not all
    alike; None for a file with one kind of ending (or none), whose majority ending says it all."""
    endings = tuple(_LINE_BREAK.findall(raw))
    if len(set(endings)) <= 1:
        return None
    return MixedEndings(text, endings)


def with_endings(text: str, mixed: MixedEndings, majority: str) -> tuple[str, MixedEndings]:
    """`text` with each line ending as described in the module docstring, and the `MixedEndings` of the
    result (what the next save starts from)."""
    old, new = mixed.text.split("\n"), text.split("\n")
    old_endings = mixed.endings
    out: list[str] = [""] * (len(new) - 1)  # the ending of each new line but the last

    def old_ending(i: int) -> str | None:
        return old_endings[i] if i < len(old_endings) else None

    def neighbour(j: int, i_below: int) -> str:
        if j > 0:
            return out[j - 1]
        return old_ending(i_below) or majority

    head = 0
    limit = min(len(old), len(new))
    while head < limit and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < limit - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    old_mid, new_mid = old[head : len(old) - tail], new[head : len(new) - tail]
    if len(old_mid) > MATCHED_LINES_MAX or len(new_mid) > MATCHED_LINES_MAX:
        blocks = [("replace", 0, len(old_mid), 0, len(new_mid))]
    else:
        blocks = SequenceMatcher(None, old_mid, new_mid, autojunk=False).get_opcodes()

    def take(j: int, ending: str | None, i_below: int) -> None:
        if j < len(out):
            out[j] = ending if ending is not None else neighbour(j, i_below)

    for j in range(head):
        take(j, old_ending(j), j)
    for tag, i1, i2, j1, j2 in blocks:
        for k in range(j2 - j1):
            i = head + i1 + k
            # equal lines keep their ending; replaced ones take the ending of the line they replace
            kept = old_ending(i) if tag == "equal" or (tag == "replace" and i < head + i2) else None
            take(head + j1 + k, kept, head + i2)
    for k in range(tail, 0, -1):
        take(len(new) - k, old_ending(len(old) - k), len(old) - k)
    endings = tuple(out)
    pieces = [line + ending for line, ending in zip(new, endings, strict=False)]
    pieces.append(new[-1])
    return "".join(pieces), MixedEndings(text, endings)
