"""Calling a markdown tool without the server, approvals included: what `App._approved_run` does first."""

from __future__ import annotations

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalRequest, ask_for_tool
from deskbridge.kinds.markdown.approvals import NEEDS_APPROVAL_BY_DEFAULT
from deskbridge.kinds.markdown.service import MarkdownService


async def approved_run(service: MarkdownService, spec, ctx, args):
    """Run a tool as `App._approved_run` does: an operation the tool declares is asked about first (centrally,
    with the tool's `approval_summary`: for edits, the diff), then the handler runs."""
    if spec.operation is not None and ctx.caller.startswith("mcp:"):

        def request():
            text = spec.approval_summary(args)
            if text is None:
                return None
            return ApprovalRequest(
                caller=ctx.caller,
                client=ctx.client_name,
                tool=spec.name,
                target=text.target or "",
                summary=text.summary,
                diff=text.diff,
            )

        rules = service.approvals.rules
        if service.approvals.broker is None and rules.requires_approval(spec.operation):
            raise BridgeError(ErrorCode.APPROVAL_DECLINED, "no approval channel")
        asking = ask_for_tool(
            service.approvals.broker,
            operation=spec.operation,
            defaults=NEEDS_APPROVAL_BY_DEFAULT,
            require_approval=rules.enabled,
            overrides=rules.overrides,
            request=request,
            elicit=None,
        )
        if asking is not None:
            await asking
    return await spec.handler(ctx, args)
