"""Edit one member of a JSON (or JSON-with-comments) config file in place, leaving every other byte as it was.

Client configs are hand-edited and commented (VS Code's `mcp.json` is JSONC), so parsing and re-dumping would
reorder keys and drop comments. Instead we find the span of the object we change by scanning the text (strings,
`//` and `/* */` comments, nesting) and splice only that member.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any


class JsonEditError(ValueError):
    """The file is not JSON (or JSONC) we can edit safely."""


def _skip_ws(text: str, i: int) -> int:
    n = len(text)
    while i < n:
        c = text[i]
        if c in " \t\r\n":
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j + 1
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            if j < 0:
                raise JsonEditError("unterminated comment")
            i = j + 2
        else:
            break
    return i


def _string_end(text: str, i: int) -> int:
    """Index just past the string starting at `i` (a quote)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == '"':
            return j + 1
        j += 1
    raise JsonEditError("unterminated string")


def _value_end(text: str, i: int) -> int:
    """Index just past the JSON value starting at `i`."""
    c = text[i]
    if c == '"':
        return _string_end(text, i)
    if c in "{[":
        depth = 0
        j = i
        n = len(text)
        while j < n:
            ch = text[j]
            if ch == '"':
                j = _string_end(text, j)
                continue
            if text.startswith("//", j) or text.startswith("/*", j):
                j = _skip_ws(text, j)
                continue
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise JsonEditError("unbalanced brackets")
    match = re.compile(r"-?[0-9.eE+\-]+|true|false|null").match(text, i)
    if not match:
        raise JsonEditError(f"unexpected character {c!r} at offset {i}")
    return match.end()


@dataclass
class Member:
    key: str
    start: int
    """Offset of the key's opening quote."""
    value_start: int
    value_end: int


def members(text: str, obj_start: int) -> tuple[list[Member], int]:
    """The members of the object whose `{` is at `obj_start`, and the offset of its `}`."""
    if text[obj_start] != "{":
        raise JsonEditError("expected an object")
    out: list[Member] = []
    i = _skip_ws(text, obj_start + 1)
    while True:
        if i >= len(text):
            raise JsonEditError("unterminated object")
        if text[i] == "}":
            return out, i
        if text[i] != '"':
            raise JsonEditError(f"expected a key at offset {i}")
        key_end = _string_end(text, i)
        key = json.loads(text[i:key_end])
        j = _skip_ws(text, key_end)
        if text[j] != ":":
            raise JsonEditError(f"expected ':' at offset {j}")
        v = _skip_ws(text, j + 1)
        v_end = _value_end(text, v)
        out.append(Member(key, i, v, v_end))
        i = _skip_ws(text, v_end)
        if i < len(text) and text[i] == ",":
            i = _skip_ws(text, i + 1)  # a trailing comma (JSONC) ends at the `}` check above


def _root(text: str) -> int:
    i = _skip_ws(text, 0)
    if i >= len(text) or text[i] != "{":
        raise JsonEditError("the file's top level is not an object")
    return i


def _line_indent(text: str, offset: int) -> str:
    start = text.rfind("\n", 0, offset) + 1
    return re.match(r"[ \t]*", text[start:]).group(0)  # type: ignore[union-attr]


def _unit(text: str) -> str:
    """The file's indentation step (default two spaces)."""
    match = re.search(r"\n([ \t]+)\S", text)
    return match.group(1) if match else "  "


def _dump(value: Any, indent: str, unit: str) -> str:
    raw = json.dumps(value, indent=len(unit) if unit.strip(" ") == "" else unit, ensure_ascii=False)
    return raw.replace("\n", "\n" + indent)


def get(text: str, path: list[str]) -> Any:
    """The value at `path` (None when absent)."""
    if not text.strip():
        return None
    obj = _root(text)
    for depth, key in enumerate(path):
        found = next((m for m in members(text, obj)[0] if m.key == key), None)
        if found is None:
            return None
        if depth == len(path) - 1:
            return _loads_jsonc(text[found.value_start : found.value_end])
        if text[found.value_start] != "{":
            return None
        obj = found.value_start
    return None


def _loads_jsonc(fragment: str) -> Any:
    """json.loads of a fragment that may hold comments and trailing commas.

    Comments and trailing commas become blanks of the same length (line ends kept), so an error's line and
    column are those of the person's file."""
    out, i, n = [], 0, len(fragment)
    while i < n:
        c = fragment[i]
        if c == '"':
            j = _string_end(fragment, i)
            out.append(fragment[i:j])
            i = j
        elif fragment.startswith("//", i) or fragment.startswith("/*", i):
            j = _skip_ws(fragment, i)
            out.append(re.sub(r"[^\r\n]", " ", fragment[i:j]))
            i = j
        elif c == ",":
            j = _skip_ws(fragment, i + 1)
            out.append(" " if j < n and fragment[j] in "}]" else c)
            i += 1
        else:
            out.append(c)
            i += 1
    return json.loads("".join(out))


def check(text: str, path: list[str]) -> None:
    """Raise `JsonEditError` (with the line and column) unless all of `text` is JSON a client can read, with each
    key of `path` at most once where it is looked up.

    Editing a file that does not parse would report success for a config the client cannot load; and of a key
    given twice, clients (JSON.parse) read only the last, so an entry put under the first would never be seen."""
    try:
        json.loads(text)  # plain JSON (~/.claude.json, many MB) at C speed; JSONC only when that fails
    except json.JSONDecodeError:
        try:
            _loads_jsonc(text)
        except json.JSONDecodeError as exc:
            raise JsonEditError(f"line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    obj = _root(text)
    for key in path:
        found = [m for m in members(text, obj)[0] if m.key == key]
        if len(found) > 1:
            line = text.count("\n", 0, found[-1].start) + 1
            raise JsonEditError(
                f"{key!r} is given twice (again on line {line}); clients read only the last one"
            )
        if not found or text[found[0].value_start] != "{":
            return
        obj = found[0].value_start


def set_member(text: str, parent: str, name: str, value: Any) -> str:
    """`text` with `{parent: {name: value}}` set: replaced if present, else added as the last member."""
    if not text.strip():
        return json.dumps({parent: {name: value}}, indent=2, ensure_ascii=False) + "\n"
    unit = _unit(text)
    root = _root(text)
    root_members, root_close = members(text, root)
    holder = next((m for m in root_members if m.key == parent), None)
    if holder is None:
        return _insert(text, root, root_members, root_close, parent, {name: value}, unit)
    if text[holder.value_start] != "{":
        raise JsonEditError(f"{parent!r} is not an object")
    inner, inner_close = members(text, holder.value_start)
    existing = next((m for m in inner if m.key == name), None)
    if existing is not None:
        indent = _line_indent(text, existing.start)
        return text[: existing.value_start] + _dump(value, indent, unit) + text[existing.value_end :]
    return _insert(text, holder.value_start, inner, inner_close, name, value, unit)


def _insert(text: str, obj: int, found: list[Member], close: int, key: str, value: Any, unit: str) -> str:
    if found:
        last = found[-1]
        indent = _line_indent(text, last.start)
        member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, indent, unit)}"
        # Right after the last value: a trailing comma and a comment on that line stay after our member.
        return text[: last.value_end] + ",\n" + indent + member + text[last.value_end :]
    outer = _line_indent(text, obj)
    indent = outer + unit
    member = f"{json.dumps(key, ensure_ascii=False)}: {_dump(value, indent, unit)}"
    return text[: obj + 1] + "\n" + indent + member + "\n" + outer + text[close:]


def _delete(text: str, obj: int, name: str) -> str:
    inner, close = members(text, obj)
    index = next((k for k, m in enumerate(inner) if m.key == name), None)
    if index is None:
        return text
    member = inner[index]
    if index + 1 < len(inner):
        # Our lines only: from the start of the member's line through its comma and the end of that line.
        start = text.rfind("\n", 0, member.start) + 1
        if text[start : member.start].strip(" \t"):
            start = member.start
        end = _skip_ws(text, member.value_end)
        end = end + 1 if text[end] == "," else member.value_end
        rest = re.match(r"[ \t]*\r?\n", text[end:])
        return text[:start] + text[end + (rest.end() if rest else 0) :]
    if index > 0:  # the last member: from the previous value's end, so a trailing comma stays
        return text[: inner[index - 1].value_end] + text[member.value_end :]
    return text[: obj + 1] + text[close:]  # the only member: an empty object


def delete_member(text: str, parent: str, name: str, *, drop_empty_parent: bool = False) -> str:
    """`text` without `parent.name`; also without `parent` when it is left empty and `drop_empty_parent`."""
    root = _root(text)
    holder = next((m for m in members(text, root)[0] if m.key == parent), None)
    if holder is None or text[holder.value_start] != "{":
        return text
    out = _delete(text, holder.value_start, name)
    if drop_empty_parent:
        holder = next((m for m in members(out, _root(out))[0] if m.key == parent), None)
        if holder is not None and not members(out, holder.value_start)[0]:
            out = _delete(out, _root(out), parent)
    return out
