"""How text from untrusted data (archive and file names, a mod's ids, a cloned project's configs) is shown in a
terminal: control characters spelled out, rich markup escaped where the output goes through rich, JSON with DEL
and C1 escaped.

A file may be named anything. `ESC ] 0 ; … BEL` printed raw retitles the terminal, other ESC sequences clear it
or (OSC 52) write the clipboard, U+009B (C1 CSI) starts a sequence on terminals that take 8-bit controls (ECMA-48
§5.3, ecma-international.org/publications-and-standards/standards/ecma-48), and a newline splits one name in
two. Printed through rich, `[bold]` in a name turns into style and an unbalanced `[/x]` makes rich raise instead
of printing the message at all.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any, Final

KEPT_CONTROLS: Final = "\n\t"
"""Control characters `printable` keeps: line breaks and tabs are how the CLI lays out what it prints."""

_RAW_IN_JSON: Final = re.compile("[\x7f-\x9f]")
"""What `json.dumps(..., ensure_ascii=False)` leaves raw among the control characters: DEL and C1 (it escapes C0)."""


def has_control(text: str) -> bool:
    """True when `text` holds a control character (Unicode category Cc: C0, DEL, C1)."""
    return not text.isprintable() and any(unicodedata.category(c) == "Cc" for c in text)


def escaped_controls(text: str, keep: str = "") -> str:
    """`text` with each control character (Unicode category Cc: C0, DEL, C1) but those in `keep` spelled as an
    escape (`\\x01`, `\\x0a`). With the ESC of an escape sequence spelled out, the rest of it is plain text."""
    if text.isprintable():
        return text
    return "".join(
        c if c in keep or unicodedata.category(c) != "Cc" else f"\\x{ord(c):02x}"  # every Cc is below U+0100
        for c in text
    )


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
    """`json.dumps(value, ensure_ascii=False, ...)` with DEL and C1 spelled `\\u007f`, `\\u0085`: names stay
    readable (中文 stays 中文), the terminal meets no raw control character, and a JSON reader gets the same value."""
    return controls_escaped_in_json(json.dumps(value, ensure_ascii=False, **dumps_options))


def controls_escaped_in_json(text: str) -> str:
    """JSON (or TOML) text with the raw DEL and C1 characters a serialiser left in it spelled `\\u00XX`.

    The same value for its reader: outside strings neither format holds these characters, and inside a string
    `\\u00XX` is that character (RFC 8259 §7; TOML 1.0 basic strings, toml.io/en/v1.0.0#string)."""
    return _RAW_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
