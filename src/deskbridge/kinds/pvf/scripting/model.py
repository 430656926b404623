"""The parsed-document model of `.pvf.js` scripts: sections and typed values over the script text codec.

A document is the token list of `script.text.lex` (the same dialect `pvf_read_file` shows) arranged as a
tree: a section is a tag token, the value tokens that follow it up to the next tag, and — when a matching end
tag exists (`[if equip]` … `[/if equip]`) — the child sections in between. `tokens()` lays the tree back out
as the identical token list, so an untouched document prints to the text it was read from (tested), and a
changed one differs only where the script changed it.

Values keep their token type exactly (docs/pvf-script-text.md): an int stays an int, a float stays a float32
(`8000.0`), a string link `<id::key>` is never flattened to a plain string. JSON forms exchanged with the
script (see `api.d.ts`): int → number, string → string, float → `{type: "float", value}`, link →
`{type: "link", id, key, text}`, typed → `{type: "typed", code, value}`, word → `{type: "word", value}`.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.script.text import (
    INT32_MAX,
    INT32_MIN,
    Kind,
    Token,
    container_indexes,
    float_token,
    int_token,
    is_link_key,
    is_section_text,
    is_word,
    link_token,
    print_tokens,
    section_token,
    string_token,
    typed_token,
    word_token,
)

_F32 = struct.Struct("<f")
_U32 = struct.Struct("<I")


def _bad(message: str, hint: str | None = None) -> BridgeError:
    return BridgeError(ErrorCode.INVALID_ARGUMENT, message, hint)


# --------------------------------------------------------------------------------------------- values


def float_value(bits: int) -> float:
    value = _F32.unpack(_U32.pack(bits & 0xFFFFFFFF))[0]
    return float(value)


def float_bits(value: float) -> int:
    if not math.isfinite(value):
        raise _bad(f"{value} is not a finite number")
    try:
        packed = _F32.pack(value)
    except OverflowError:
        raise _bad(f"{value} does not fit a float32") from None
    return int(_U32.unpack(packed)[0])


def to_json(tok: Token) -> Any:
    """A value token as the script sees it (see the module docstring)."""
    k = tok.kind
    if k is Kind.INT:
        return tok.value
    if k is Kind.STRING:
        return tok.value
    if k is Kind.FLOAT:
        return {"type": "float", "value": float_value(int(tok.value))}
    if k is Kind.LINK:
        return {"type": "link", "id": tok.link_id, "key": tok.value, "text": tok.link_text}
    if k is Kind.TYPED:
        return {"type": "typed", "code": tok.code, "value": tok.value}
    if k is Kind.WORD:
        return {"type": "word", "value": tok.value}
    return {"type": "section", "value": tok.value}


def plain(tok: Token) -> Any:
    """`getValue`: the primitive — numbers as numbers, strings and links as their text."""
    if tok.kind is Kind.FLOAT:
        return float_value(int(tok.value))
    if tok.kind is Kind.LINK:
        return tok.link_text
    return tok.value


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or float(value) != int(value):
        raise _bad(f"{value!r} is not an integer", "Pass {type: 'float', value} to write a float.")
    n = int(value)
    if not INT32_MIN <= n <= INT32_MAX:
        raise _bad(f"{n} does not fit a signed 32-bit int")
    return n


def from_json(value: Any, old: Token | None = None) -> Token:
    """A script value → token. A bare number takes the slot's type (int stays int, float stays float); a
    bare string over a string link is refused (links are never flattened silently)."""
    if isinstance(value, bool) or value is None:
        raise _bad(f"{value!r} is not a PVF value", "Use a number, a string or a typed value object.")
    if isinstance(value, int | float):
        if old is not None and old.kind is Kind.FLOAT:
            return float_token(float_bits(float(value)))
        if old is not None and old.kind is Kind.INT:
            if float(value) != int(value):
                raise _bad(
                    f"{value} is not an integer and this value is an int",
                    "Keep ints integral, or pass {type: 'float', value} to change the type on purpose.",
                )
            return int_token(_int(value))
        return int_token(_int(value)) if float(value) == int(value) else float_token(float_bits(float(value)))
    if isinstance(value, str):
        if old is not None and old.kind is Kind.LINK:
            raise _bad(
                "this value is a string link; a plain string would flatten it",
                "Edit the linked .str entry instead, pass {type: 'link', id, key}, or use setStrValue to "
                "replace the link by a plain string on purpose.",
            )
        return string_token(value)
    if isinstance(value, dict):
        kind = value.get("type")
        v = value.get("value")
        if kind == "int":
            return int_token(_int(v))
        if kind == "float":
            if isinstance(v, bool) or not isinstance(v, int | float):
                raise _bad("a float value needs a numeric value")
            return float_token(float_bits(float(v)))
        if kind in ("string", "quoted"):
            if not isinstance(v, str):
                raise _bad("a string value needs a string value")
            return string_token(v)
        if kind == "link":
            lid, key = value.get("id"), value.get("key")
            if isinstance(lid, bool) or not isinstance(lid, int) or not 0 <= lid <= INT32_MAX:
                raise _bad("a link needs an integer id (the n_string.lst table)")
            if not isinstance(key, str) or not is_link_key(key):
                raise _bad(f"{key!r} is not a link key")
            return link_token(lid, key, str(value.get("text") or ""))
        if kind == "typed" or (isinstance(kind, str) and kind.startswith("block") and kind[5:].isdigit()):
            code = value.get("code") if kind == "typed" else int(kind[5:])
            if isinstance(code, bool) or not isinstance(code, int) or not 0 <= code <= 255:
                raise _bad("a typed value needs a code from 0 to 255")
            if isinstance(v, str):
                return typed_token(code, v)
            return typed_token(code, _int(v))
        if kind == "word":
            if not isinstance(v, str) or not is_word(v):
                raise _bad(f"{v!r} is not a bare word")
            return word_token(v)
        raise _bad(f"unknown value type {kind!r}", "pvf_script_help topic 'types' lists the value types.")
    raise _bad(f"{type(value).__name__} is not a PVF value")


# --------------------------------------------------------------------------------------------- the tree


@dataclass(eq=False)
class Section:
    name: str
    values: list[Token] = field(default_factory=list)
    children: list[Section] = field(default_factory=list)
    has_end: bool = False
    after_end: list[Token] = field(default_factory=list)
    """Values that follow the end tag (before the next tag); kept so the layout round-trips."""
    parent: Section | None = None
    end_tag: str = ""

    def tag(self) -> str:
        return f"[{self.name}]"

    def path(self) -> str:
        parts = []
        node: Section | None = self
        while node is not None and node.parent is not None:
            parts.append(node.name)
            node = node.parent
        return "/".join(reversed(parts))


class Document:
    """One parsed script; see the module docstring."""

    def __init__(self, tokens: list[Token], *, header: str | None, record_width: int | None) -> None:
        self.header = header
        self.record_width = record_width
        self.root = Section("")
        self.warnings: list[str] = []
        self.source_tokens: list[Token] | None = None
        self._build(tokens)

    def _build(self, tokens: list[Token]) -> None:
        matched = container_indexes(tokens)
        stack = [self.root]
        current: list[Token] = self.root.values
        # Values run between tags: take each run as one slice (most tokens are values).
        tags = [i for i, tok in enumerate(tokens) if tok.kind is Kind.SECTION]
        tags.append(len(tokens))
        prev = 0
        for i in tags:
            current.extend(tokens[prev:i])
            prev = i + 1
            if i == len(tokens):
                break
            tok = tokens[i]
            tag = str(tok.value)
            if tag.startswith("[/") and i in matched:
                name = "[" + tag[2:]
                while len(stack) > 1:
                    node = stack.pop()
                    if node.tag() == name:
                        node.end_tag = tag
                        current = node.after_end
                        break
                continue
            if tag.startswith("[/") or not tag.startswith("[") or not tag.endswith("]"):
                # An unmatched end tag or an odd tag: a section of its own name, so nothing is lost.
                node = Section(tag[1:-1] if tag.startswith("[") and tag.endswith("]") else tag)
                node.end_tag = ""
                node.parent = stack[-1]
                node.raw_tag = tag  # type: ignore[attr-defined]
                stack[-1].children.append(node)
                current = node.values
                continue
            node = Section(tag[1:-1], has_end=i in matched, parent=stack[-1])
            stack[-1].children.append(node)
            current = node.values
            if node.has_end:
                stack.append(node)

    # -------------------------------------------------------------------------------------------- output

    def tokens(self) -> list[Token]:
        out: list[Token] = list(self.root.values)
        for c in self.root.children:
            _emit(c, out)
        return out

    def text(self) -> str:
        return print_tokens(self.tokens(), header=self.header, record_width=self.record_width)

    # -------------------------------------------------------------------------------------------- lookup

    def find(self, path: str) -> list[Section]:
        parts = [p for p in str(path).strip("/").split("/") if p]
        if not parts:
            raise _bad("a section path is empty", "Name the section without brackets, e.g. 'price'.")
        level = [self.root]
        for depth, part in enumerate(parts):
            want = part.strip("[]").lower()
            nxt = []
            for node in level:
                nxt.extend(c for c in node.children if c.name.lower() == want)
            level = nxt
            if not level and depth < len(parts) - 1:
                return []
        return level

    def section(self, path: str, occurrence: int | None, *, touch: bool = False) -> Section | None:
        found = self.find(path)
        if occurrence is None:
            if touch and len(found) > 1:
                self.warn(f"[{path}] occurs {len(found)} times; the first was used (pass occurrence)")
            occurrence = 0
        if not isinstance(occurrence, int) or isinstance(occurrence, bool) or occurrence < 0:
            raise _bad("occurrence counts from 0")
        return found[occurrence] if occurrence < len(found) else None

    def warn(self, message: str) -> None:
        if message not in self.warnings and len(self.warnings) < 200:
            self.warnings.append(message)

    def create(self, path: str, end_tag: bool) -> Section:
        parts = [p.strip("[]") for p in str(path).strip("/").split("/") if p]
        parent = self.root
        for part in parts[:-1]:
            hit = [c for c in parent.children if c.name.lower() == part.lower()]
            if hit:
                parent = hit[0]
            else:
                node = Section(part, has_end=True, parent=parent)
                parent.children.append(node)
                parent = node
        return append_section(parent, parts[-1], [], end_tag)


def _emit(node: Section, out: list[Token]) -> None:
    raw = getattr(node, "raw_tag", None)
    if raw is not None:
        out.append(section_token(raw))
        out.extend(node.values)
        return
    out.append(section_token(node.tag()))
    out.extend(node.values)
    for c in node.children:
        _emit(c, out)
    if node.has_end:
        out.append(section_token(node.end_tag or f"[/{node.name}]"))
        out.extend(node.after_end)


def append_section(parent: Section, name: str, values: list[Token], end_tag: bool) -> Section:
    name = str(name).strip()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if not name or name.startswith("/") or not is_section_text(f"[{name}]"):
        raise _bad(f"{name!r} is not a section name")
    if parent.parent is not None and not parent.has_end:
        raise _bad(
            f"[{parent.name}] has no end tag, so it cannot hold sections",
            "Append to the document, or to a section with an end tag.",
        )
    node = Section(name, values=list(values), has_end=bool(end_tag), parent=parent)
    parent.children.append(node)
    return node


def walk(node: Section) -> Iterator[Section]:
    for c in node.children:
        yield c
        yield from walk(c)
