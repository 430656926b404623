"""The markdown kind's browser JSON API: the routes the CodeMirror editor calls, mounted by the platform under
`/api/<kind>` (today `/api/markdown`).

Routes only validate input and call the document service (md-contract.md "Web API"); no editing rule lives here.
The collab wire is CodeMirror's (`@codemirror/collab`): push `{version, updates:[{clientID, changes}]}` → `{ok}` or
409 `{version}`; pull `?version=N` long-polls up to 25 s → `{updates}`. Positions on this wire are UTF-16 units.
Host/Origin checks and the per-launch UI secret are enforced by the platform middleware in front of every route.
"""

from __future__ import annotations

import contextlib
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote

import anyio
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from deskbridge.core.errors import BridgeError, ErrorCode, internal
from deskbridge.core.paths import resolve_path
from deskbridge.core.tools import CallContext
from deskbridge.kinds.http import ElementRoute, error_response, int_arg, json_body
from deskbridge.kinds.markdown.approvals import NEEDS_APPROVAL_BY_DEFAULT
from deskbridge.kinds.markdown.collab import INSERT_MAX_CHARS
from deskbridge.kinds.markdown.editor_commands import requests_of
from deskbridge.kinds.markdown.export import FORMATS, RICH_TARGETS, export_bytes, export_gate, rich_html
from deskbridge.kinds.markdown.service import UI
from deskbridge.kinds.markdown.ui_state import UiState

STATIC_DIR: Final = Path(__file__).parent / "static"
"""The built editor (index.html, app.js, app.css, fonts); `KindWorkspace.static_dir()` returns this."""

PUSH_BODY_MAX_BYTES: Final = 4 * INSERT_MAX_CHARS
"""Bytes of one collab push at most: room for one update inserting as much as the collab authority takes
(`INSERT_MAX_CHARS`, at most 4 UTF-8 bytes each), so a large paste is not refused by the transport's general 8 MiB
body limit before the rule that is meant for it — it could then never reach the server, and its save was refused
until the tab was closed and the paste lost."""

PULL_WAIT_MAX_S: Final = 25.0
"""Seconds one pull request waits for news (the contract's long-poll limit; below common proxy timeouts)."""

FILES_MAX: Final = 2000
"""Files listed in the sidebar at most (the list says `truncated` beyond)."""

ASSET_TYPES: Final = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".bmp": "image/bmp",
    ".avif": "image/avif",
    ".ico": "image/x-icon",
}
"""Files the preview may load from the document's folder (images only)."""

ASSET_MAX_BYTES: Final = 32 * 1024 * 1024
"""Bytes of one image the preview loads at most."""

REQUEST_HEADER: Final = "x-deskbridge-request"
"""Header the editor sends with requests that start costly work (`export`); a page cannot send it cross-origin
without a CORS preflight (which fails) and a document's markup cannot send it at all."""

EXPORT_AUDIT_TOOL: Final = "md.export_download"
"""How the core audit names the person's own export from the editor (md_get_operation_audit shows it)."""

EXPORT_FORMATS: Final = {
    "html": ("HTML", "text/html; charset=utf-8"),
    "pdf": ("PDF", "application/pdf"),
    "png": ("PNG", "image/png"),
    "docx": ("Word", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"),
}
"""The browser's format names → export.py's format names and the download's media type."""


def _str_arg(body: dict[str, Any], name: str, *, required: bool = True, max_len: int = 4096) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value) or len(value) > max_len:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"{name} must be a non-empty string of ≤ {max_len} characters"
        )
    return value


def _choice(value: str | None, allowed: tuple[str, ...], name: str) -> str:
    folded = (value or "").strip().lower()
    if folded not in allowed:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{name} {value!r} is not one of: {', '.join(allowed)}",
            data={"allowed": list(allowed)},
        )
    return folded


Endpoint = Callable[[Request], Awaitable[Response]]

Invoke = Callable[[str, dict[str, Any], CallContext], Awaitable[dict[str, Any]]]
"""`App.invoke`: run one tool call as the platform does for MCP (validation, approval, one audit record)."""


def _guarded(handler: Callable[[Request], Awaitable[Any]]) -> Endpoint:
    """Turn a handler returning a dict (or a Response) into an endpoint; BridgeErrors become JSON errors.

    Which browser requests reach it at all (the editor's own fetches; `image` for a document's pictures) is the
    platform middleware's rule (web/security.py `fetch_metadata_refusal`), with the routes below that serve
    elements marked as `ElementRoute`s."""

    async def endpoint(request: Request) -> Response:
        try:
            result = await handler(request)
        except BridgeError as error:
            return error_response(error)
        except Exception as exc:  # never leak a traceback to the page
            return error_response(internal(exc))
        return result if isinstance(result, Response) else JSONResponse(result)

    return endpoint


def markdown_routes(
    service: Any, ui_state: UiState | None = None, *, invoke: Invoke | None = None
) -> list[Route]:
    """The routes of the markdown editor's API, relative to where the platform mounts them (`/api/markdown`).

    `service` is the kind's `MarkdownService` (service.py); `ui_state` the shared `UiState` (a private one is
    made when none is given). The service learns the UI state so its status tool can report theme and layout.
    `invoke` is `App.invoke`: opening and saving from the editor run as the tools they are (caller `ui`), so
    they are validated and audited once, by the platform, like the same call from an MCP client.
    """

    async def tool(name: str, arguments: dict[str, Any]) -> Any:
        if invoke is None:
            raise BridgeError(ErrorCode.NOT_READY, "the editor API is not connected to the platform")
        return await invoke(name, arguments, UI)

    state = ui_state if ui_state is not None else UiState(events=getattr(service, "events", None))
    render_lock = anyio.Lock()
    if getattr(service, "ui_state", None) is None:
        service.ui_state = state

    # -- documents and files -----------------------------------------------------------------------------
    async def list_docs(request: Request) -> Any:
        return {"docs": service.list_open(), "current": service.current_id}

    async def list_files(request: Request) -> Any:
        limit = min(int_arg(request.query_params.get("limit", FILES_MAX), "limit", minimum=1), FILES_MAX)
        paths = await anyio.to_thread.run_sync(lambda: service.workspace.iter_documents(limit + 1))
        files = [{"path": service.workspace.relative(p), "name": p.name} for p in paths[:limit]]
        return {"files": files, "truncated": len(paths) > limit}

    async def open_doc(request: Request) -> Any:
        body = await json_body(request)
        arguments = {"path": _str_arg(body, "path")}
        encoding = _str_arg(body, "encoding", required=False, max_len=32)
        if encoding:  # the person named the file's encoding after an ENCODING_MISMATCH
            arguments["encodingName"] = encoding
        return await tool("md_open_document", arguments)

    async def get_doc(request: Request) -> Any:
        return service.read(request.path_params["doc_id"])

    # -- collab ------------------------------------------------------------------------------------------
    async def push(request: Request) -> Any:
        body = await json_body(request, max_bytes=PUSH_BODY_MAX_BYTES)
        version = int_arg(body.get("version"), "version")
        updates = body.get("updates")
        if not isinstance(updates, list):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "updates must be a list of {clientID, changes}")
        result = service.push(request.path_params["doc_id"], version, updates)
        if not result.get("ok"):
            # Behind: the client pulls what it missed, rebases its local changes and pushes again.
            return JSONResponse(result, status_code=409)
        return result

    async def pull(request: Request) -> Any:
        version = int_arg(request.query_params.get("version"), "version")
        try:
            wait = float(request.query_params.get("wait", PULL_WAIT_MAX_S))
        except ValueError:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "wait must be a number of seconds") from None
        return await service.pull(
            request.path_params["doc_id"], version, max(0.0, min(wait, PULL_WAIT_MAX_S))
        )

    async def preview(request: Request) -> Any:
        doc_id = request.path_params["doc_id"]
        service.get(doc_id)  # NOT_FOUND before any work
        first = request.query_params.get("from")
        last = request.query_params.get("to")
        start = None if first is None else int_arg(first, "from", minimum=1)
        end = None if last is None else int_arg(last, "to", minimum=start or 1)
        # Off the event loop, one render at a time (views.py decides: whole document or a window of lines).
        async with render_lock:
            return await anyio.to_thread.run_sync(service.preview, doc_id, start, end)

    async def asset(request: Request) -> Any:
        """An image the document refers to by a relative path, so the preview shows local pictures.

        Only image types, only inside the document's folder or the opened workspace folder; served with a
        CSP that forbids scripts, because an SVG opened directly would otherwise run in this origin.
        """
        doc = service.get(request.path_params["doc_id"])
        if doc.path is None:
            raise BridgeError(ErrorCode.NOT_FOUND, "an unsaved document has no folder to take images from")
        raw = request.path_params["path"]  # already percent-decoded by the server
        media_type = ASSET_TYPES.get(Path(raw).suffix.lower())
        if media_type is None:
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"'{Path(raw).name}' is not an image the preview may show",
                data={"allowed": sorted(ASSET_TYPES)},
            )
        folder = doc.path.parent
        root = service.workspace.root
        roots = [folder, root] if folder.is_relative_to(root) else [folder]
        path = resolve_path(raw, roots, must_exist=True)
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO or device named like a picture is never opened
            raise BridgeError(ErrorCode.ACCESS_DENIED, f"'{Path(raw).name}' is not a regular file")
        size = st.st_size
        if size > ASSET_MAX_BYTES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"'{path.name}' is {size} bytes; the preview shows images up to {ASSET_MAX_BYTES} bytes",
            )
        return FileResponse(
            path,
            media_type=media_type,
            headers={
                "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:",
                "X-Content-Type-Options": "nosniff",
                "Cache-Control": "no-cache",
            },
        )

    async def selection(request: Request) -> Any:
        body = await json_body(request)
        anchor = int_arg(body.get("anchor"), "anchor")
        head = int_arg(body.get("head", anchor), "head")
        version = body.get("version")
        service.report_selection(
            request.path_params["doc_id"],
            anchor,
            head,
            None if version is None else int_arg(version, "version"),
        )
        return {"ok": True}

    async def save(request: Request) -> Any:
        return await tool("md_save_current_document", {"docId": request.path_params["doc_id"]})

    async def external(request: Request) -> Any:
        body = await json_body(request)
        action = _choice(_str_arg(body, "action"), ("reload", "keep"), "action")
        # The person's choice runs as the tool it is (validated and audited once by App.invoke, caller `ui`).
        return await tool(
            "md_resolve_external_change", {"docId": request.path_params["doc_id"], "action": action}
        )

    async def export(request: Request) -> Any:
        """The person's own export: the browser downloads the file (an AI's export goes through approval).

        POST with the editor's request header only: a document's `<img src=…/export>` or a form on another
        page cannot produce either, so a document cannot start browsers by being looked at. One export runs
        at a time per workspace (export.ExportGate)."""
        if request.headers.get(REQUEST_HEADER) != "export":
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"an export must be asked for by the editor (POST with the {REQUEST_HEADER} header)",
            )
        body = await json_body(request)
        doc = service.get(request.path_params["doc_id"])
        fmt = _choice(_str_arg(body, "format", max_len=10), tuple(EXPORT_FORMATS), "format")
        name, media_type = EXPORT_FORMATS[fmt]
        stem = Path(doc.name).stem or "document"
        text = doc.text
        # Not a tool (the browser downloads the bytes), but the person's export is audited once all the same.
        tracked = (
            contextlib.nullcontext()
            if service.audit is None
            else service.audit.track(
                caller=UI.caller,
                client=UI.client_name,
                tool=EXPORT_AUDIT_TOOL,
                target=service.target_of(doc.doc_id) or "",
                arg_names=("format",),
            )
        )
        with tracked:
            data = await export_gate(service).run(
                lambda: export_bytes(
                    name,
                    text,
                    title=stem,
                    base_dir=doc.path.parent if doc.path else None,
                    typography=state.snapshot()["typography"],
                )
            )
        filename = f"{stem}{FORMATS[name]}"
        # RFC 6266 / 5987: an ASCII fallback plus the UTF-8 name, so 中文.md exports keep their name.
        ascii_name = filename.encode("ascii", "replace").decode().replace("?", "_").replace('"', "_")
        disposition = f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename)}"
        return Response(data, media_type=media_type, headers={"Content-Disposition": disposition})

    async def rich(request: Request) -> Any:
        """Inline-styled HTML for the person's "copy to WeChat/Zhihu/Juejin"; the browser writes the clipboard."""
        doc = service.get(request.path_params["doc_id"])
        target = _choice(request.query_params.get("target", "wechat"), RICH_TARGETS, "target")
        html = await anyio.to_thread.run_sync(
            lambda: rich_html(
                doc.text,
                target,
                base_dir=doc.path.parent if doc.path else None,
                typography=state.snapshot()["typography"],
            )
        )
        return {"html": html, "target": target}

    async def approval_rules(request: Request) -> Any:
        """Which operations ask the person by default and which settings override, for the settings panel."""
        rules = service.approvals.rules
        return {
            "defaults": dict(NEEDS_APPROVAL_BY_DEFAULT),
            "overrides": dict(rules.overrides),
            "enabled": rules.enabled,
        }

    # -- UI state (the draft barrier is the platform's: /api/events?editor=, /api/editors/ack) --------
    async def ui_get(request: Request) -> Any:
        return state.snapshot()

    async def ui_post(request: Request) -> Any:
        return state.update(await json_body(request), source="ui")

    async def command_result(request: Request) -> Any:
        """The editor's prepared change for an AI's editor command (editor_commands.py); the AI edit follows."""
        body = await json_body(request)
        taken = requests_of(service).answer(request.path_params["request_id"], body)
        return {"ok": True, "taken": taken}

    def r(
        path: str,
        handler: Callable[[Request], Awaitable[Any]],
        method: str = "GET",
        serves_elements: tuple[str, ...] = (),
    ) -> Route:
        if serves_elements:
            return ElementRoute(path, _guarded(handler), serves_elements=serves_elements, methods=[method])
        return Route(path, _guarded(handler), methods=[method])

    return [
        r("/docs", list_docs),
        r("/files", list_files),
        r("/open", open_doc, "POST"),
        r("/docs/{doc_id}", get_doc),
        r("/docs/{doc_id}/push", push, "POST"),
        r("/docs/{doc_id}/pull", pull),
        r("/docs/{doc_id}/preview", preview),
        # a document's pictures: the preview's <img src>
        r("/docs/{doc_id}/asset/{path:path}", asset, serves_elements=("image",)),
        r("/docs/{doc_id}/selection", selection, "POST"),
        r("/docs/{doc_id}/save", save, "POST"),
        r("/docs/{doc_id}/external", external, "POST"),
        r("/docs/{doc_id}/export", export, "POST"),
        r("/docs/{doc_id}/rich", rich),
        r("/approval-rules", approval_rules),
        r("/ui", ui_get),
        r("/ui", ui_post, "POST"),
        r("/commands/{request_id}", command_result, "POST"),
    ]
