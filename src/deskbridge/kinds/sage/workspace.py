"""The sage kind as a deskbridge workspace: the index service, its read-only `sage_*` tools, build progress as events."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deskbridge.core.tools import ToolSpec
from deskbridge.kinds.base import KindServices, KindWorkspaceBase
from deskbridge.kinds.sage.service import SageService
from deskbridge.kinds.sage.tools import sage_tools


class SageWorkspace(KindWorkspaceBase):
    """One opened mod project. The index builds in the background; queries answer from the newest usable index."""

    kind = "sage"

    def __init__(self, path: Path, services: KindServices) -> None:
        sdk = services.options.get("sdk") or services.settings.sage.sdk
        self.services = services
        self.service = SageService(path, sdk)
        self.path = self.service.project

    def tools(self) -> list[ToolSpec]:
        return sage_tools(self.service)

    async def start(self) -> None:
        events = self.services.events

        def progress(done: float, total: float | None = None, message: str | None = None) -> None:
            events.publish("task", {"task": "sage-index", "done": done, "total": total, "message": message})

        await self.service.start(progress=progress)

    async def stop(self) -> None:
        await self.service.stop()

    def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path), **self.service.status()}


def open_workspace(path: Path, services: KindServices) -> SageWorkspace:
    return SageWorkspace(path, services)
