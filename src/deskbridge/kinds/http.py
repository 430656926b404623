"""JSON request and response shapes shared by every web route: the platform's API and each kind's own routes.

A business error is `{"error": {code, message, hint, data?}}` with the HTTP status its code maps to (conflicts —
stale, busy, pending — are 409); a request body is one JSON object of bounded size; a route that an element of the
page loads is an `ElementRoute`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode

BODY_MAX_BYTES: Final = limits.REQUEST_BODY_MAX_BYTES
"""Bytes of one JSON request body at most: the same limit as an MCP request (core.limits)."""

ARG_SHOWN_MAX_CHARS: Final = 40
"""Characters of a refused argument an error message repeats at most (a 5,000-digit `?limit=` is not echoed)."""

ERROR_STATUS: Final[dict[ErrorCode, int]] = {
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.ACCESS_DENIED: 403,
    ErrorCode.LIMIT_EXCEEDED: 413,
    ErrorCode.INTERNAL: 500,
    ErrorCode.NOT_READY: 503,
}
"""HTTP status of the codes that are not conflicts; every other code is 409."""


def error_response(error: BridgeError) -> JSONResponse:
    return JSONResponse({"error": error.to_dict()}, status_code=ERROR_STATUS.get(error.code, 409))


class ElementRoute(Route):
    """A route that an element of deskbridge's own page loads (`<img src>`), not only the page's fetches.

    `serves_elements` names the Fetch Metadata destinations (`Sec-Fetch-Dest`, w3c.github.io/webappsec-fetch-
    metadata) it answers besides `empty`; the platform's middleware (web/security.py) refuses every other one, for
    every /api route, in one place."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[..., Any],
        *,
        serves_elements: Iterable[str],
        methods: list[str] | None = None,
    ) -> None:
        super().__init__(path, endpoint, methods=methods)
        self.serves_elements = frozenset(serves_elements)


def int_arg(value: Any, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """`value` (a query parameter's text or a JSON body's number) as an int within [minimum, maximum], else
    INVALID_ARGUMENT saying which whole numbers are valid."""
    valid = (
        f"a whole number ≥ {minimum:,}"
        if maximum is None
        else f"a whole number from {minimum:,} to {maximum:,}"
    )
    shown = (
        repr(value) if len(repr(value)) <= ARG_SHOWN_MAX_CHARS else f"{repr(value)[:ARG_SHOWN_MAX_CHARS]}…"
    )
    if isinstance(value, bool):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{name} must be {valid}, got {shown}")
    try:
        number = int(value)  # over 4,300 digits is a ValueError too (sys.get_int_max_str_digits)
    except (TypeError, ValueError):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{name} must be {valid}, got {shown}") from None
    if number < minimum or (maximum is not None and number > maximum):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{name} must be {valid}, got {shown}")
    return number


async def json_body(request: Request, *, max_bytes: int = BODY_MAX_BYTES) -> dict[str, Any]:
    """The body as a JSON object (`{}` when empty); too large (over `max_bytes`), not JSON or not an object is
    INVALID_ARGUMENT / LIMIT_EXCEEDED."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():  # never more than the limit in memory, whatever the client sends
        size += len(chunk)
        if size > max_bytes:
            raise _too_large(max_bytes)
        parts.append(chunk)
    raw = b"".join(parts)
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the request body is not JSON") from exc
    if not isinstance(body, dict):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the request body must be a JSON object")
    return body


def _too_large(limit: int) -> BridgeError:
    return BridgeError(
        ErrorCode.LIMIT_EXCEEDED,
        f"the request body is over the {limit:,}-byte ({limit // limits.MIB} MiB) limit",
        hint="Send less in one request.",
        data={"limit": limit},
    )
