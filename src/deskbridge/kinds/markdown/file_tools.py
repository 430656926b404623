"""The editor's file operations as tools: save a pasted or dropped image beside the document, create, rename and
delete documents, close one. The web UI calls them through `POST /api/tools/{name}` (`App.invoke`, caller `ui`:
validated, audited once, like every tool); they are `listed=False`, so a model's tools/list stays within its
token budget, but an MCP client may call them by name and then the person is asked first.

Every write goes through `core.files` (`publish_new` and `rename_noreplace`: never over an existing file), paths through
the workspace's scope (`scope.Workspace.resolve`), and a delete moves the file to the system's trash
(Send2Trash: the freedesktop.org Trash spec on Linux, the Finder's trash on macOS, the Recycle Bin on Windows,
https://github.com/arsenetar/send2trash) — never an unlink.
"""

from __future__ import annotations

import base64
import binascii
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from pydantic import Field

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalText
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec

if TYPE_CHECKING:
    from deskbridge.kinds.markdown.recent import RecentFiles
    from deskbridge.kinds.markdown.service import MarkdownService

IMAGE_MAX_BYTES: Final = 16 * 1024 * 1024
"""A larger paste is refused (the same limit as an image an export embeds)."""

_IMAGE_MAGIC: Final = (
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"GIF87a", ".gif"),
    (b"GIF89a", ".gif"),
)
_NAME_UNSAFE: Final = re.compile(r"[^\w.\-]+", re.UNICODE)


class SaveImageArgs(ToolArgs):
    data_base64: str = Field(
        alias="dataBase64", description="The image file, base64 (PNG, JPEG, GIF or WebP)."
    )
    file_name: str | None = Field(
        None, alias="fileName", description="Suggested name (the pasted file's); the type decides the suffix."
    )
    doc_id: str | None = Field(
        None, alias="docId", description="Document the image is for (default: current)."
    )


class PathArgs(ToolArgs):
    path: str = Field(description="Markdown file, relative to the workspace folder.")


class RenameArgs(ToolArgs):
    path: str = Field(description="Markdown file to rename, relative to the workspace folder.")
    new_path: str = Field(alias="newPath", description="Its new name (a Markdown file that does not exist).")


class DocArgs(ToolArgs):
    doc_id: str | None = Field(None, alias="docId", description="Open document (default: current).")


class CloseArgs(ToolArgs):
    doc_id: str | None = Field(None, alias="docId", description="Open document to close (default: current).")
    discard: bool = Field(False, description="Close even with unsaved changes (they are lost).")


def image_suffix(data: bytes) -> str | None:
    """The file suffix of a PNG, JPEG, GIF or WebP by its first bytes, else None (the name is not trusted)."""
    for magic, suffix in _IMAGE_MAGIC:
        if data.startswith(magic):
            return suffix
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    return None


def _stem(name: str | None) -> str:
    stem = Path(name or "").stem if name else ""
    stem = _NAME_UNSAFE.sub("-", stem).strip("-.")[:60]
    return stem or time.strftime("image-%Y%m%d-%H%M%S")


def file_tools(service: MarkdownService, recent: RecentFiles | None = None) -> list[ToolSpec]:
    """The editor's file tools (see the module docstring); `recent` keeps File → Recent files."""

    def folder_root() -> Path:
        return service.workspace.allowed_root

    def save_image(ctx: CallContext, args: SaveImageArgs) -> dict[str, Any]:
        doc = service.get(args.doc_id)
        if doc.path is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "the document has no file yet, so there is no folder to put the image in",
                hint="Save it first (md_save_current_document_as), then paste the image again.",
            )
        try:
            data = base64.b64decode(args.data_base64, validate=True)
        except (binascii.Error, ValueError):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "dataBase64 is not base64") from None
        if len(data) > IMAGE_MAX_BYTES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"the image is {len(data):,} bytes; at most {IMAGE_MAX_BYTES:,} are saved",
                hint="Make the image smaller, then paste it again.",
            )
        suffix = image_suffix(data)
        if suffix is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "this is not a PNG, JPEG, GIF or WebP image",
                hint="Paste or drop an image file of one of those types.",
            )
        folder = doc.path.parent
        stem = _stem(args.file_name)
        for n in range(100):
            name = f"{stem}{'' if n == 0 else f'-{n + 1}'}{suffix}"
            try:
                files.publish_new(folder / name, data, root=folder_root())
            except BridgeError as error:
                if error.code == ErrorCode.TARGET_EXISTS:
                    continue
                raise
            # A relative link beside the document, as Typora and Obsidian insert it.
            return {"path": service.workspace.relative(folder / name), "markdown": f"![{stem}]({name})"}
        raise BridgeError(ErrorCode.TARGET_EXISTS, f"100 images named {stem}… exist already")

    def create(ctx: CallContext, args: PathArgs) -> dict[str, Any]:
        target = service.workspace.resolve(args.path, must_exist=False, check_scope=True)
        files.publish_new(target, f"# {target.stem}\n".encode(), root=folder_root())
        return {"path": service.workspace.relative(target), "created": True}

    def rename_paths(args: RenameArgs) -> tuple[Path, Path]:
        source = service.workspace.resolve(args.path, must_exist=True, check_scope=True)
        target = service.workspace.resolve(args.new_path, must_exist=False, check_scope=True)
        if service.find_open(source) is not None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{args.path!r} is open; rename saves it under the new name instead",
                hint="Use md_save_current_document_as for the open document, or md_close_document first.",
            )
        return source, target

    def rename_question(args: RenameArgs) -> ApprovalText:
        # asked centrally by App.invoke ("rename") for an AI's call; the person's own click is not asked
        _source, target = rename_paths(args)
        return ApprovalText(f"rename to {target.name}", target=args.path)

    async def rename(ctx: CallContext, args: RenameArgs) -> dict[str, Any]:
        source, target = rename_paths(args)
        try:
            files.rename_noreplace(source, target)  # atomic, and never over an existing file
        except FileExistsError:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS,
                f"{args.new_path!r} already exists",
                hint="Pick another name for md_rename_file.",
            ) from None
        return {"path": service.workspace.relative(target), "renamedFrom": service.workspace.relative(source)}

    def delete_target(args: PathArgs) -> Path:
        target = service.workspace.resolve(args.path, must_exist=True, check_scope=True)
        if service.find_open(target) is not None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{args.path!r} is open",
                hint="Close it first (md_close_document), then delete it.",
            )
        return target

    def delete_question(args: PathArgs) -> ApprovalText:
        # the person clicked Delete and confirmed in the page; an AI's delete asks them (App.invoke, "delete")
        return ApprovalText(f"move {delete_target(args).name} to the trash", target=args.path)

    async def delete(ctx: CallContext, args: PathArgs) -> dict[str, Any]:
        target = delete_target(args)
        try:
            from send2trash import send2trash
        except ImportError:  # pragma: no cover - a dependency
            raise BridgeError(ErrorCode.NOT_READY, "no trash is available (Send2Trash is missing)") from None
        try:
            send2trash(str(target))
        except OSError as exc:
            raise BridgeError(
                ErrorCode.INTERNAL,
                f"{args.path!r} could not be moved to the trash ({exc.__class__.__name__})",
                hint="Nothing was deleted; delete it in your file manager if you mean to.",
            ) from None
        return {"path": args.path, "trashed": True}

    async def close(ctx: CallContext, args: CloseArgs) -> dict[str, Any]:
        return await service.close(args.doc_id, discard=args.discard)

    def remember(ctx: CallContext, args: DocArgs) -> dict[str, Any]:
        doc = service.get(
            args.doc_id
        )  # the server's own path of an open document, never a path from the page
        if recent is None or doc.path is None:
            return {"remembered": False}
        recent.add(doc.path)
        return {"remembered": True}

    def recent_files(ctx: CallContext, args: NoArgs) -> dict[str, Any]:
        out = []
        for raw in recent.load() if recent is not None else []:
            path = Path(raw)
            inside = service.workspace.allows(path)
            if not path.is_file() or (_is_ai(ctx) and not inside):
                continue  # an AI sees only what its scope allows; paths elsewhere are the person's business
            out.append({"path": raw, "name": path.name, "inWorkspace": inside})
        return {"files": out}

    def ui_tool(
        name: str, title: str, description: str, args: type[ToolArgs], handler: Any, **kw: Any
    ) -> ToolSpec:
        return ToolSpec(name, title, description, args, handler, listed=False, needs_editor=False, **kw)

    return [
        ui_tool(
            "md_save_image",
            "Save image beside the document",
            "Save a pasted or dropped image next to the document under a new name and return the relative "
            "Markdown link to insert.",
            SaveImageArgs,
            save_image,
        ),
        ui_tool("md_create_file", "New document", "Create an empty Markdown file.", PathArgs, create),
        ui_tool(
            "md_rename_file",
            "Rename document",
            "Rename a Markdown file that is not open.",
            RenameArgs,
            rename,
            operation="rename",
            approval_summary=rename_question,
        ),
        ui_tool(
            "md_delete_file",
            "Delete document",
            "Move a Markdown file that is not open to the system's trash (an AI's call asks the person first).",
            PathArgs,
            delete,
            destructive=True,
            operation="delete",
            approval_summary=delete_question,
        ),
        ui_tool("md_close_document", "Close document", "Close an open document.", CloseArgs, close),
        ui_tool(
            "md_remember_recent",
            "Remember a recent document",
            "Add an open document to the recent files.",
            DocArgs,
            remember,
            idempotent=True,
        ),
        ui_tool(
            "md_recent_files",
            "Recent documents",
            "The recently opened documents that still exist, newest first.",
            NoArgs,
            recent_files,
            read_only=True,
        ),
    ]


def _is_ai(ctx: CallContext) -> bool:
    from deskbridge.kinds.markdown.service import is_ai

    return is_ai(ctx)
