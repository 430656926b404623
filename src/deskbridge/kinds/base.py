"""The interface between the platform and a workspace kind, and how a path picks its kind.

A kind opens a path into a `KindWorkspace`: the tools it offers (served over MCP), the web API routes it adds
under `/api/<kind>`, an optional browser UI, and start/stop hooks for background work (indexing, watching).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from starlette.routing import BaseRoute

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import ToolSpec


@dataclass
class KindServices:
    """What the platform hands a kind when it opens: shared services, never a second copy of state."""

    settings: Any
    """`deskbridge.settings.Settings` as loaded at start."""
    dirs: Any
    """`deskbridge.settings.Dirs`."""
    events: Any
    """`deskbridge.core.events.EventBus`."""
    audit: Any
    """`deskbridge.core.audit.AuditLog`."""
    approvals: Any
    """`deskbridge.core.policy.ApprovalBroker`."""
    options: dict[str, Any]
    """Kind-specific options from the command line (e.g. `{"sdk": "..."}` for sage)."""
    invoke: Any = None
    """`App.invoke(name, arguments, CallContext)`: how a kind's web routes run a change as the tool it is,
    so it is validated, approved and audited once, exactly like the same call over MCP."""


@runtime_checkable
class KindWorkspace(Protocol):
    """An opened workspace of one kind.

    Optional members the platform looks for: `resources() -> list[ResourceSpec]` (MCP resources, served by
    `mcp/server.py` from the App's one registry) and `approval_defaults: dict[str, bool]` (which of its tools'
    approval operations ask when the `approval_rules` setting says nothing; see `ToolSpec.operation`), and
    `async outside_change(tool) -> dict | None` (asked by `App.invoke` before every tool call: has another
    program changed what is open on disk? A notice returned travels with the answer as `externalChange`, in
    the result or the error's data; `core.lifecycle.outside_change` is the one rule for telling).
    `KindWorkspaceBase` below has the defaults of the members a kind may not need."""

    kind: str
    """Short kind name: 'pvf', 'markdown', 'sage'; the kind's web API is mounted at `/api/<kind>`."""
    path: Path
    """What was opened (file or folder)."""

    def tools(self) -> list[ToolSpec]: ...

    def api_routes(self) -> list[BaseRoute]: ...

    def static_dir(self) -> Path | None:
        """Folder with the kind's built browser UI (`index.html`), or None for the platform page."""
        ...

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    def status(self) -> dict[str, Any]: ...


class KindWorkspaceBase:
    """The defaults of `KindWorkspace` for a kind that needs nothing more: no web routes, the platform page,
    no background work, and a status naming the kind and path. A kind overrides only what it has."""

    kind: str
    path: Path

    def api_routes(self) -> list[BaseRoute]:
        return []

    def static_dir(self) -> Path | None:
        return None

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None

    def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "path": str(self.path)}


@dataclass(frozen=True)
class KindEntry:
    """How to recognise and open one kind. `opener` is 'module:function' so unused kinds are never imported."""

    name: str
    detect: Callable[[Path], bool]
    opener: str
    description: str
    empty_ok: bool = False
    """The kind can start with an empty workspace (no path) and open one later through a tool."""

    def open(self, path: Path | None, services: KindServices) -> KindWorkspace:
        module_name, _, func_name = self.opener.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            raise BridgeError(
                ErrorCode.UNSUPPORTED_CHANGE,
                f"this build of deskbridge cannot serve {self.description} as a workspace yet",
                hint=f"Use the `deskbridge {self.name} --help` commands for this kind meanwhile.",
            ) from exc
        return getattr(module, func_name)(path, services)


MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdown", ".txt")


def _is_pvf(path: Path) -> bool:
    return path.is_file() and path.suffix.lower() == ".pvf"


def _is_sage(path: Path) -> bool:
    from deskbridge.kinds.sage.project import looks_like_project  # the sage kind owns its markers

    return looks_like_project(path)


def _is_markdown(path: Path) -> bool:
    if path.is_file():
        return path.suffix.lower() in MARKDOWN_SUFFIXES
    return path.is_dir()


KINDS: tuple[KindEntry, ...] = (
    KindEntry(
        "pvf",
        _is_pvf,
        "deskbridge.kinds.pvf.workspace:open_workspace",
        "a DNF Script.pvf archive",
        empty_ok=True,
    ),
    KindEntry("sage", _is_sage, "deskbridge.kinds.sage.workspace:open_workspace", "a RA3 / C&C3 mod project"),
    KindEntry(
        "markdown",
        _is_markdown,
        "deskbridge.kinds.markdown.workspace:open_workspace",
        "a Markdown document or a folder of them",
    ),
    KindEntry(
        "probe",
        lambda _p: False,
        "deskbridge.kinds.probe:open_workspace",
        "a tiny built-in kind for transport tests and the MCP conformance suite",
    ),
)


def project_target(path: Path, kind: str | None = None) -> Path:
    """What `deskbridge mcp --project PATH` opens: PATH, except that a folder holding one `.pvf` archive and no
    Markdown document or mod (the game folder, as the MCP bundle's folder picker gives it) means that archive.
    Such a folder used to open as an empty Markdown workspace: every pvf_* tool was unknown."""
    if kind not in (None, "pvf") or not path.is_dir() or _is_sage(path):
        return path
    try:
        entries = [p for p in path.iterdir() if p.is_file()]
    except OSError:
        return path
    archives = [p for p in entries if p.suffix.lower() == ".pvf"]
    notes = [p for p in entries if p.suffix.lower() in MARKDOWN_SUFFIXES and p.suffix.lower() != ".txt"]
    if len(archives) == 1 and (kind == "pvf" or not notes):
        return archives[0]
    return path


def find_kind(path: Path, kind: str | None = None) -> KindEntry:
    """The kind named, or the first whose detector accepts the path (pvf, then sage, then markdown)."""
    if kind:
        for entry in KINDS:
            if entry.name == kind:
                return entry
        names = ", ".join(e.name for e in KINDS)
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"unknown kind {kind!r}", hint=f"Use one of: {names}.")
    if not path.exists():
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"{str(path)!r} does not exist",
            hint="Pass an existing .pvf file, mod folder, Markdown file or folder.",
        )
    for entry in KINDS:
        if entry.detect(path):
            return entry
    raise BridgeError(
        ErrorCode.INVALID_ARGUMENT,
        f"{str(path)!r} is not a kind deskbridge knows",
        hint="Open a .pvf archive, a mod folder with Data/Mod.xml, or a .md/.markdown/.txt file or folder; "
        "or name the kind with --kind.",
    )
