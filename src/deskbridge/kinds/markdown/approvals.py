"""Who must approve what for the markdown kind, how we ask the person, and the audit of every MCP operation.

Seed §3.3/§9.3: edits, overwriting, opening outside the workspace and copying rich HTML ask the person first;
saving does not; `require_approval false` turns asking off; settings may relax single operations. The request
carries a real unified diff of the proposed change plus client, tool, target and summary, and goes through
the core approval broker (no answer in time = declined). Audit records never contain document text or tokens.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any, Final

from deskbridge.core.audit import Approval, AuditLog
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalBroker, ApprovalRequest, ApprovalRules, approval_rules_from
from deskbridge.core.tools import CallContext

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


APPROVAL_OUTCOME: ContextVar[bool | None] = ContextVar("markdown_approval_outcome", default=None)
"""Set inside a tool call when the person was asked: True approved, False declined (read by the audit)."""


def approval_rules(settings: ApprovalRules | Mapping[str, Any] | None = None) -> ApprovalRules:
    """The markdown kind's rules: our defaults, then the settings `{enabled, overrides: {operation: bool}}`."""
    if isinstance(settings, ApprovalRules):
        return settings
    return approval_rules_from(NEEDS_APPROVAL_BY_DEFAULT, settings)


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
    def fix(m: re.Match[str]) -> str:
        a, al, b, bl = m.group(1), m.group(2), m.group(3), m.group(4)
        return f"@@ -{int(a) + shift}{al or ''} +{int(b) + shift}{bl or ''} @@"

    return re.sub(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", fix, diff, flags=re.MULTILINE)


class Approvals:
    """Asks the person through the core broker when the rules require it; APPROVAL_DECLINED on no/timeout."""

    def __init__(self, broker: ApprovalBroker | None, rules: ApprovalRules) -> None:
        self.broker = broker
        self.rules = rules

    def needed(self, operation: str) -> bool:
        return self.rules.requires_approval(operation)

    async def ask(self, ctx: CallContext, operation: str, tool: str, target: str, summary: str,
                  diff: str | None = None) -> bool:
        """True when approval was needed and given, False when none was needed; raises when declined."""
        if not self.needed(operation):
            return False
        if self.broker is None:
            raise BridgeError(
                ErrorCode.APPROVAL_DECLINED,
                f"{tool} on {target!r} needs the person's approval but no approval channel is connected",
                hint="Open the deskbridge web UI so the person can answer, or ask them to relax the setting.",
            )
        request = ApprovalRequest(caller=ctx.caller, client=ctx.client_name, tool=tool, target=target,
                                  summary=summary, diff=diff)
        try:
            await self.broker.require(request, elicit=ctx.elicit)
        except BridgeError as exc:
            if exc.code is ErrorCode.APPROVAL_DECLINED:
                APPROVAL_OUTCOME.set(False)
            raise
        APPROVAL_OUTCOME.set(True)
        return True


class OperationAudit:
    """The last `AUDIT_KEEP` markdown tool calls with their approval outcome, for `md_get_operation_audit`.

    The platform's `App.invoke` already writes every call to the shared core audit log (without knowing
    whether a person was asked); this ring adds the approval outcome and stays markdown-only.
    """

    def __init__(self) -> None:
        self.log = AuditLog(memory_max=AUDIT_KEEP)

    def record(self, ctx: CallContext, tool: str, target: str, *, approved: bool | None, error: str | None,
               duration_ms: float = 0.0, arg_names: Iterable[str] = ()) -> None:
        approval = Approval.NONE if approved is None else (Approval.APPROVED if approved else Approval.DECLINED)
        self.log.record(caller=ctx.caller, client=ctx.client_name, tool=tool, target=target,
                        outcome=error or "ok", approval=approval, duration_ms=duration_ms, arg_names=arg_names)

    def recent(self, limit: int = AUDIT_KEEP) -> list[dict[str, Any]]:
        """Newest first; no content, no tokens (only tool, target, outcome, approval, duration)."""
        out: list[dict[str, Any]] = []
        for rec in reversed(self.log.recent()):
            out.append({
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec.timestamp)),
                "client": rec.client,
                "tool": rec.tool,
                "target": rec.target,
                "approval": str(rec.approval),
                "ok": rec.outcome == "ok",
                "error": None if rec.outcome == "ok" else rec.outcome,
                "durationMs": rec.duration_ms,
            })
            if len(out) >= limit:
                break
        return out
