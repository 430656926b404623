"""The markdown kind's service: the open documents of one workspace and what may be done to them.

This is the single source of truth the web routes (`web.py`), the MCP tools (`tools.py`, `ui_tools.py`) and the
CLI all call. It is split by reason to change — documents and their files (documents.py), editing the text
(editing.py), derived views (views.py) — and this module holds what they share: the state, the events and
the status. Callers named `mcp:<client>` are AI clients: their edits, overwrites and opens outside the
workspace ask the person first (approvals.py); `App.invoke` audits every call once, whoever makes it.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from deskbridge import __version__
from deskbridge.core.engine import Engine
from deskbridge.core.policy import ApprovalRules
from deskbridge.kinds.markdown.approvals import Approvals, approval_rules
from deskbridge.kinds.markdown.callers import UI, is_ai
from deskbridge.kinds.markdown.document import MarkdownDocument
from deskbridge.kinds.markdown.documents import OPEN_DOCUMENTS_MAX, Documents
from deskbridge.kinds.markdown.editing import Editing
from deskbridge.kinds.markdown.outline import Heading
from deskbridge.kinds.markdown.render import PreviewRenderer
from deskbridge.kinds.markdown.scope import AccessScope, Workspace
from deskbridge.kinds.markdown.store import MarkdownStore
from deskbridge.kinds.markdown.views import Views

__all__ = ["OPEN_DOCUMENTS_MAX", "UI", "MarkdownService", "is_ai"]

log = logging.getLogger(__name__)


class MarkdownService(Documents, Editing, Views):
    """All open Markdown documents of one workspace (a document or a folder) and what may be done to them."""

    def __init__(
        self,
        root: Path,
        *,
        scope: AccessScope | str = AccessScope.CURRENT_FOLDER,
        custom_folder: Path | None = None,
        policy: Any | None = None,
        events: Any | None = None,
        audit: Any | None = None,
        approval_settings: ApprovalRules | Mapping[str, Any] | None = None,
    ) -> None:
        self.workspace = Workspace.create(Path(root), scope, custom_folder)
        self.events = events
        self.approvals = Approvals(policy, approval_rules(approval_settings))
        self.audit = audit
        """The core audit log (`App.invoke` records every tool call in it once); None outside a server."""
        self.docs: dict[str, MarkdownDocument] = {}
        self.engine = Engine(
            MarkdownStore(self),
            SimpleNamespace(publish=self.publish),  # type: ignore[arg-type]
            backup_on_save=False,
        )
        """The one engine: the folder is its workspace, the open documents its keys (store.py); it keeps the
        revision, the saved state and each document file's identity, and runs save / save-as."""
        self.engine.lifecycle.open_first(self.workspace.root, caller="ui")
        self.drafts = self.engine.drafts
        """The core draft barrier: every editor whose event stream is open is asked before a save or close
        (the platform registers it; web/app.py) and must answer in time without a draft."""
        self.current_id: str | None = None
        self._ids = itertools.count(1)
        self._render_lock = threading.Lock()
        self._renderers: dict[str, PreviewRenderer] = {}
        self._preview_cache: dict[str, tuple[int, str]] = {}
        self._outline_cache: dict[str, tuple[int, list[Heading]]] = {}
        self.ui_state: Any | None = None
        """Set by the md-ui side (`ui_state.py`) so status tools can report theme/layout."""
        if self.workspace.document is not None:
            self.open_path(self.workspace.document)

    # --- events ----------------------------------------------------------------------------------------

    def publish(self, topic: str, data: dict[str, Any]) -> None:
        """Send an event to the browser (SSE) through the core bus; sync or async buses both work."""
        if self.events is None:
            return
        fn = getattr(self.events, "publish", self.events)
        try:
            result = fn(topic, data)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(lambda t: t.exception())
        except Exception:  # an event that cannot be delivered must not fail the edit
            log.exception("markdown: publishing %s failed", topic)

    # --- status ----------------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        current = None
        if self.current_id in self.docs:
            current = self.describe(self.docs[self.current_id])
        ui = {}
        if self.ui_state is not None:
            snap = getattr(self.ui_state, "snapshot", None)
            ui = snap() if callable(snap) else {}
        return {
            "version": __version__,
            "workspace": str(self.workspace.root),
            "scope": self.workspace.scope.value,
            "openDocuments": len(self.docs),
            "currentFilePath": current["absolutePath"] if current else None,
            "isDirty": bool(current and current["dirty"]),
            "requireApproval": self.approvals.rules.enabled,
            **{k: ui[k] for k in ("theme", "typography", "cultureName") if k in ui},
        }
