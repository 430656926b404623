"""Who must approve what for the markdown kind, how we ask the person, and the view of the core audit it shows.

Seed §3.3/§9.3: edits, overwriting, opening outside the workspace and copying rich HTML ask the person first;
saving does not; `require_approval false` turns asking off; settings may relax single operations. The request
carries a real unified diff of the proposed change plus client, tool, target and summary, and goes through
the core approval broker (no answer in time = declined). Audit records never contain document text or tokens.
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Mapping
from typing import Any, Final

from deskbridge.core.audit import AuditLog
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
    "rename": True,
    "delete": True,
    "save": False,
    "save_as": False,
}
"""Operation → whether it asks the person when settings say nothing (seed §3.3, issue #3)."""


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


def _window(text: str, start: int, end: int, context: int = 3) -> tuple[int, int]:
    """Code-point span of the lines touched by [start, end) plus `context` lines each side."""
    lo = text.rfind("\n", 0, start) + 1
    hi = text.find("\n", end)
    hi = len(text) if hi == -1 else hi + 1
    for _ in range(context):
        if lo == 0:
            break
        lo = text.rfind("\n", 0, lo - 1) + 1
    for _ in range(context):
        if hi >= len(text):
            break
        nxt = text.find("\n", hi)
        hi = len(text) if nxt == -1 else nxt + 1
    return lo, hi


def local_diff(text: str, start: int, end: int, insert: str, name: str) -> str:
    """Unified diff of replacing text[start:end] with `insert`, computed on the touched lines only."""
    return edits_diff(text, [(start, end, insert)], name)


def edits_diff(text: str, edits: list[tuple[int, int, str]], name: str) -> str:
    """Unified diff of ascending, non-overlapping edits, computed on the touched lines only.

    Diffing a 10 MB document line by line for a few words costs seconds; each group of nearby edits is
    diffed on its own lines plus context, and the hunks are renumbered to the real line numbers.
    """
    groups: list[tuple[int, int, list[tuple[int, int, str]]]] = []
    for start, end, insert in edits:
        lo, hi = _window(text, start, end)
        if groups and lo <= groups[-1][1]:
            groups[-1] = (groups[-1][0], max(hi, groups[-1][1]), [*groups[-1][2], (start, end, insert)])
        else:
            groups.append((lo, hi, [(start, end, insert)]))
    header = f"--- a/{name}\n+++ b/{name}\n"
    hunks: list[str] = []
    line_delta = 0
    size = 0
    for lo, hi, members in groups:
        pieces, last = [], lo
        for start, end, insert in members:
            pieces += [text[last:start], insert]
            last = end
        pieces.append(text[last:hi])
        before, after = text[lo:hi], "".join(pieces)
        first_line = text.count("\n", 0, lo)
        diff = unified_diff(before, after, name)
        body = diff.split("\n", 2)[2] if diff.count("\n") >= 2 else ""
        hunks.append(_shift_hunks(body, first_line, first_line + line_delta))
        line_delta += after.count("\n") - before.count("\n")
        size += len(hunks[-1])
        if size > DIFF_MAX_CHARS:
            hunks.append("... (diff truncated)\n")
            break
    return header + "".join(hunks) if any(hunks) else ""


def _shift_hunks(diff: str, old_shift: int, new_shift: int | None = None) -> str:
    """Renumber hunk headers of a diff computed on an excerpt: old side by `old_shift`, new side by `new_shift`."""
    new_shift = old_shift if new_shift is None else new_shift
    if not old_shift and not new_shift:
        return diff

    def fix(m: re.Match[str]) -> str:
        a, al, b, bl = m.group(1), m.group(2), m.group(3), m.group(4)
        return f"@@ -{int(a) + old_shift}{al or ''} +{int(b) + new_shift}{bl or ''} @@"

    return re.sub(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@", fix, diff, flags=re.MULTILINE)


class Approvals:
    """Asks the person through the core broker when the rules require it; APPROVAL_DECLINED on no/timeout.

    Only for a change known inside a handler (editor commands, prepared by the open editor); every other
    markdown tool declares its operation and is asked once by `App.invoke` (tools.py, file_tools.py)."""

    def __init__(self, broker: ApprovalBroker | None, rules: ApprovalRules) -> None:
        self.broker = broker
        self.rules = rules

    def needed(self, operation: str) -> bool:
        return self.rules.requires_approval(operation)

    async def ask(
        self, ctx: CallContext, operation: str, tool: str, target: str, summary: str, diff: str | None = None
    ) -> bool:
        """True when approval was needed and given, False when none was needed; raises when declined."""
        if not self.needed(operation):
            return False
        if self.broker is None:
            raise BridgeError(
                ErrorCode.APPROVAL_DECLINED,
                f"{tool} on {target!r} needs the person's approval but no approval channel is connected",
                hint=f"Ask the person to open the deskbridge web UI so they can answer, or to relax the setting "
                f"(`deskbridge config set require_approval false`); then call {tool} again.",
            )
        request = ApprovalRequest(
            caller=ctx.caller,
            client=ctx.client_name,
            tool=tool,
            target=target,
            summary=summary,
            diff=diff,
            operation=operation,
        )
        # The broker leaves its decision in core.policy.LAST_APPROVAL, which the audit reads.
        await self.broker.require(request, elicit=ctx.elicit)
        return True


TOOL_PREFIXES: Final = ("md_", "md.", "vex_", "vex.")
"""Tool names of this kind (and the Vex aliases a client may have called), as the core audit records them."""


def operation_audit(log: AuditLog | None, limit: int = AUDIT_KEEP) -> list[dict[str, Any]]:
    """The last `limit` markdown tool calls from the core audit (`App.invoke` writes each call once), newest
    first, in `md_get_operation_audit`'s shape: no content, no tokens, no search queries."""
    if log is None:
        return []
    out: list[dict[str, Any]] = []
    for rec in reversed(log.recent()):
        if not rec.tool.startswith(TOOL_PREFIXES):
            continue
        out.append(
            {
                "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rec.timestamp)),
                "caller": rec.caller,
                "client": rec.client,
                "tool": rec.tool,
                "target": rec.target,
                "approval": str(rec.approval),
                "approvedVia": rec.approved_via or None,
                "ok": rec.outcome == "ok",
                "error": None if rec.outcome == "ok" else rec.outcome,
                "durationMs": rec.duration_ms,
            }
        )
        if len(out) >= limit:
            break
    return out
