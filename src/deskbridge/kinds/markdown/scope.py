"""Which Markdown files an MCP client may touch: the access scope (seed §9.1) and safe path resolution.

Scopes: `CurrentDocument` (only the document the person opened), `CurrentFolder` (the opened folder, or the
opened document's folder), `CustomFolder` (a folder the person chose). Paths are resolved with symlinks
followed and then checked against the allowed root by the core (`core.paths.resolve_path`: UNC, NUL,
over-long, reserved names and symlink escapes refused); other extensions are refused here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paths import resolve_path

MARKDOWN_SUFFIXES: Final = frozenset({".md", ".markdown", ".mdown", ".txt"})
"""Extensions a document may have (seed §9.1)."""


class AccessScope(StrEnum):
    CURRENT_DOCUMENT = "CurrentDocument"
    CURRENT_FOLDER = "CurrentFolder"
    CUSTOM_FOLDER = "CustomFolder"


def is_markdown_name(name: str) -> bool:
    return Path(name).suffix.lower() in MARKDOWN_SUFFIXES


def _looks_unc(raw: str) -> bool:
    return raw.startswith(("\\\\", "//")) or raw.startswith("\\??\\")


@dataclass(frozen=True)
class Workspace:
    """The opened workspace (a document or a folder) and the scope MCP clients get inside it."""

    root: Path
    """The opened folder, or the opened document's folder."""
    document: Path | None
    """The opened document, when the person opened one file."""
    scope: AccessScope
    custom_folder: Path | None = None

    @classmethod
    def create(
        cls,
        root: Path,
        scope: AccessScope | str = AccessScope.CURRENT_FOLDER,
        custom_folder: Path | None = None,
    ) -> Workspace:
        root = Path(root).resolve()
        scope = AccessScope(scope)
        if root.is_file():
            if not is_markdown_name(root.name):
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"'{root.name}' is not a Markdown document (allowed: {', '.join(sorted(MARKDOWN_SUFFIXES))})",
                )
            document, folder = root, root.parent
        elif root.is_dir():
            document, folder = None, root
        else:
            raise BridgeError(ErrorCode.NOT_FOUND, f"'{root}' does not exist", data={"path": str(root)})
        if scope is AccessScope.CUSTOM_FOLDER:
            if custom_folder is None:
                raise BridgeError(ErrorCode.INVALID_ARGUMENT, "scope CustomFolder needs a folder")
            custom_folder = Path(custom_folder).resolve()
            if not custom_folder.is_dir():
                raise BridgeError(ErrorCode.NOT_FOUND, f"custom folder '{custom_folder}' does not exist")
        return cls(folder, document, scope, custom_folder)

    @property
    def allowed_root(self) -> Path:
        """The folder MCP paths must stay inside."""
        if self.scope is AccessScope.CUSTOM_FOLDER and self.custom_folder is not None:
            return self.custom_folder
        return self.root

    def resolve(self, raw: str, *, must_exist: bool = True, check_scope: bool = True) -> Path:
        """Resolve a user or MCP path (absolute, or relative to the workspace folder) to a safe real path.

        With `check_scope` the result must be inside the scope; without it only the syntax, extension and
        existence are checked (the caller then asks for approval to open outside the workspace).
        """
        if not isinstance(raw, str) or not raw.strip():
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the path is empty")
        given = raw  # errors name the path as the caller gave it, never where a link leads
        if _looks_unc(raw):
            raise BridgeError(
                ErrorCode.ACCESS_DENIED, "network (UNC) paths are not allowed", data={"path": raw}
            )
        raw = os.path.expanduser(raw)
        if check_scope:
            resolved = resolve_path(raw, [self.allowed_root])
        else:
            # Syntax and symlink checks only: an absolute path anywhere (the caller asks the person first).
            if not os.path.isabs(raw):
                raw = os.path.join(self.allowed_root, raw)
            resolved = resolve_path(raw, [Path(os.path.abspath(os.sep))])
        if not is_markdown_name(resolved.name):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{given!r} is not a Markdown document (allowed: {', '.join(sorted(MARKDOWN_SUFFIXES))})",
                data={"path": given},
            )
        if check_scope and not self.allows(resolved):
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"'{raw}' is outside the access scope {self.scope.value} ({self.scope_description()})",
                data={"path": raw, "scope": self.scope.value},
            )
        if must_exist and not resolved.is_file():
            raise BridgeError(ErrorCode.NOT_FOUND, f"{given!r} does not exist", data={"path": given})
        if not must_exist and not resolved.parent.is_dir():
            raise BridgeError(
                ErrorCode.NOT_FOUND, f"the folder of {given!r} does not exist", data={"path": given}
            )
        return resolved

    def allows(self, resolved: Path) -> bool:
        """True when the already-resolved path is inside the scope."""
        if self.scope is AccessScope.CURRENT_DOCUMENT:
            return self.document is not None and resolved == self.document
        root = self.allowed_root
        return resolved == root or resolved.is_relative_to(root)

    def scope_description(self) -> str:
        if self.scope is AccessScope.CURRENT_DOCUMENT:
            return f"only {self.document.name if self.document else 'the opened document'}"
        return f"inside {self.allowed_root}"

    def relative(self, path: Path) -> str:
        """A path as shown to clients: relative to the workspace folder when inside it."""
        try:
            return path.relative_to(self.root).as_posix()
        except ValueError:
            return str(path)

    def iter_documents(self, limit: int = 100_000) -> list[Path]:
        """Markdown files the scope allows, sorted, hidden folders skipped."""
        if self.scope is AccessScope.CURRENT_DOCUMENT:
            return [self.document] if self.document else []
        out: list[Path] = []
        root = self.allowed_root
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
            for name in sorted(filenames):
                if is_markdown_name(name) and not name.startswith("."):
                    p = Path(dirpath) / name
                    if Path(os.path.realpath(p)).is_relative_to(root):
                        out.append(p)
                        if len(out) >= limit:
                            return out
        return out
