"""The draft barrier for Markdown documents: unsynced browser edits must reach the server before save/close.

A browser editor may hold changes it has not pushed yet (typing in flight, or a push that must be rebased).
Each editor reports its pending count; save, open-over and close first ask the editors to flush and wait until
every count is zero, or fail with UI_DRAFT_PENDING (research/markdown.md §4.5; core `lifecycle` barrier).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import UI_BARRIER_TIMEOUT_S

CLIENT_STALE_S = 60.0
"""Seconds after which a client that stopped reporting no longer holds the barrier (its tab is gone)."""


class DraftTracker:
    """Pending-change counts per document and editor, and the barrier that waits for them to drain."""

    def __init__(self, publish: Callable[[str, dict[str, Any]], None]) -> None:
        self._pending: dict[str, dict[str, tuple[int, float]]] = {}
        self._publish = publish

    def report(self, doc_id: str, client_id: str, pending: int) -> None:
        """An editor says how many local changes it has not had accepted yet (0 = in sync)."""
        per_doc = self._pending.setdefault(doc_id, {})
        if pending <= 0:
            per_doc.pop(client_id, None)
        else:
            per_doc[client_id] = (int(pending), time.monotonic())

    def forget(self, doc_id: str) -> None:
        self._pending.pop(doc_id, None)

    def pending(self, doc_id: str) -> int:
        now = time.monotonic()
        per_doc = self._pending.get(doc_id, {})
        for client, (_, seen) in list(per_doc.items()):
            if now - seen > CLIENT_STALE_S:
                del per_doc[client]
        return sum(n for n, _ in per_doc.values())

    async def barrier(self, doc_id: str, *, timeout_s: float = UI_BARRIER_TIMEOUT_S) -> None:
        """Ask editors to flush and wait until nothing is pending; UI_DRAFT_PENDING on timeout."""
        if self.pending(doc_id) == 0:
            return
        self._publish("doc", {"type": "flush-drafts", "docId": doc_id})
        deadline = time.monotonic() + timeout_s
        while self.pending(doc_id) > 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BridgeError(
                    ErrorCode.UI_DRAFT_PENDING,
                    f"the editor still has {self.pending(doc_id)} unsynced change(s) in this document",
                    data={"docId": doc_id},
                )
            # Polling keeps the tracker free of loop-bound primitives; a barrier is rare and short.
            await asyncio.sleep(min(left, 0.02))
