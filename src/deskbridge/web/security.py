"""Request checks shared by every HTTP route: Host and Origin validation, the MCP bearer token, the UI secret.

One ASGI middleware in front of the whole app, so no route can forget a check. Statuses follow the MCP spec
and the SDK: bad Host 421, bad Origin 403, missing or wrong credentials 401. The same middleware stamps every
response, rejections included, with `Content-Security-Policy: frame-ancestors 'none'` and `X-Frame-Options: DENY`,
so no page (another loopback port included) can frame the UI and trick a click on an approval.

/api answers deskbridge's own pages and clients that are not browsers, nothing else (`fetch_metadata_refusal`):
a browser says what a request is for (Fetch Metadata, w3c.github.io/webappsec-fetch-metadata), and only the page's
fetch and EventSource (`Sec-Fetch-Dest: empty`), a request with no Fetch Metadata at all (curl, the MCP bridge) and
the destinations a route declares it serves (`kinds.http.ElementRoute`: the markdown pictures, `image`) get through.

The browser's way in (docs/security.md): `serve` hands the browser a one-time login code (`LoginCodes`, valid
`LOGIN_CODE_TTL_S`, single use) in an owner-only file; `GET /?k=CODE` exchanges it for the per-launch UI secret in
a strict HttpOnly cookie. The UI secret itself never appears on a command line or in a URL, and only a valid code
sets the cookie: `/?k=anything-else` leaves a session as it was.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from typing import Final

from starlette.routing import BaseRoute, Match, Mount
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from deskbridge.core import limits
from deskbridge.integrations.endpoints import HEALTH_PATH

UI_COOKIE: Final = "deskbridge_ui"
UI_HEADER: Final = "x-deskbridge-ui"

LOOPBACK_NAMES: Final = ("127.0.0.1", "localhost", "[::1]")

FRAME_DENY_HEADERS: Final = (
    (b"content-security-policy", b"frame-ancestors 'none'"),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
)
"""Sent on every response. A route's own Content-Security-Policy is kept beside ours (browsers enforce both)."""


FETCH_METADATA_HEADERS: Final = (b"sec-fetch-site", b"sec-fetch-mode", b"sec-fetch-dest", b"sec-fetch-user")
"""The request headers of Fetch Metadata; a browser that sends one sends `Sec-Fetch-Dest` with it."""

OWN_FETCH_DESTINATION: Final = "empty"
"""`Sec-Fetch-Dest` of fetch(), XMLHttpRequest and EventSource: how deskbridge's own pages call /api."""


HEALTH_CHALLENGE_HEADER: Final = "x-deskbridge-challenge"
"""A `GET /mcp/health` carrying this header and no credentials is answered with `health_proof` alone."""
HEALTH_CHALLENGE_CHARS: Final = frozenset("0123456789abcdef")


def health_proof(token: str, challenge: str, port: int) -> str:
    """What only a holder of the MCP token can answer to `challenge` on `port`:
    HMAC-SHA256(token, label + port + challenge).

    `deskbridge mcp --project` checks it before it sends the token anywhere: the port in an endpoint file left by a
    server that crashed (or a reboot, after which its pid belongs to another process) may be held by another local
    user's program, which would otherwise receive `Authorization: Bearer <token>` with the first health check.
    The port is part of the proof because every `serve` of this user holds the same token: without it, that program
    could pass the challenge on to another live `serve` (no credentials needed) and hand its answer back."""
    message = b"deskbridge-health-v2\0" + str(port).encode("ascii") + b"\0" + challenge.encode("ascii")
    return hmac.new(token.encode("utf-8"), message, hashlib.sha256).hexdigest()


def valid_challenge(challenge: str | None) -> bool:
    return challenge is not None and 32 <= len(challenge) <= 128 and set(challenge) <= HEALTH_CHALLENGE_CHARS


def same_secret(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a credential from a header with the expected one.

    Header values arrive as latin-1 text, so a non-ASCII byte is a valid character there; `hmac.compare_digest`
    refuses non-ASCII *str* (TypeError, which was a 500 with a traceback). Compare the raw bytes instead.
    """
    if given is None:
        return False
    return hmac.compare_digest(given.encode("latin-1", "replace"), expected.encode("utf-8"))


class LoginCodes:
    """One-time login codes: each opens one browser session, once, within `ttl_s` seconds, and is then forgotten.

    Thread-safe (`serve` issues the first codes before the event loop runs; `deskbridge open` asks the running
    server for more through the API).
    """

    def __init__(
        self,
        ttl_s: float = limits.LOGIN_CODE_TTL_S,
        max_outstanding: int = limits.LOGIN_CODES_MAX,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_outstanding = max_outstanding
        self.clock = clock
        self._codes: dict[bytes, float] = {}
        self._lock = threading.Lock()

    def issue(self) -> str:
        code = secrets.token_urlsafe(24)
        with self._lock:
            self._expire()
            while len(self._codes) >= self.max_outstanding:
                self._codes.pop(next(iter(self._codes)))
            self._codes[code.encode()] = self.clock() + self.ttl_s
        return code

    def redeem(self, code: str | None) -> bool:
        """True once for a code that was issued and has not expired; a redeemed code is forgotten at once."""
        if not code:
            return False
        given = code.encode("utf-8", "replace")
        with self._lock:
            self._expire()
            match = None
            for known in self._codes:  # constant time per candidate; there are at most `max_outstanding`
                if hmac.compare_digest(known, given):
                    match = known
            if match is None:
                return False
            del self._codes[match]
            return True

    def outstanding(self) -> int:
        with self._lock:
            self._expire()
            return len(self._codes)

    def _expire(self) -> None:
        now = self.clock()
        for known in [k for k, until in self._codes.items() if until <= now]:
            del self._codes[known]


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
    login_codes: LoginCodes = field(default_factory=LoginCodes)
    """One-time codes that open a browser session (see the module docstring)."""

    def ui_authorised(self, scope: Scope) -> bool:
        """True when the request carries this launch's UI secret (header or cookie)."""
        return same_secret(ui_secret_from(scope), self.ui_secret)

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


def served_destinations(routes: Sequence[BaseRoute], scope: Scope) -> frozenset[str]:
    """The `Sec-Fetch-Dest` values, besides `empty`, that the route answering `scope` serves (an `ElementRoute`'s
    `serves_elements`; none for any other route). Matches as Starlette's router does: the first full match, else
    the first partial one (the right path, another method), descending into mounts."""
    partial: BaseRoute | None = None
    partial_scope: Scope = {}
    for route in routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return _destinations_of(route, {**scope, **child})
        if match is Match.PARTIAL and partial is None:
            partial, partial_scope = route, {**scope, **child}
    return frozenset() if partial is None else _destinations_of(partial, partial_scope)


def _destinations_of(route: BaseRoute, scope: Scope) -> frozenset[str]:
    if isinstance(route, Mount):
        return served_destinations(route.routes, scope)
    return frozenset(getattr(route, "serves_elements", ()))


def fetch_metadata_refusal(scope: Scope, routes: Sequence[BaseRoute]) -> str | None:
    """Why a request to /api is not the page's own call, or None when it may be answered.

    A document shown in the markdown preview is same-origin: its `<img src="/api/events?editor=x">` carries the
    session cookie and no Origin, and registered a phantom editor that every save then waited for; its `<img>` of
    a long-polling route held one of the browser's few connections for 25 s. Only the destination tells such a
    request apart from the page's fetch, so the rule is here, once, for every route, not in each handler."""
    dest = _header(scope, b"sec-fetch-dest")
    if dest == OWN_FETCH_DESTINATION:
        return None
    if dest is None:
        if not any(_header(scope, name) is not None for name in FETCH_METADATA_HEADERS):
            return None  # not a browser: curl, the MCP bridge, a script
        return "a browser request that does not say what it is for (no Sec-Fetch-Dest) was refused"
    if dest in served_destinations(routes, scope):
        return None
    return (
        f"/api answers deskbridge's own page, not an element of a page: Sec-Fetch-Dest {dest!r} was refused"
    )


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
    """Host/Origin on every request; bearer token on /mcp; Fetch Metadata and the UI secret on /api.

    `routes` are the app's routes, for the destinations a route serves besides the page's own fetches."""

    def __init__(self, app: ASGIApp, policy: SecurityPolicy, routes: Sequence[BaseRoute] = ()) -> None:
        self.app = app
        self.policy = policy
        self.routes = routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = _with_frame_deny(send)
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
            challenge = _header(scope, HEALTH_CHALLENGE_HEADER.encode())
            if path == HEALTH_PATH and challenge is not None and _header(scope, b"authorization") is None:
                await self._prove(send, challenge)
                return
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
        elif path.startswith("/api/") and _header(scope, b"sec-fetch-site") not in (
            None,
            "same-origin",
            "none",
        ):
            # A page on another loopback port is same-site: the strict cookie goes along with its <img> or
            # <script src> (no Origin header on such a GET). `/api/events` fetched that way made the broker believe
            # a person was watching (the agent's approvals waited for no one, 2 min each) and registered an editor
            # every save must ask. Browsers say where a request comes from (Fetch Metadata, w3c/webappsec-fetch-
            # metadata); our own pages are same-origin, non-browser clients send no such header.
            await _reject(
                send,
                403,
                "CROSS_SITE",
                "a request from another site or port was refused",
                "Only pages served by this deskbridge may call /api (open the UI with `deskbridge open`).",
            )
            return
        elif path.startswith("/api/") and (refusal := fetch_metadata_refusal(scope, self.routes)) is not None:
            await _reject(
                send,
                403,
                "ACCESS_DENIED",
                refusal,
                "Nothing to do when a document's image, frame, object or link made this request: deskbridge's "
                "pages call /api with fetch(). Clients that are not browsers send no Sec-Fetch-* headers.",
            )
            return
        elif path.startswith("/api/") and not self.policy.ui_authorised(scope):
            await _reject(
                send,
                401,
                "UNAUTHORIZED",
                "this browser session is not authorised",
                "Open the UI with `deskbridge open` (or the one-time link `deskbridge serve` printed).",
            )
            return
        await self.app(scope, receive, send)

    async def _prove(self, send: Send, challenge: str) -> None:
        """The answer to a credential-less health challenge: the proof and nothing else about this server."""
        if not valid_challenge(challenge):
            await _reject(
                send,
                400,
                "INVALID_ARGUMENT",
                f"{HEALTH_CHALLENGE_HEADER} must be 32 to 128 lower-case hex digits",
                "Send a fresh random challenge (`secrets.token_hex(32)`).",
            )
            return
        body = json.dumps(
            {"proof": health_proof(self.policy.mcp_token, challenge, self.policy.port)}
        ).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            (b"cache-control", b"no-store"),
        ]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    def _token_ok(self, scope: Scope) -> bool:
        auth = _header(scope, b"authorization") or ""
        scheme, _, token = auth.partition(" ")
        return scheme.lower() == "bearer" and same_secret(token.strip(), self.policy.mcp_token)


def _with_frame_deny(send: Send) -> Send:
    """`send` that adds FRAME_DENY_HEADERS to the response start (keeping any the route set itself)."""

    async def stamped(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = list(message.get("headers", []))
            present = {bytes(k).lower() for k, _ in headers}
            for name, value in FRAME_DENY_HEADERS:
                if name == b"content-security-policy" or name not in present:
                    headers.append((name, value))
            message = {**message, "headers": headers}
        await send(message)

    return stamped
