"""`core.terminal`: untrusted text is shown as text in a terminal, through rich or not, and in JSON output."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from deskbridge.core.terminal import BIDI_CONTROLS, escaped_controls, json_text, printable


def rendered(markup: str) -> str:
    """What rich prints for `markup` (no colours: a file, not a terminal)."""
    console = Console(file=io.StringIO(), highlight=False, soft_wrap=True, width=200)
    console.print(markup)
    return console.file.getvalue()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("name", "shown"),
    [
        ("plain 中文 name.txt", "plain 中文 name.txt"),
        ("title\x1b]0;pwned\x07.txt", "title\\x1b]0;pwned\\x07.txt"),  # OSC: retitles the terminal
        ("clip\x1b]52;c;ZXZpbA==\x07", "clip\\x1b]52;c;ZXZpbA==\\x07"),  # OSC 52: writes the clipboard
        ("csi\x9b2J", "csi\\x9b2J"),  # C1 CSI
        ("nel\x85del\x7f", "nel\\x85del\\x7f"),
        ("cr\rover", "cr\\x0dover"),  # a carriage return would let the rest overwrite what came before
        ("lines\nand\ttabs", "lines\nand\ttabs"),  # layout the CLI itself prints
        # Bidi controls reorder what follows (Trojan Source): "report\u202excod.exe" shows as "reportexe.docx"
        ("report\u202excod.exe", "report\\u202excod.exe"),
        ("a\u2066b\u2069c\u200fd\u061c", "a\\u2066b\\u2069c\\u200fd\\u061c"),
        (
            "zero\u200bwidth joiner\u200d",
            "zero\u200bwidth joiner\u200d",
        ),  # format characters that reorder nothing stay
    ],
)
def test_control_characters_are_spelled_out_but_layout_stays(name: str, shown: str) -> None:
    assert printable(name) == shown


def test_markup_in_a_name_prints_as_written_through_rich() -> None:
    for name in ("[bold]x[/]", "[/oops]", "[red]a", "ends with a backslash\\", "[link=file:///etc]y[/link]"):
        # between tags, as in `[bold]{name}[/bold]`: a name's trailing backslash must not escape the closing tag
        assert rendered(f"[bold]name: {printable(name, markup=True)}[/bold].") == f"name: {name}.\n", name


@given(st.text())
def test_any_text_prints_through_rich_with_no_control_character_and_no_error(text: str) -> None:
    out = rendered(printable(text, markup=True))
    assert not any(c in out for c in "\x1b\x07\x9b\x7f\x85\r")


def test_escaped_controls_keeps_what_it_is_asked_to_keep() -> None:
    assert escaped_controls("a\nb\tc\x1b", keep="\n") == "a\nb\\x09c\\x1b"


@given(
    st.recursive(st.text() | st.integers(), lambda kids: st.lists(kids) | st.dictionaries(st.text(), kids))
)
def test_json_text_is_the_same_json_with_no_raw_del_c1_or_bidi_control(value: object) -> None:
    text = json_text(value, indent=1)
    assert json.loads(text) == value
    assert not any(
        0x7F <= ord(c) <= 0x9F or (ord(c) < 0x20 and c != "\n") or c in BIDI_CONTROLS for c in text
    )


def test_json_text_spells_a_bidi_override() -> None:
    assert json_text(["report\u202excod.exe"]) == '["report\\u202excod.exe"]'
