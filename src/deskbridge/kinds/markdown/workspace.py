"""The markdown kind as a deskbridge workspace: the document service, the browser editor, `md_*` and `md_ui_*` tools.

Approval settings are read live: changing `require_approval` or `approval_rules` (CLI, UI settings panel) takes
effect for the next operation without reopening.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from starlette.routing import BaseRoute

from deskbridge.core.policy import ApprovalRules
from deskbridge.core.tools import ToolSpec
from deskbridge.kinds.base import KindServices
from deskbridge.kinds.markdown.approvals import NEEDS_APPROVAL_BY_DEFAULT, approval_rules
from deskbridge.kinds.markdown.file_tools import file_tools
from deskbridge.kinds.markdown.recent import RECENT_FILE, RecentFiles
from deskbridge.kinds.markdown.scope import AccessScope
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools
from deskbridge.kinds.markdown.ui_state import UI_STATE_FILE, UiState
from deskbridge.kinds.markdown.ui_tools import markdown_ui_tools
from deskbridge.kinds.markdown.web import markdown_routes

STATIC_DIR = Path(__file__).parent / "static"
FRONT_PAGES = ("README.md", "readme.md", "index.md", "Index.md")

SCOPES = {
    "current_document": AccessScope.CURRENT_DOCUMENT,
    "current_folder": AccessScope.CURRENT_FOLDER,
    "custom_folder": AccessScope.CUSTOM_FOLDER,
}


def _rules_settings(settings: Any) -> dict[str, Any]:
    return {"enabled": settings.require_approval, "overrides": dict(settings.approval_rules)}


class MarkdownWorkspace:
    """One opened document or folder, shared by the browser editor and every MCP client."""

    kind = "markdown"
    approval_defaults = NEEDS_APPROVAL_BY_DEFAULT
    """Which operations ask when the `approval_rules` setting says nothing (App.invoke decides edits from
    `ToolSpec.operation`)."""

    def __init__(self, path: Path, services: KindServices) -> None:
        settings = services.settings
        scope = SCOPES[settings.access_scope]
        custom = Path(settings.custom_roots[0]) if settings.custom_roots else None
        self.services = services
        self.path = path
        self.rules: ApprovalRules = approval_rules(_rules_settings(settings))
        self.service = MarkdownService(
            path,
            scope=scope,
            custom_folder=custom,
            policy=services.approvals,
            events=services.events,
            audit=services.audit,
            approval_settings=self.rules,
        )
        # View settings survive a restart; the view tools answer UI_NOT_READY while no editor is open.
        self.ui_state = UiState.persistent(
            services.dirs.config / UI_STATE_FILE,
            events=services.events,
            editor_open=lambda: services.approvals.ui_attached,
        )
        self.recent = RecentFiles(services.dirs.config / RECENT_FILE)
        if path.is_dir():
            # A folder opens on its front page when it has one, so the editor is never empty on arrival.
            front = next((path / n for n in FRONT_PAGES if (path / n).is_file()), None)
            if front is not None and not self.service.list_open():
                self.service.open_path(front)
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def drafts(self) -> Any:
        """The core draft barrier the platform registers this workspace's editors with (web/app.py)."""
        return self.service.drafts

    def tools(self) -> list[ToolSpec]:
        return [
            *markdown_tools(self.service),
            *markdown_ui_tools(self.service, self.ui_state),
            *file_tools(self.service, self.recent),  # the editor's file operations (not listed to models)
        ]

    def api_routes(self) -> list[BaseRoute]:
        return list(markdown_routes(self.service, self.ui_state, invoke=self.services.invoke))

    def static_dir(self) -> Path | None:
        return STATIC_DIR

    async def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._follow_settings()),
            asyncio.create_task(self.service.watch_disk()),
        ]

    async def _follow_settings(self) -> None:
        with contextlib.closing(self.services.events.subscribe("settings")) as subscription:
            async for event in subscription:
                if "require_approval" in event.data:  # settings are one live object; copy into the rules
                    fresh = _rules_settings(self.services.settings)
                    self.rules.enabled = fresh["enabled"]
                    self.rules.overrides = fresh["overrides"]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        close = getattr(self.service, "close_all", None)
        if close is not None:
            await asyncio.to_thread(close)

    def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), "requireApproval": self.rules.enabled}


def open_workspace(path: Path, services: KindServices) -> MarkdownWorkspace:
    return MarkdownWorkspace(path, services)
