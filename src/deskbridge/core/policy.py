"""Who may touch what: access scopes, which operations need a person's approval, and the approval broker.

* `AccessScope` — the folders (and, for a single document, the one file) a caller's paths must stay in;
  resolution itself is `core.paths.resolve_path`.
* `ApprovalRules` — operation name → needs approval? Defaults come from the kind, settings override them,
  and one switch turns approval off globally (for people who approve in their MCP client instead).
* `ApprovalBroker` — `await broker.request(ApprovalRequest(...))` asks a person: the request is published
  on the event bus (topic `approval`) and the web UI answers with `broker.answer(id, approved)`; with no UI
  attached, the caller's MCP `elicit` callback is used — unless the person switched that path off
  (`approvals_via_client` setting: a scripted client can answer its own elicitation); with neither, or after
  the timeout, the answer is "declined" (`require` turns that into `APPROVAL_DECLINED`). A silent or absent
  person never means yes. Every decision says which path it came through (`ApprovalResult.via`: "browser" or
  "client"), and the platform writes that into the audit record and the tool result.

Thread-safety: the broker is used from the event loop (`request`, awaited by async handlers); `answer`,
`attach_ui`/`detach_ui` and `pending` may be called from any thread (`threading.Lock` + the request's
own loop via `call_soon_threadsafe`).
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
import secrets
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from deskbridge.core import limits
from deskbridge.core.audit import Approval
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.paths import resolve_path

# --------------------------------------------------------------------------------------------- scopes


class ScopeKind(StrEnum):
    DOCUMENT = "document"
    """Only the open document itself."""
    FOLDER = "folder"
    """The folder of the open document or project, and everything below it."""
    CUSTOM = "custom"
    """Folders the person listed in the settings."""


@dataclass(frozen=True)
class AccessScope:
    """The places a caller's paths may point to. Empty roots mean "nothing" (never "everything")."""

    kind: ScopeKind
    roots: tuple[Path, ...]
    documents: tuple[Path, ...] = ()
    """For `DOCUMENT` scopes: the exact files allowed (their folder is in `roots` only for resolution)."""

    @classmethod
    def document(cls, path: Path | str) -> AccessScope:
        p = Path(path).resolve()
        return cls(ScopeKind.DOCUMENT, (p.parent,), (p,))

    @classmethod
    def folder(cls, path: Path | str) -> AccessScope:
        return cls(ScopeKind.FOLDER, (Path(path).resolve(),))

    @classmethod
    def custom(cls, roots: Iterable[Path | str]) -> AccessScope:
        return cls(ScopeKind.CUSTOM, tuple(Path(r).resolve() for r in roots))

    def resolve(self, raw: str, *, must_exist: bool = False, check_case: bool = False) -> Path:
        """The real path of `raw` inside this scope, or `ACCESS_DENIED` / `INVALID_ARGUMENT` / `NOT_FOUND`."""
        real = resolve_path(raw, self.roots, must_exist=must_exist, check_case=check_case)
        if self.kind is ScopeKind.DOCUMENT and real not in self.documents:
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"{raw!r} is not the open document",
                "The access scope is the current document only; widen it to the folder in the settings.",
            )
        return real

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "roots": [str(r) for r in self.roots],
            "documents": [str(d) for d in self.documents],
        }


# --------------------------------------------------------------------------------------------- rules


@dataclass
class ApprovalRules:
    """Operation → needs approval. Lookup order: global switch, settings override, kind default, fallback.

    An operation nobody listed needs approval unless it is read-only: forgetting a rule must fail safe.
    """

    defaults: Mapping[str, bool] = field(default_factory=dict)
    overrides: Mapping[str, bool] = field(default_factory=dict)
    enabled: bool = True

    def requires_approval(self, operation: str, *, read_only: bool = False) -> bool:
        if not self.enabled:
            return False
        if operation in self.overrides:
            return bool(self.overrides[operation])
        if operation in self.defaults:
            return bool(self.defaults[operation])
        return not read_only


# --------------------------------------------------------------------------------------------- broker


class Decision(StrEnum):
    APPROVED = "approved"
    DECLINED = "declined"
    TIMED_OUT = "timed_out"
    NO_ONE_TO_ASK = "no_one_to_ask"


@dataclass(frozen=True)
class ApprovalText:
    """What a tool's `approval_summary` may return instead of a plain line: the summary plus the diff the
    person is shown and the target it names (markdown: the unified diff of exactly the edit to be applied)."""

    summary: str
    diff: str | None = None
    target: str | None = None


@dataclass
class ApprovalRequest:
    """What the person sees: who asks, which tool, on what, a one-line summary and (optionally) the diff."""

    caller: str
    client: str
    tool: str
    target: str
    summary: str
    diff: str | None = None
    id: str = ""
    created: float = 0.0
    diff_truncated: bool = False
    timeout_s: float = 0.0
    """How long the person has to answer (set when asked), so a dialog can show the time left."""
    operation: str | None = None
    """The approval operation asked about (`ToolSpec.operation`: edit, export, open_outside …): the dialog's
    title names it, instead of guessing from the tool's name."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "operation": self.operation,
            "caller": self.caller,
            "client": self.client,
            "tool": self.tool,
            "target": self.target,
            "summary": self.summary,
            "diff": self.diff,
            "diffTruncated": self.diff_truncated,
            "created": self.created,
            "timeoutS": self.timeout_s,
        }


class ApprovalPath(StrEnum):
    """Through which channel a person was asked."""

    BROWSER = "browser"
    """The deskbridge page (approval dialog in the web UI)."""
    CLIENT = "client"
    """The calling MCP client, by elicitation (its host shows the question to its person)."""


@dataclass(frozen=True)
class ApprovalResult:
    decision: Decision
    by: str
    """'ui', 'elicit', 'timeout' or 'none'."""
    via: ApprovalPath | None = None
    """Where the person was asked (also for a timeout or a "no"); None when nobody could be asked."""

    @property
    def approved(self) -> bool:
        return self.decision is Decision.APPROVED

    def to_dict(self) -> dict[str, Any]:
        """What a tool result says about the approval: the decision and the path it came through."""
        return {"decision": str(self.decision), "via": None if self.via is None else str(self.via)}

    @property
    def for_audit(self) -> Approval:
        """How the audit trail records it: a timeout or nobody to ask is not a "no" from the person."""
        return Approval(str(self.decision))


Elicit = Callable[[str], Awaitable[bool | None]]

LAST_APPROVAL: contextvars.ContextVar[ApprovalResult | None] = contextvars.ContextVar(
    "last_approval", default=None
)
"""The decision of the latest approval asked in this context (one tool call); None when nobody was asked."""


def _cap_diff(diff: str | None) -> tuple[str | None, bool]:
    if diff is None:
        return None, False
    raw = diff.encode("utf-8")
    cap = limits.APPROVAL_DIFF_MAX_BYTES
    if len(raw) <= cap:
        return diff, False
    return raw[:cap].decode("utf-8", "ignore") + "\n… (diff truncated)", True


def _elicit_diff(diff: str, truncated: bool) -> str:
    """The diff as a client's dialog shows it: at most `APPROVAL_ELICIT_DIFF_MAX_CHARS`, cut at a line end."""
    cap = limits.APPROVAL_ELICIT_DIFF_MAX_CHARS
    if len(diff) <= cap and not truncated:
        return diff
    head = diff[:cap]
    if "\n" in head:
        head = head[: head.rindex("\n") + 1]
    return (
        head.rstrip("\n")
        + "\n… (the diff is cut here; the deskbridge page shows it whole: `deskbridge open`)"
    )


class ApprovalBroker:
    """Routes approval requests to a person and their answers back; see the module docstring."""

    def __init__(
        self,
        bus: EventBus,
        timeout_s: float = limits.APPROVAL_TIMEOUT_S,
        *,
        client_allowed: Callable[[], bool] | None = None,
    ) -> None:
        self.bus = bus
        self.timeout_s = timeout_s
        self.client_allowed = client_allowed or (lambda: True)
        """Read on every request: may the calling client be asked (the `approvals_via_client` setting)?"""
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[ApprovalRequest, asyncio.Future[bool], asyncio.AbstractEventLoop]] = {}
        self._ui_clients = 0

    # -- UI presence ----------------------------------------------------------------------------------

    def attach_ui(self) -> None:
        """A UI that can answer approvals connected (call once per connection)."""
        with self._lock:
            self._ui_clients += 1

    def detach_ui(self) -> None:
        with self._lock:
            self._ui_clients = max(0, self._ui_clients - 1)

    @property
    def ui_attached(self) -> bool:
        with self._lock:
            return self._ui_clients > 0

    # -- asking ---------------------------------------------------------------------------------------

    async def request(
        self, req: ApprovalRequest, *, elicit: Elicit | None = None, timeout_s: float | None = None
    ) -> ApprovalResult:
        """Ask a person; returns the decision (never raises for a "no"). The decision is also left in
        `LAST_APPROVAL`, so whoever audits the surrounding tool call can record it."""
        timeout = self.timeout_s if timeout_s is None else timeout_s
        req.diff, req.diff_truncated = _cap_diff(req.diff)
        req.created = time.time()
        req.timeout_s = timeout
        if self.ui_attached:
            result = await self._ask_ui(req, timeout)
        elif elicit is not None and self.client_allowed():
            result = await self._ask_elicit(req, elicit, timeout)
        else:
            result = ApprovalResult(Decision.NO_ONE_TO_ASK, "none")
        LAST_APPROVAL.set(result)
        return result

    async def require(
        self, req: ApprovalRequest, *, elicit: Elicit | None = None, timeout_s: float | None = None
    ) -> ApprovalResult:
        """Like `request`, but anything other than "approved" raises `APPROVAL_DECLINED`."""
        result = await self.request(req, elicit=elicit, timeout_s=timeout_s)
        if not result.approved:
            reason = {
                Decision.DECLINED: "the person declined",
                Decision.TIMED_OUT: "nobody answered in time",
                Decision.NO_ONE_TO_ASK: "no editor is open and the client cannot ask the person",
            }[result.decision]
            hint = None
            if result.decision is Decision.NO_ONE_TO_ASK:
                if elicit is not None and not self.client_allowed():
                    reason = "no deskbridge page is open, and approvals through the client are switched off"
                    hint = (
                        "Ask the person to open the deskbridge web UI (`deskbridge open`) to approve changes "
                        f"(the setting approvals_via_client=false requires the browser); then call {req.tool} again."
                    )
                else:
                    hint = (
                        "Ask the person to open the deskbridge web UI (`deskbridge open`) to approve it, or use a "
                        f"client that supports elicitation; then call {req.tool} again."
                    )
            raise BridgeError(
                ErrorCode.APPROVAL_DECLINED,
                f"{req.tool} on {req.target!r}: {reason}",
                hint,
                data={
                    "decision": str(result.decision),
                    "approvalId": req.id or None,
                    "via": None if result.via is None else str(result.via),
                },
            )
        return result

    async def _ask_ui(self, req: ApprovalRequest, timeout: float) -> ApprovalResult:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[bool] = loop.create_future()
        with self._lock:
            if len(self._pending) >= limits.APPROVAL_PENDING_MAX:
                raise BridgeError(
                    ErrorCode.LIMIT_EXCEEDED,
                    f"{limits.APPROVAL_PENDING_MAX} approval requests are already waiting",
                    "Wait for the person to answer the open requests, then retry.",
                )
            req.id = "approval-" + secrets.token_hex(8)
            self._pending[req.id] = (req, fut, loop)
        self.bus.publish("approval", {"event": "requested", "request": req.to_dict()})
        try:
            approved = await asyncio.wait_for(fut, timeout)
            result = ApprovalResult(
                Decision.APPROVED if approved else Decision.DECLINED, "ui", ApprovalPath.BROWSER
            )
        except TimeoutError:
            result = ApprovalResult(Decision.TIMED_OUT, "timeout", ApprovalPath.BROWSER)
        finally:
            with self._lock:
                self._pending.pop(req.id, None)
        self.bus.publish("approval", {"event": "resolved", "id": req.id, "decision": str(result.decision)})
        return result

    async def _ask_elicit(self, req: ApprovalRequest, elicit: Elicit, timeout: float) -> ApprovalResult:
        # The change id binds an answer to this exact change: a client that answers later (2026-era retries)
        # gets asked again if the diff is no longer the same.
        change = hashlib.sha256(f"{req.tool}\0{req.target}\0{req.diff or ''}".encode()).hexdigest()[:8]
        question = (
            f"{req.client} wants to run {req.tool} on {req.target}: {req.summary}. Allow? (change {change})"
        )
        # The summary is the agent's own words (its `reason`); the person must see what really changes, as the
        # browser dialog shows it, or a prompt-injected agent's "fix a typo" could approve any rewrite.
        if req.diff:
            question += "\n\n" + _elicit_diff(req.diff, req.diff_truncated)
        from deskbridge.core.tools import ElicitationUnavailable

        try:
            answer = await asyncio.wait_for(elicit(question), timeout)
        except TimeoutError:
            return ApprovalResult(Decision.TIMED_OUT, "timeout", ApprovalPath.CLIENT)
        except ElicitationUnavailable:  # the client could not show the question: nobody declined anything
            return ApprovalResult(Decision.NO_ONE_TO_ASK, "elicit")
        # None = the person cancelled the dialog: counts as a decline.
        return ApprovalResult(
            Decision.APPROVED if answer is True else Decision.DECLINED, "elicit", ApprovalPath.CLIENT
        )

    # -- answering ------------------------------------------------------------------------------------

    def answer(self, approval_id: str, approved: bool) -> None:
        """The person's answer from the UI; `NOT_FOUND` for an unknown, answered or expired id."""
        with self._lock:
            entry = self._pending.pop(approval_id, None)
        if entry is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no approval request {approval_id!r} is waiting",
                "It was already answered or timed out; list the pending requests.",
            )
        _req, fut, loop = entry

        def settle() -> None:
            if not fut.done():
                fut.set_result(bool(approved))

        try:
            if asyncio.get_running_loop() is loop:
                settle()
                return
        except RuntimeError:
            pass
        loop.call_soon_threadsafe(settle)

    def pending(self) -> list[ApprovalRequest]:
        """Requests waiting for an answer, oldest first."""
        with self._lock:
            return sorted((r for r, _f, _l in self._pending.values()), key=lambda r: r.created)


def ask_for_tool(
    broker: ApprovalBroker,
    *,
    operation: str,
    defaults: Mapping[str, bool],
    require_approval: bool,
    overrides: Mapping[str, bool],
    request: Callable[[], ApprovalRequest | None],
    elicit: Elicit | None,
) -> Awaitable[ApprovalResult] | None:
    """The one decision for a tool that declares its operation (`ToolSpec.operation`): None when the rules
    (global switch, per-operation override, kind default, fail-safe fallback) need no approval, else the
    awaitable `broker.require(...)` (APPROVAL_DECLINED unless the person says yes). `request` builds the
    question only when one is asked (it may raise: a call that cannot succeed is refused unasked; it may return
    None: the call changes nothing, e.g. a patch that replaces text with itself, so nothing is asked)."""
    rules = approval_rules_from(defaults, {"enabled": require_approval, "overrides": dict(overrides)})
    if not rules.requires_approval(operation):
        return None
    question = request()
    if question is None:
        return None
    return broker.require(question, elicit=elicit)


def approval_rules_from(
    defaults: Mapping[str, bool],
    settings: Mapping[str, Any] | None = None,
    *,
    read_only_ops: Sequence[str] = (),
) -> ApprovalRules:
    """Build rules from a kind's defaults and a settings mapping `{enabled: bool, overrides: {op: bool}}`."""
    settings = settings or {}
    merged = dict(defaults)
    for op in read_only_ops:
        merged.setdefault(op, False)
    return ApprovalRules(
        defaults=merged,
        overrides=dict(settings.get("overrides", {})),
        enabled=bool(settings.get("enabled", True)),
    )
