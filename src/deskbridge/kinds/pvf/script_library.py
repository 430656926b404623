"""The person's library of saved `.pvf.js` scripts (the UI's list / load / save / delete), in the user config folder.

pvfine keeps a script library beside the archive editor (its ListScripts / LoadScript / SaveScript); the MCP
design leaves that to the UI ("首版通过 source 执行"): agents pass a script's source to `pvf_script_run`. So these
are web routes of the pvf UI (`/api/pvf/scripts…`), not tools. Files live in `<config>/pvf-scripts/<name>`,
one plain `.pvf.js` each, saved with `core.guarded_save` (sha-guarded, atomic) and read with `read_regular_file`.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import read_regular_file
from deskbridge.core.guarded_save import save_if_unchanged
from deskbridge.kinds.http import error_response, json_body
from deskbridge.kinds.pvf.scripting.runner import SOURCE_MAX_BYTES

DIR_NAME = "pvf-scripts"
SCRIPT_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9 _.-]{0,79}\.pvf\.js$")
LIST_MAX = 1000


class ScriptLibrary:
    def __init__(self, config_dir: Path | None) -> None:
        self.folder = None if config_dir is None else config_dir / DIR_NAME

    def _path(self, name: str) -> Path:
        if self.folder is None:
            raise BridgeError(ErrorCode.NOT_FOUND, "this server has no user config folder for scripts")
        if not isinstance(name, str) or not SCRIPT_NAME.match(name) or ".." in name:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{name!r} is not a script name",
                "Use letters, digits, spaces, '.', '_' or '-', ending in .pvf.js (e.g. raise-prices.pvf.js).",
            )
        return self.folder / name

    def list(self) -> dict[str, Any]:
        folder = self.folder
        entries = []
        if folder is not None and folder.is_dir():
            for p in sorted(folder.iterdir(), key=lambda p: p.name.lower())[:LIST_MAX]:
                if SCRIPT_NAME.match(p.name) and p.is_file() and not p.is_symlink():
                    st = p.stat()
                    entries.append({"name": p.name, "size": st.st_size, "modified": st.st_mtime})
        return {"folder": None if folder is None else str(folder), "scripts": entries}

    def load(self, name: str) -> dict[str, Any]:
        path = self._path(name)
        if not path.is_file():
            raise BridgeError(ErrorCode.NOT_FOUND, f"no saved script {name}", "List them first.")
        raw = read_regular_file(path, max_bytes=SOURCE_MAX_BYTES, shown_as=name)
        return {
            "name": name,
            "source": raw.decode("utf-8", "replace"),
            "sha256": hashlib.sha256(raw).hexdigest(),
        }

    def save(self, name: str, source: str, expected_sha256: str | None) -> dict[str, Any]:
        path = self._path(name)
        if not isinstance(source, str):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "source must be a string")
        raw = source.encode("utf-8")
        if len(raw) > SOURCE_MAX_BYTES:
            raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"a script is at most {SOURCE_MAX_BYTES} bytes")
        # Another tab may have saved this name since this one loaded it: do not overwrite their version silently.
        saved = save_if_unchanged(
            path,
            raw,
            expected_sha256,
            max_bytes=SOURCE_MAX_BYTES,
            shown_as=name,
            changed=f"{name} changed since you loaded it",
            hint="Load it again, or save under another name.",
        )
        return {"name": name, "sha256": saved.sha256, "created": saved.created}

    def delete(self, name: str) -> dict[str, Any]:
        path = self._path(name)
        if not path.is_file() or path.is_symlink():
            raise BridgeError(ErrorCode.NOT_FOUND, f"no saved script {name}", "List them first.")
        path.unlink()
        return {"name": name, "deleted": True}


def script_library_routes(library: ScriptLibrary) -> list[BaseRoute]:
    async def listing(request: Request) -> Response:
        try:
            return JSONResponse(library.list())
        except BridgeError as error:
            return error_response(error)

    async def one(request: Request) -> Response:
        name = request.path_params["name"]
        try:
            if request.method == "GET":
                return JSONResponse(library.load(name))
            if request.method == "DELETE":
                return JSONResponse(library.delete(name))
            body = await json_body(request)
            expected = body.get("expectedSha256")
            return JSONResponse(
                library.save(name, body.get("source"), expected if isinstance(expected, str) else None)
            )
        except BridgeError as error:
            return error_response(error)

    return [
        Route("/scripts", listing, methods=["GET"]),
        Route("/scripts/{name}", one, methods=["GET", "PUT", "DELETE"]),
    ]
