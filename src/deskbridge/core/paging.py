"""The one cursor format of the project: opaque page cursors every kind's tools hand out and take back.

A cursor is the URL-safe base64 (no padding) of a compact JSON object: the position (`o`, or any keys a
tool needs) plus what it is bound to (a query fingerprint, a revision, a folder). MCP treats cursors as
opaque strings (MCP spec, "Pagination": "Clients MUST treat cursors as opaque tokens"), so the format may
change; what must not change is the rule for a cursor we cannot use:

* it never silently restarts at the first page (a client following `nextCursor` would read page 1 again
  and loop, or think it had read everything) — it is a `BridgeError(INVALID_ARGUMENT)`;
* the error's hint says how to restart: call the tool again without `cursor`.

A cursor that decodes but belongs to a *changed* workspace (another revision) is the tool's business:
it checks the state it gets back and raises `STALE_WORKSPACE` with its own restart hint.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from deskbridge.core.errors import BridgeError, ErrorCode

T = TypeVar("T")

CURSOR_MAX_CHARS = 4096
"""Longer strings are not cursors we issued (ours stay under a few hundred characters)."""


def restart_hint(tool: str | None) -> str:
    """How to start over after a bad cursor; names the tool when the caller knows it."""
    if tool:
        return f"Call {tool} again without cursor to start from the first page (or pass the nextCursor it returned)."
    return "Omit cursor to start from the first page, or pass the nextCursor the previous page returned."


def bad_cursor(tool: str | None, why: str) -> BridgeError:
    """The one error for a cursor that cannot be used: INVALID_ARGUMENT, with the restart hint."""
    return BridgeError(ErrorCode.INVALID_ARGUMENT, f"the cursor {why}", hint=restart_hint(tool))


def encode_cursor(state: Mapping[str, Any]) -> str:
    """An opaque cursor for `state` (a JSON-serialisable mapping)."""
    raw = json.dumps(dict(state), separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(
    cursor: str,
    *,
    tool: str | None = None,
    expect: Mapping[str, Any] | None = None,
    ints: Iterable[str] = (),
) -> dict[str, Any]:
    """The state inside `cursor`.

    `expect`: keys whose values must equal the given ones (the query, folder or plan the cursor was issued
    for) — else the cursor "belongs to another request". `ints`: keys that must be non-negative integers.
    Every failure is `bad_cursor(tool, …)`.
    """
    if not isinstance(cursor, str) or not cursor or len(cursor) > CURSOR_MAX_CHARS:
        raise bad_cursor(tool, "is not one this server issued")
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise bad_cursor(tool, f"{cursor[:40]!r} is not one this server issued") from None
    if not isinstance(data, dict):
        raise bad_cursor(tool, f"{cursor[:40]!r} is not one this server issued")
    for key, value in (expect or {}).items():
        if data.get(key) != value:
            raise bad_cursor(tool, "belongs to another request (other arguments than the page it came from)")
    for key in ints:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad_cursor(tool, f"{cursor[:40]!r} is not one this server issued")
    return data


def offset_of(
    cursor: str | None,
    *,
    tool: str | None = None,
    expect: Mapping[str, Any] | None = None,
    key: str = "o",
) -> int:
    """The offset a cursor of `offset_cursor` carries; 0 when no cursor was given."""
    if cursor is None or cursor == "":
        return 0
    return int(decode_cursor(cursor, tool=tool, expect=expect, ints=(key,))[key])


def offset_cursor(offset: int, bound: Mapping[str, Any] | None = None, *, key: str = "o") -> str:
    """A cursor for position `offset`, bound to `bound` (checked again by `offset_of(expect=bound)`)."""
    return encode_cursor({**(bound or {}), key: offset})


def page(
    items: Sequence[T],
    cursor: str | None,
    limit: int,
    *,
    tool: str | None = None,
    bound: Mapping[str, Any] | None = None,
) -> tuple[Sequence[T], str | None, int]:
    """`(items on this page, nextCursor or None, start offset)`; a cursor past the end is refused too."""
    start = offset_of(cursor, tool=tool, expect=bound)
    if start > len(items):
        raise bad_cursor(tool, f"points past the end ({start} > {len(items)} items)")
    chunk = items[start : start + limit]
    end = start + len(chunk)
    return chunk, (offset_cursor(end, bound) if end < len(items) else None), start
