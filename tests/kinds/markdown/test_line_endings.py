"""Each line of a file of mixed line endings keeps its own ending through a save (line_endings.py)."""

from __future__ import annotations

import itertools

from hypothesis import assume, given
from hypothesis import strategies as st

from deskbridge.kinds.markdown import line_endings
from deskbridge.kinds.markdown.document import decode_file, encode_text
from deskbridge.kinds.markdown.line_endings import with_endings

_LINES = st.lists(st.tuples(st.text("ab #", max_size=4), st.sampled_from(["\n", "\r\n", "\r"])), max_size=12)


def _file(lines: list[tuple[str, str]], last: str) -> bytes:
    # a lone CR ending and an empty LF line after it are one CRLF in the file: not the lines we meant
    assume(not any(a[1] == "\r" and b == ("", "\n") for a, b in itertools.pairwise(lines)))
    return ("".join(line + end for line, end in lines) + last).encode()


@given(lines=_LINES, last=st.text("ab", max_size=2))
def test_an_unchanged_document_is_written_back_byte_for_byte(lines, last):
    data = _file(lines, last)
    decoded = decode_file(data)
    if decoded.mixed is None:
        assert len({end for _, end in lines}) <= 1
        return
    text, _ = with_endings(decoded.text, decoded.mixed, decoded.newline)
    assert encode_text(text, "utf-8", "\n", decoded.bom) == data


@given(
    lines=_LINES,
    at=st.integers(0, 12),
    new=st.lists(st.text("xy", min_size=1, max_size=3), min_size=1, max_size=3),
)
def test_lines_outside_an_edit_keep_their_endings(lines, at, new):
    data = _file(lines, "tail")
    decoded = decode_file(data)
    if decoded.mixed is None:
        return
    old_lines = decoded.text.split("\n")
    at = min(at, len(lines) - 1)
    # replace line `at` by the new lines (which contain no 'a'/'b', so they match no old line)
    edited = "\n".join(old_lines[:at] + new + old_lines[at + 1 :])
    text, _ = with_endings(edited, decoded.mixed, decoded.newline)
    expected_head = "".join(line + end for line, end in lines[:at])
    expected_tail = "".join(line + end for line, end in lines[at + 1 :]) + "tail"
    assert text.startswith(expected_head) and text.endswith(expected_tail)


def test_past_the_matching_bound_changed_lines_take_endings_by_position(monkeypatch):
    monkeypatch.setattr(line_endings, "MATCHED_LINES_MAX", 2)
    decoded = decode_file(b"keep\r\na\nb\r\nc\nkeep too\r\n")
    assert decoded.mixed is not None
    text, written = with_endings("keep\nA\nB\nC\nD\nkeep too\n", decoded.mixed, decoded.newline)
    assert text == "keep\r\nA\nB\r\nC\nD\nkeep too\r\n"
    assert written.text == "keep\nA\nB\nC\nD\nkeep too\n"
