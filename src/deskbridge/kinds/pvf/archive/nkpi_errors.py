"""Typed errors the nkpi readers raise: every failure names the offset and what was expected."""

from __future__ import annotations

from deskbridge.core.errors import BridgeError, ErrorCode


def corrupt(offset: int, expected: str, seen: str = "", **data: object) -> BridgeError:
    """A `PVF_CORRUPT` error at a byte offset of the archive (or of a payload, as the message says)."""
    what = f"nkpi archive damaged at offset {offset}: expected {expected}"
    if seen:
        what += f", found {seen}"
    return BridgeError(ErrorCode.PVF_CORRUPT, what, data={"offset": offset, "expected": expected, **data})


def unsupported(message: str, hint: str | None = None, **data: object) -> BridgeError:
    """An `UNSUPPORTED_VARIANT` error naming what was seen."""
    return BridgeError(ErrorCode.UNSUPPORTED_VARIANT, message, hint, data=dict(data))


def key_required(message: str, **data: object) -> BridgeError:
    """A `KEY_REQUIRED` error: the archive needs page keys from the game client."""
    return BridgeError(ErrorCode.KEY_REQUIRED, message, data=dict(data))
