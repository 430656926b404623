"""How text from untrusted data (archive and file names, a mod's ids, a cloned project's configs) is shown in a
terminal: control characters spelled out, rich markup escaped where the output goes through rich, JSON with DEL
and C1 escaped.

A file may be named anything. `ESC ] 0 ; … BEL` printed raw retitles the terminal, other ESC sequences clear it
or (OSC 52) write the clipboard, U+009B (C1 CSI) starts a sequence on terminals that take 8-bit controls (ECMA-48
§5.3, ecma-international.org/publications-and-standards/standards/ecma-48), and a newline splits one name in
two. A bidi control (U+202E RIGHT-TO-LEFT OVERRIDE and its kin, Unicode UAX #9 §2, unicode.org/reports/tr9)
reorders what follows it, so `report\u202excod.exe` shows as `reportexe.docx` (Trojan Source, CVE-2021-42574,
trojansource.codes); those are spelled out too. Printed through rich, `[bold]` in a name turns into style and an
unbalanced `[/x]` makes rich raise instead of printing the message at all.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

KEPT_CONTROLS: Final = "\n\t"
"""Control characters `printable` keeps: line breaks and tabs are how the CLI lays out what it prints."""

BIDI_CONTROLS: Final = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The characters that change the display order of the text around them (UAX #9 §2: ALM, LRM, RLM, the
embeddings, overrides, isolates and their terminators). Other format characters (a zero-width space) are kept."""

_RAW_IN_JSON: Final = re.compile("[\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "]")
"""What `json.dumps(..., ensure_ascii=False)` leaves raw among the characters `escaped_controls` spells out: DEL,
C1 and the bidi controls (it escapes C0)."""


def has_control(text: str) -> bool:
    """True when `text` holds a control character (Unicode category Cc: C0, DEL, C1)."""
    return not text.isprintable() and any(unicodedata.category(c) == "Cc" for c in text)


def escaped_controls(text: str, keep: str = "") -> str:
    """`text` with each control character (Unicode category Cc: C0, DEL, C1) but those in `keep` spelled as an
    escape (`\\x01`, `\\x0a`), and each bidi control as `\\u202e`. With the ESC of an escape sequence spelled
    out, the rest of it is plain text; with the override spelled out, the text shows in the order it is stored."""
    if text.isprintable():
        return text
    return "".join(_shown(c) if c not in keep else c for c in text)


def _shown(char: str) -> str:
    """One character as `escaped_controls` shows it."""
    if char in BIDI_CONTROLS:
        return f"\\u{ord(char):04x}"
    if unicodedata.category(char) == "Cc":
        return f"\\x{ord(char):02x}"  # every Cc is below U+0100
    return char


def printable(text: str, *, markup: bool = False) -> str:
    """`text` safe to print: control characters but newlines and tabs spelled out (`escaped_controls`) and, with
    `markup`, rich markup escaped too (for text put into a string that a rich `Console.print` reads as markup:
    `[bold]` in a name then prints as `[bold]`)."""
    shown = escaped_controls(text, keep=KEPT_CONTROLS)
    if not markup:
        return shown
    from rich.markup import escape

    return escape(shown)


def json_text(value: Any, **dumps_options: Any) -> str:
    """`json.dumps(value, ensure_ascii=False, ...)` with DEL, C1 and bidi controls spelled `\\u007f`, `\\u202e`:
    names stay readable (中文 stays 中文), the terminal meets no raw control character, and a JSON reader gets the
    same value."""
    return controls_escaped_in_json(json.dumps(value, ensure_ascii=False, **dumps_options))


def controls_escaped_in_json(text: str) -> str:
    """JSON (or TOML) text with the raw DEL, C1 and bidi control characters a serialiser left in it spelled
    `\\uXXXX`.

    The same value for its reader: outside strings neither format holds these characters, and inside a string
    `\\uXXXX` is that character (RFC 8259 §7; TOML 1.0 basic strings, toml.io/en/v1.0.0#string)."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
