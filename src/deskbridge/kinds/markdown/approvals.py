"""Who must approve what for the markdown kind, how we ask the person, and the audit of every MCP operation.

Seed §3.3/§9.3: edits, overwriting, opening outside the workspace and copying rich HTML ask the person first;
saving does not; `require_approval false` turns asking off; settings may relax single operations. The request
carries a real unified diff of the proposed change plus client, tool, target and summary, and goes through
the core approval broker (no answer in time = declined). Audit records never contain document text or tokens.
"""

from __future__ import annotations

import asyncio
import dataclasses
import difflib
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import APPROVAL_TIMEOUT_S

try:  # pragma: no cover - depends on which core modules have landed
    from deskbridge.core import policy as _core_policy  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover
    _core_policy = None

AUDIT_KEEP: Final = 100
"""Records `md_get_operation_audit` returns at most (seed §9.3: the last 100)."""

DIFF_MAX_CHARS: Final = 200_000
"""Characters of diff sent with one approval request; longer diffs are cut and say so."""

NEEDS_APPROVAL_BY_DEFAULT: Final[dict[str, bool]] = {
    "edit": True,
    "overwrite": True,
    "open_outside": True,
    "copy_rich_html": True,
    "export": True,
    "save": False,
    "save_as": False,
}
"""Operation → whether it asks the person when settings say nothing (seed §3.3, issue #3)."""


@dataclass
class ApprovalSettings:
    """The person's approval settings for the markdown kind."""

    require_approval: bool = True
    """False turns every approval off (the person trusts the client)."""
    operations: dict[str, bool] = field(default_factory=dict)
    """Per-operation override, e.g. {"edit": False} to let edits through without asking."""

    def needs_approval(self, operation: str) -> bool:
        if not self.require_approval:
            return False
        return self.operations.get(operation, NEEDS_APPROVAL_BY_DEFAULT.get(operation, True))


@dataclass(frozen=True)
class ApprovalRequest:
    """What the person sees: client, tool, target, a one-line summary and the unified diff."""

    kind: str
    operation: str
    client: str
    tool: str
    target: str
    summary: str
    diff: str = ""


class ApprovalBroker(Protocol):
    async def request(self, request: Any) -> Any: ...


def unified_diff(before: str, after: str, name: str, *, context: int = 3) -> str:
    """A real unified diff (`--- a/name` / `+++ b/name`), cut at `DIFF_MAX_CHARS` with a marker."""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    out: list[str] = []
    size = 0
    for line in difflib.unified_diff(a, b, f"a/{name}", f"b/{name}", n=context):
        if not line.endswith("\n"):
            line += "\n\\ No newline at end of file\n"
        out.append(line)
        size += len(line)
        if size > DIFF_MAX_CHARS:
            out.append("... (diff truncated)\n")
            break
    return "".join(out)


def local_diff(text: str, start: int, end: int, insert: str, name: str) -> str:
    """Unified diff of replacing text[start:end] with `insert`, computed on the touched lines only.

    Diffing a 10 MB document line by line for a one-word edit costs seconds; the touched lines plus a few
    context lines give the same hunk, renumbered to the real line numbers.
    """
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = len(text) if line_end == -1 else line_end + 1
    # widen by three lines each side for context
    lo = line_start
    for _ in range(3):
        if lo == 0:
            break
        lo = text.rfind("\n", 0, lo - 1) + 1
    hi = line_end
    for _ in range(3):
        if hi >= len(text):
            break
        nxt = text.find("\n", hi)
        hi = len(text) if nxt == -1 else nxt + 1
    before = text[lo:hi]
    after = text[lo:start] + insert + text[end:hi]
    first_line = text.count("\n", 0, lo)  # 0-based line number of `lo`
    diff = unified_diff(before, after, name)
    if first_line == 0:
        return diff
    return _shift_hunks(diff, first_line)


def _shift_hunks(diff: str, shift: int) -> str:
    import re

    def fix(m: re.Match[str]) -> str:
        a, al, b, bl = m.group(1), m.group(2), m.group(3), m.group(4)
        return f"@@ -{int(a) + shift}{al or ''} +{int(b) + shift}{bl or ''} @@"

    return re.sub(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", fix, diff, flags=re.MULTILINE)


def _core_request(request: ApprovalRequest) -> Any:
    """Build the core broker's request object from ours, passing the fields it knows."""
    core_cls = getattr(_core_policy, "ApprovalRequest", None) if _core_policy else None
    if core_cls is None:
        return request
    ours = dataclasses.asdict(request)
    if dataclasses.is_dataclass(core_cls):
        known = {f.name for f in dataclasses.fields(core_cls)}
    else:
        known = set(getattr(core_cls, "model_fields", {}) or ours)
    try:
        return core_cls(**{k: v for k, v in ours.items() if k in known})
    except TypeError:
        return request


def _approved(answer: Any) -> bool:
    if isinstance(answer, bool):
        return answer
    for attr in ("approved", "accepted", "ok"):
        if hasattr(answer, attr):
            return bool(getattr(answer, attr))
    if isinstance(answer, dict):
        return bool(answer.get("approved") or answer.get("accepted"))
    return bool(answer)


class Approvals:
    """Asks the person through the broker when settings require it; raises APPROVAL_DECLINED on no/timeout."""

    def __init__(
        self,
        broker: ApprovalBroker | None,
        settings: ApprovalSettings | None = None,
        *,
        timeout_s: float = APPROVAL_TIMEOUT_S,
    ) -> None:
        self.broker = broker
        self.settings = settings or ApprovalSettings()
        self.timeout_s = timeout_s

    async def ask(self, request: ApprovalRequest) -> bool:
        """Return True when approval was needed and given, False when none was needed; raise when declined."""
        if not self.settings.needs_approval(request.operation):
            return False
        if self.broker is None:
            raise BridgeError(
                ErrorCode.APPROVAL_DECLINED,
                f"'{request.tool}' needs the person's approval but no approval channel is connected",
                hint="Open the deskbridge web UI so the person can answer, or ask them to relax the setting.",
            )
        try:
            answer = await asyncio.wait_for(self.broker.request(_core_request(request)), self.timeout_s)
        except TimeoutError:
            raise BridgeError(
                ErrorCode.APPROVAL_DECLINED,
                f"the person did not answer the approval for '{request.tool}' within {self.timeout_s:.0f} s",
            ) from None
        if isinstance(answer, BridgeError):
            raise answer
        if not _approved(answer):
            raise BridgeError(ErrorCode.APPROVAL_DECLINED, f"the person declined '{request.tool}' on {request.target}")
        return True


@dataclass(frozen=True)
class AuditRecord:
    """One MCP operation (seed §9.3): no document text, no replacement text, no token."""

    time: float
    client: str
    tool: str
    target: str
    operation: str
    approved: bool | None
    ok: bool
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.time)),
            "client": self.client,
            "tool": self.tool,
            "target": self.target,
            "operation": self.operation,
            "approved": self.approved,
            "ok": self.ok,
            "error": self.error,
        }


class OperationAudit:
    """The last `AUDIT_KEEP` markdown operations in memory, also forwarded to the core audit log."""

    def __init__(self, core_audit: Any | None = None) -> None:
        self._records: deque[AuditRecord] = deque(maxlen=AUDIT_KEEP)
        self._core = core_audit

    def record(self, rec: AuditRecord) -> None:
        self._records.append(rec)
        if self._core is not None:
            fn = getattr(self._core, "record", None) or getattr(self._core, "append", None)
            if fn is not None:
                try:
                    fn(
                        kind="markdown",
                        caller=rec.client,
                        tool=rec.tool,
                        target=rec.target,
                        outcome="ok" if rec.ok else (rec.error or "error"),
                        approved=rec.approved,
                    )
                except TypeError:
                    fn(rec.to_dict())

    def recent(self, limit: int = AUDIT_KEEP) -> list[dict[str, Any]]:
        items = list(self._records)[-limit:]
        return [r.to_dict() for r in reversed(items)]
