"""Request checks shared by every HTTP route: Host and Origin validation, the MCP bearer token, the UI secret.

One ASGI middleware in front of the whole app, so no route can forget a check. Statuses follow the MCP spec
and the SDK: bad Host 421, bad Origin 403, missing or wrong credentials 401.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Final

from starlette.types import ASGIApp, Receive, Scope, Send

UI_COOKIE: Final = "deskbridge_ui"
UI_HEADER: Final = "x-deskbridge-ui"

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and 'localhost' — the only binds allowed without --allow-remote."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass
class SecurityPolicy:
    """What the middleware accepts. Built once by `serve` from the bind address and flags."""

    port: int
    mcp_token: str
    ui_secret: str
    extra_hosts: list[str] = field(default_factory=list)
    """Host names (without port) accepted besides loopback, e.g. the bound address with --allow-remote."""
    require_token: bool = True

    def allowed_hosts(self) -> set[str]:
        names = [*LOOPBACK_NAMES, *self.extra_hosts]
        return {f"{n}:{self.port}" for n in names} | set(names)

    def allowed_origins(self) -> set[str]:
        return {f"http://{n}:{self.port}" for n in (*LOOPBACK_NAMES, *self.extra_hosts)}


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


async def _reject(
    send: Send,
    status: int,
    code: str,
    message: str,
    hint: str,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, "hint": hint}}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *extra_headers,
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def ui_secret_from(scope: Scope) -> str | None:
    """The UI secret a browser request carries: our header, or the cookie set when the launch URL was opened."""
    header = _header(scope, UI_HEADER.encode())
    if header:
        return header
    cookie_header = _header(scope, b"cookie")
    if cookie_header:
        cookie = SimpleCookie()
        try:
            cookie.load(cookie_header)
        except Exception:
            return None
        if UI_COOKIE in cookie:
            return cookie[UI_COOKIE].value
    return None


class SecurityMiddleware:
    """Host/Origin on every request; bearer token on /mcp; UI secret on /api."""

    def __init__(self, app: ASGIApp, policy: SecurityPolicy) -> None:
        self.app = app
        self.policy = policy

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Surrounding spaces are not part of a header value (RFC 9110 §5.5). h11 strips them, httptools does not;
        # strip here so every check below and the MCP SDK's Mcp-Name/Mcp-Method match see the same value.
        headers = scope["headers"]
        if any(v[:1] in (b" ", b"\t") or v[-1:] in (b" ", b"\t") for _, v in headers):
            scope = {**scope, "headers": [(k, v.strip(b" \t")) for k, v in headers]}
        host = _header(scope, b"host")
        if host is None or host.lower() not in self.policy.allowed_hosts():
            await _reject(
                send,
                421,
                "BAD_HOST",
                f"Host header {host!r} is not accepted",
                f"Connect to http://127.0.0.1:{self.policy.port}/ (DNS-rebinding protection).",
            )
            return
        origin = _header(scope, b"origin")
        if origin is not None and origin.lower() not in self.policy.allowed_origins():
            await _reject(
                send,
                403,
                "BAD_ORIGIN",
                f"Origin {origin!r} is not accepted",
                "Only pages served by this deskbridge may call it.",
            )
            return
        path: str = scope.get("path", "")
        if path == "/mcp" or path.startswith("/mcp/"):
            if self.policy.require_token and not self._token_ok(scope):
                await _reject(
                    send,
                    401,
                    "UNAUTHORIZED",
                    "missing or wrong bearer token",
                    "Send 'Authorization: Bearer <token>'; `deskbridge token show` prints it.",
                    [(b"www-authenticate", b'Bearer realm="deskbridge"')],
                )
                return
        elif path.startswith("/api/"):
            secret = ui_secret_from(scope)
            if secret is None or not hmac.compare_digest(secret, self.policy.ui_secret):
                await _reject(
                    send,
                    401,
                    "UNAUTHORIZED",
                    "this browser session is not authorised",
                    "Open the URL that `deskbridge serve` printed (it carries the UI secret).",
                )
                return
        await self.app(scope, receive, send)

    def _token_ok(self, scope: Scope) -> bool:
        auth = _header(scope, b"authorization") or ""
        scheme, _, token = auth.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(token.strip(), self.policy.mcp_token)
