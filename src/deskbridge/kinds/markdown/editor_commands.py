"""Editor commands an AI asks for (`md_ui_apply_editor_command`) go through the same rule as any AI edit.

Issue 8: `selectAll` + `codeFence`, then `undo` ×3 and a save, used to change the file with no approval and
discard the person's typing, because the browser ran the command as the person's own edit. Now:

* a command that only moves the selection or copies (`selectAll`, `copy`) is still run by the editor;
* every command that changes text is *prepared* by the open editor — it computes the change at the person's
  cursor on its synced text without applying it — and sent back here (`POST /api/markdown/commands/{id}`);
  the change then enters the document like every AI edit (`MarkdownService.apply_edits`): the person
  approves it with its diff, it arrives as an AI update (its own undo step, highlighted), and it is audited;
* `undo` / `redo` from an AI undo or redo the last *AI* change only (the editor keeps a stack of the AI
  updates it applied, mapped through everything typed since); the person's own keystrokes are never reached;
* a command that changes nothing asks nothing.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.collab import changes_to_edits

UI_ONLY_COMMANDS: Final = frozenset({"copy", "selectAll"})
"""Commands that change no text: the editor runs them as before (no approval)."""

PREPARE_TIMEOUT_S: Final = 5.0
"""Seconds the open editor has to prepare a command's change."""


class CommandRequests:
    """Commands sent to the editor that wait for its prepared change (one future per request id)."""

    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._waiting: dict[str, tuple[str, asyncio.Future[dict[str, Any]]]] = {}

    def open(self, doc_id: str) -> tuple[str, asyncio.Future[dict[str, Any]]]:
        request_id = f"c{next(self._ids)}"
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (doc_id, future)
        return request_id, future

    def close(self, request_id: str) -> None:
        self._waiting.pop(request_id, None)

    def answer(self, request_id: str, body: dict[str, Any]) -> bool:
        """The editor's prepared change; False when nobody waits for it (late, or another tab answered)."""
        waiting = self._waiting.get(request_id)
        if waiting is None or waiting[1].done():
            return False
        if body.get("docId") not in (None, waiting[0]):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the prepared change is for another document")
        waiting[1].set_result(body)
        return True


def requests_of(service: Any) -> CommandRequests:
    found = getattr(service, "_command_requests", None)
    if found is None:
        found = CommandRequests()
        service._command_requests = found
    return found


async def run_agent_command(service: Any, publish: Any, ctx: CallContext, command: str) -> dict[str, Any]:
    """Have the editor prepare `command`, then apply its change as an AI edit (approval with the diff)."""
    doc = service.get(None)
    requests = requests_of(service)
    request_id, future = requests.open(doc.doc_id)
    try:
        publish({"kind": "command", "command": command, "requestId": request_id, "docId": doc.doc_id})
        try:
            body = await asyncio.wait_for(future, PREPARE_TIMEOUT_S)
        except TimeoutError:
            raise BridgeError(
                ErrorCode.UI_NOT_READY,
                f"the editor did not prepare '{command}' within {PREPARE_TIMEOUT_S:g} s",
                hint="Make sure the deskbridge editor is open on this document, then retry.",
            ) from None
    finally:
        requests.close(request_id)
    if body.get("error"):
        raise BridgeError(
            ErrorCode.UI_DRAFT_PENDING if body["error"] == "pending" else ErrorCode.UI_NOT_READY,
            f"the editor could not prepare '{command}': {body['error']}",
        )
    changes = body.get("changes")
    if not changes:
        what = "no AI change to undo" if command in ("undo", "redo") else "nothing to change there"
        return {"command": command, "changed": False, "note": what, **service.describe(doc)}
    version = body.get("version")
    if not isinstance(version, int) or version != doc.version:
        raise BridgeError(
            ErrorCode.STALE_WORKSPACE,
            "the document changed while the editor prepared the command; nothing was changed",
            hint="Retry the command.",
            data={"revision": doc.revision},
        )
    edits = changes_to_edits(changes, None, doc.collab.offsets)
    # Asked here (apply_edits with ask=True), not centrally from ToolSpec.operation: App.invoke asks before
    # the handler runs, and until the open editor has prepared the command nobody knows what it changes —
    # a central question could show no diff, and a command that turns out to change nothing must ask
    # nothing. The broker, rules, audit record (App.invoke's, once) and a timeout's "timed_out" are the same.
    result = await service.apply_edits(
        doc.doc_id,
        edits,
        ctx=ctx,
        tool="md_ui_apply_editor_command",
        base_version=version,
        summary=f"editor command: {command}"
        + (" (the last AI change)" if command in ("undo", "redo") else ""),
    )
    return {"command": command, "changed": bool(edits), **result}
