"""The PVF script text dialect shared by both families: token model, lexer and pretty printer.

Specified in `docs/pvf-script-text.md`. In short (research/pvf.md §2A, §2B, §5.7-8):

* Tokens are separated by any whitespace (TAB, space, newline); layout carries no meaning.
* `123`, `-5`                 int (signed 32-bit)
* `1.5`, `8000.0`, `1.0e-07`   float32; a `.` is mandatory; printed as the shortest text that reads back to
                              the same float32 bits (`format_float32`)
* `` `text` ``                string; a backtick inside is doubled (`` `a``b` `` = a`b); may span lines
* `[name]`, `[/name]`         section tag / end tag (no `]` or line break inside)
* `{N=123}`, `` {N=`text`} `` typed token: raw binary token type N with an int value or a string value
* `` <id::key`text`> ``       string link: table id + key; the text is display-only and ignored on compile
* `word`                      bare word (nkpi type-3 tags; a syntax error for classic)
* `#` at the start of a token starts a comment to the end of the line (`#PVF_File` is such a comment)

Codecs (`classic_codec.py`, `nkpi_codec.py`) map binary tokens to these `Token`s and back; this module
never knows a family's type codes. API for codecs: `lex(text) -> list[Token]`, `print_tokens(tokens, ...)`,
the constructors `int_token`, `float_token`, `section_token`, `string_token`, `typed_token`, `link_token`,
`word_token`, and the checks `is_section_text`, `is_link_key`, `is_word` (use a typed token when they fail).
For readers of the text: `TOKEN_RE` (matches one token, or whitespace/comment, at an offset) and
`container_indexes` (which tags nest).
"""

from __future__ import annotations

import functools
import math
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from deskbridge.core.errors import BridgeError, ErrorCode

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


class Kind(StrEnum):
    """Token kinds of the text dialect."""

    INT = "int"
    FLOAT = "float"
    SECTION = "section"
    STRING = "string"
    TYPED = "typed"
    LINK = "link"
    WORD = "word"


@dataclass(slots=True, unsafe_hash=True)
class Token:
    """One text token. `value`: INT int; FLOAT float32 bits as unsigned int; SECTION the tag with brackets
    (`[name]`); STRING/WORD the text; TYPED int or str; LINK the key. `pos` = offset in the source text.

    A value: never change one (the decompiler's record cache shares them between files); equal and hashed
    by everything but `pos`. Not `frozen`, because a frozen dataclass sets each field through
    `object.__setattr__`, and building tokens was half of `lex` — the cost of every compile."""

    kind: Kind
    value: int | str
    code: int = -1
    """TYPED only: the binary token type N of `{N=…}`."""
    link_id: int = 0
    link_text: str = ""
    pos: int = field(default=-1, compare=False)

    @property
    def is_end_tag(self) -> bool:
        return self.kind is Kind.SECTION and str(self.value).startswith("[/")

    @property
    def is_string_like(self) -> bool:
        return self.kind in (Kind.STRING, Kind.LINK) or (
            self.kind is Kind.TYPED and isinstance(self.value, str)
        )


def int_token(value: int) -> Token:
    return Token(Kind.INT, value)


def float_token(bits: int) -> Token:
    return Token(Kind.FLOAT, bits & 0xFFFFFFFF)


def section_token(tag: str) -> Token:
    return Token(Kind.SECTION, tag)


def string_token(text: str) -> Token:
    return Token(Kind.STRING, text)


def typed_token(code: int, value: int | str) -> Token:
    return Token(Kind.TYPED, value, code=code)


def link_token(link_id: int, key: str, text: str = "") -> Token:
    return Token(Kind.LINK, key, link_id=link_id, link_text=text)


def word_token(word: str) -> Token:
    return Token(Kind.WORD, word)


# ------------------------------------------------------------------------------------------------ floats

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


@functools.lru_cache(maxsize=1 << 16)
def format_float32(bits: int) -> str | None:
    """Shortest decimal text that reads back to these float32 bits, always with a `.`; None for inf/NaN.

    Cached: game data repeats a small set of values (rates, scales, 0.5, 1.0), and the shortest-digits search
    below was the largest cost of decompiling a script.

    Positional for exponents -7..20 (`0.1`, `8000.0`), else scientific with a mantissa dot (`3.4e+38`,
    `1.0e-10`). Reading back goes text → double → float32, the same path `parse_float32` uses.
    """
    raw = _U32.pack(bits & 0xFFFFFFFF)
    value = _F32.unpack(raw)[0]
    if math.isinf(value) or math.isnan(value):
        return None
    for digits in range(1, 10):
        sci = f"{value:.{digits - 1}e}"
        if _F32.pack(float(sci)) == raw:
            break
    mant, _, exp_text = sci.partition("e")
    exp = int(exp_text)
    neg = mant.startswith("-")
    ds = mant.lstrip("-").replace(".", "").rstrip("0") or "0"
    if -7 <= exp <= 20:
        if exp >= 0:
            ip = (ds[: exp + 1]).ljust(exp + 1, "0")
            fp = ds[exp + 1 :] or "0"
        else:
            ip = "0"
            fp = "0" * (-exp - 1) + ds
        text = f"{ip}.{fp}"
    else:
        text = f"{ds[0]}.{ds[1:] or '0'}e{'+' if exp >= 0 else '-'}{abs(exp):02d}"
    return "-" + text if neg else text


@functools.lru_cache(maxsize=1 << 16)
def parse_float32(text: str) -> int:
    """float32 bits of decimal `text` (via double, like `format_float32`); ValueError when out of range.

    Cached like `format_float32`, for the same reason: a compile meets the same few float texts again and
    again (classic-200k's 4,902 price-raised equipment texts: 220,798 floats, 10,120 distinct)."""
    try:
        return _U32.unpack(_F32.pack(float(text)))[0]
    except OverflowError as exc:
        raise ValueError(f"{text} is outside the float32 range") from exc


# ------------------------------------------------------------------------------------------------ lexer

_STR = r"(?:[^`]++|``)*+"  # possessive: linear time even on an unterminated string (fuzzed)
_TOKENS = (  # one alternative per token form; `lex` reads the groups by name
    rf"`(?P<str>{_STR})`"
    r"|(?P<sec>\[[^\]\r\n]*+\])"
    rf"|\{{(?P<code>\d{{1,3}})=(?:(?P<tint>[-+]?\d{{1,12}})|`(?P<tstr>{_STR})`)\}}"
    rf"|<(?P<lid>\d{{1,10}})::(?P<lkey>[^`\r\n]*+)`(?P<ltext>{_STR})`>"
    r"|(?P<flt>[-+]?(?:\d++\.\d*+|\.\d++)(?:[eE][-+]?\d++)?)(?=[\s`]|\Z)"  # a word ends at a backtick too
    r"|(?P<int>[-+]?\d++)(?=[\s`]|\Z)"
    r"|(?P<word>[^\s`\[\]{}<>#][^\s`]*+)"
    r"|(?P<bad>.)"
)
TOKEN_RE = re.compile(r"(?P<ws>\s+)|(?P<comment>\#[^\n]*+)|" + _TOKENS, re.S)
_LEX_RE = re.compile(r"(?P<skip>(?:\s++|\#[^\n]*+)*+)(?:" + _TOKENS + r"|(?P<end>\Z))", re.S)
"""`lex`'s pattern: the whitespace and comments before a token go with it (one match per token, not two),
`skip`'s end is the token's offset, and `end` is the whitespace after the last one. A token never starts
with whitespace or `#`, so this reads the same tokens as `TOKEN_RE` does one match at a time."""
_WORD_RE = re.compile(r"[^\s`\[\]{}<>#][^\s`]*")
_NUMBER_RE = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_SECTION_RE = re.compile(r"\[[^\]\r\n]*\]")
_LINK_KEY_RE = re.compile(r"[^`\r\n]*")


def line_col(text: str, pos: int) -> tuple[int, int]:
    """1-based line and column of offset `pos` in `text`."""
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def syntax_error(text: str, pos: int, message: str) -> BridgeError:
    """A `SCRIPT_SYNTAX` error at offset `pos` of `text`, with line and column."""
    line, col = line_col(text, pos)
    return BridgeError(
        ErrorCode.SCRIPT_SYNTAX,
        f"line {line}, column {col}: {message}",
        data={"line": line, "column": col, "offset": pos},
    )


def _check_int(text: str, pos: int, raw: str) -> int:
    value = int(raw)
    if not INT32_MIN <= value <= INT32_MAX:
        raise syntax_error(text, pos, f"integer {raw} is outside the signed 32-bit range")
    return value


_BAD_HINTS = {
    "`": "string is not closed with a backtick",
    "[": "section tag is not closed with ']' on the same line",
    "{": "typed token must look like {N=123} or {N=`text`}",
    "<": "string link must look like <id::key`text`>",
}


def lex(text: str) -> list[Token]:
    """Split script text into tokens; `SCRIPT_SYNTAX` (with line/column) on anything malformed.

    The hot loop of every compile (a script run's plan compiles thousands of texts): one match per token,
    the common kinds first, positional `Token` arguments."""
    out: list[Token] = []
    append = out.append
    k_int, k_float, k_section, k_string = Kind.INT, Kind.FLOAT, Kind.SECTION, Kind.STRING
    for m in _LEX_RE.finditer(text):
        group = m.lastgroup
        if group == "int":
            raw = m.group("int")
            value = int(raw)
            if not INT32_MIN <= value <= INT32_MAX:
                _check_int(text, m.end("skip"), raw)
            append(Token(k_int, value, -1, 0, "", m.end("skip")))
        elif group == "flt":
            try:
                bits = parse_float32(m.group("flt"))
            except ValueError as exc:
                raise syntax_error(text, m.end("skip"), str(exc)) from None
            append(Token(k_float, bits, -1, 0, "", m.end("skip")))
        elif group == "sec":
            append(Token(k_section, m.group("sec"), -1, 0, "", m.end("skip")))
        elif group == "str":
            raw = m.group("str")
            append(Token(k_string, raw.replace("``", "`") if "`" in raw else raw, -1, 0, "", m.end("skip")))
        elif group == "end":
            continue
        elif group == "word":
            append(Token(Kind.WORD, m.group("word"), -1, 0, "", m.end("skip")))
        elif m.group("code") is not None:
            pos = m.end("skip")
            code = int(m.group("code"))
            if code > 255:
                raise syntax_error(text, pos, f"token type {code} is outside 0..255")
            tint = m.group("tint")
            typed: int | str = (
                _check_int(text, pos, tint) if tint is not None else m.group("tstr").replace("``", "`")
            )
            append(Token(Kind.TYPED, typed, code, 0, "", pos))
        elif m.group("lid") is not None:
            pos = m.end("skip")
            lid = int(m.group("lid"))
            if lid > INT32_MAX:
                raise syntax_error(text, pos, f"string link id {lid} is outside the signed 32-bit range")
            append(Token(Kind.LINK, m.group("lkey"), -1, lid, m.group("ltext").replace("``", "`"), pos))
        else:
            pos = m.end("skip")
            ch = m.group("bad")
            raise syntax_error(text, pos, _BAD_HINTS.get(ch, f"unexpected character {ch!r}"))
    return out


# ------------------------------------------------------------------------------------------------ checks


def is_section_text(tag: str) -> bool:
    """True when `tag` prints as a `[...]` section token and lexes back unchanged."""
    return _SECTION_RE.fullmatch(tag) is not None


def is_link_key(key: str) -> bool:
    return _LINK_KEY_RE.fullmatch(key) is not None


def is_word(word: str) -> bool:
    """True when `word` prints bare and lexes back as the same WORD (not a number, no specials)."""
    return _WORD_RE.fullmatch(word) is not None and _NUMBER_RE.fullmatch(word) is None


def quote(text: str) -> str:
    return "`" + text.replace("`", "``") + "`"


# ------------------------------------------------------------------------------------------------ printer


def token_text(tok: Token) -> str:
    """Canonical text of one token (what `lex` reads back to an equal token)."""
    kind = tok.kind
    if kind is Kind.INT:
        return str(tok.value)
    if kind is Kind.STRING:
        return quote(str(tok.value))
    if kind is Kind.SECTION or kind is Kind.WORD:
        return str(tok.value)
    if kind is Kind.FLOAT:
        text = format_float32(int(tok.value))
        if text is None:
            raise ValueError("inf/NaN floats have no decimal text; print them as a typed token")
        return text
    if kind is Kind.TYPED:
        value = tok.value
        return f"{{{tok.code}={quote(value) if isinstance(value, str) else value}}}"
    return f"<{tok.link_id}::{tok.value}{quote(tok.link_text)}>"


def value_piece(tok: Token) -> tuple[str, bool]:
    """(text, starts a new line) of a value token as `print_tokens` lays it out: its text, and whether it is
    string-like (without `record_width`, a string-like value after another on its line starts a new one)."""
    kind = tok.kind
    if kind is Kind.INT:
        return str(tok.value), False
    if kind is Kind.STRING:
        return quote(str(tok.value)), True
    if kind is Kind.FLOAT:
        text = format_float32(int(tok.value))
        if text is not None:
            return text, False
    return token_text(tok), tok.is_string_like


def values_block(tokens: Sequence[Token], indent: int) -> str:
    """The lines `print_tokens` (without `record_width`) gives a run of value tokens between two tags whose
    values are indented by `indent` TABs, joined by newlines; "" for no tokens."""
    if not tokens:
        return ""
    ind = "\t" * indent
    brk = "\n" + ind
    text, _ = value_piece(tokens[0])
    out = [ind, text]
    for tok in tokens[1:]:
        text, new_line = value_piece(tok)
        out.append(brk if new_line else "\t")
        out.append(text)
    return "".join(out)


def container_indexes(tokens: Sequence[Token]) -> set[int]:
    """Indexes of the section tags that have a matching end tag (they nest their content), and of those end
    tags. An end tag closes the nearest open tag of its name; tags opened after it and still open are not
    containers. The one reading of nesting: the printer, the annotation engine and the script model use it."""
    at = [i for i, tok in enumerate(tokens) if tok.kind is Kind.SECTION]
    return {at[j] for j in container_tags([str(tokens[i].value) for i in at])}


def container_tags(tags: Sequence[str]) -> set[int]:
    """`container_indexes` over the tag texts alone (indexes into `tags`)."""
    stack: list[tuple[str, int]] = []
    found: set[int] = set()
    for i, tag in enumerate(tags):
        if tag.startswith("[/"):
            name = "[" + tag[2:]
            for j in range(len(stack) - 1, -1, -1):
                if stack[j][0] == name:
                    found.add(stack[j][1])
                    found.add(i)
                    del stack[j:]
                    break
        else:
            stack.append((tag, i))
    return found


def print_tokens(
    tokens: Sequence[Token],
    *,
    header: str | None = None,
    record_width: int | None = None,
) -> str:
    """Lay tokens out as editable text.

    Layout (docs/pvf-script-text.md "Layout"): a top-level section tag starts after a blank line; a tag
    with a matching end tag indents what lies between by one TAB; values go on the lines under their tag,
    one TAB deeper, TAB-separated, each string-like value starting a new line. `record_width`: put exactly
    that many values per line instead (registries: `id TAB `path``). `header`: a first line (a `#` comment).
    """
    lines: list[str] = [header] if header is not None else []
    containers = container_indexes(tokens)
    depth = 0
    value_indent = 0
    cur: list[str] = []
    # The kinds as locals: an enum member read through its class costs a lookup on every token.
    section, integer, string, floating = Kind.SECTION, Kind.INT, Kind.STRING, Kind.FLOAT
    for i, tok in enumerate(tokens):
        kind = tok.kind
        if kind is section:
            if cur:
                lines.append("\t" * value_indent + "\t".join(cur))
                cur = []
            closes = i in containers and str(tok.value).startswith("[/")
            if closes:
                depth -= 1
            if depth == 0 and lines:
                lines.append("")
            lines.append("\t" * depth + str(tok.value))
            if i in containers and not closes:
                depth += 1
                value_indent = depth
            else:
                value_indent = depth if closes else depth + 1
            continue
        # The common kinds inline (this loop is most of decompiling); the rest through token_text.
        if kind is integer:
            text, string_like = str(tok.value), False
        elif kind is string:
            text, string_like = quote(str(tok.value)), True
        elif kind is floating and (text := format_float32(int(tok.value))) is not None:  # type: ignore[assignment]
            string_like = False
        else:
            text, string_like = token_text(tok), tok.is_string_like
        if cur and (len(cur) == record_width if record_width else string_like):
            lines.append("\t" * value_indent + "\t".join(cur))
            cur = []
        cur.append(text)
    if cur:
        lines.append("\t" * value_indent + "\t".join(cur))
    return "\n".join(lines) + "\n"
