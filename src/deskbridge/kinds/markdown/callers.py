"""Who is calling: the person (the browser, the CLI) or an AI client (`mcp:<session>`)."""

from __future__ import annotations

from deskbridge.core.tools import CallContext

UI = CallContext(caller="ui", client_name="deskbridge web UI")
"""The person acting through the browser: never asked for approval; audited by App.invoke like any caller."""


def is_ai(ctx: CallContext) -> bool:
    return ctx.caller.startswith("mcp:")
