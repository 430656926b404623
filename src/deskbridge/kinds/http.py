"""JSON request and response shapes shared by every web route: the platform's API and each kind's own routes.

A business error is `{"error": {code, message, hint, data?}}` with the HTTP status its code maps to (conflicts —
stale, busy, pending — are 409); a request body is one JSON object of bounded size.
"""

from __future__ import annotations

import json
from typing import Any, Final

from starlette.requests import Request
from starlette.responses import JSONResponse

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode

BODY_MAX_BYTES: Final = limits.REQUEST_BODY_MAX_BYTES
"""Bytes of one JSON request body at most: the same limit as an MCP request (core.limits)."""

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


def foreign_destination(request: Request, allowed: tuple[str, ...] = ("empty",)) -> JSONResponse | None:
    """The refusal of a browser request made for an element of a page (Fetch Metadata `Sec-Fetch-Dest`,
    w3c.github.io/webappsec-fetch-metadata) that the route is not for, else None.

    Our own pages call the API with fetch and EventSource (`empty`). A document's `<img src="http://127.0.0.1:PORT/
    api/...">` in the markdown preview is same-origin and carries the session cookie, so only the destination tells
    it apart: such images registered phantom editors (every save then failed with UI_NOT_READY) and held the
    browser's few connections to the server. Clients that are not browsers send no such header."""
    dest = request.headers.get("sec-fetch-dest")
    if dest is None or dest in allowed:
        return None
    return error_response(
        BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"this route answers deskbridge's own page, not an {dest!r} element of a page",
            hint="Nothing to do: a document's image, frame or link cannot call it; the page itself does.",
        )
    )


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
