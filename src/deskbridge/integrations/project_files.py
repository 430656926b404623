"""Where `setup --scope project` and the skill installer may write in a project folder: real files inside it.

A project folder is often someone else's (a cloned repository), and it can carry links planted for us:
`.mcp.json -> ~/.claude.json` would merge the person's whole client config into the project, `.cursor -> /elsewhere`
or `.agents -> ~/.config/autostart` would have us write out there. So a file we are about to write is resolved
(`core.paths.resolve_path`, every link on its way followed) and must land inside the project folder, and must be
a regular file when something is already there (a FIFO would block the read, a device never ends); the write then
goes to that real path, confined to the folder (`core.files`: no link swapped in meanwhile is followed).
A link that stays inside the folder (`.mcp.json -> config/mcp.json`) is followed: the file it names is edited.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import cast

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.paths import OUTSIDE_ROOTS, ConfinedPath, resolve_path


def file_inside(path: Path, folder: Path) -> ConfinedPath:
    """The real path at which to write `path` (a path under `folder`, as it is named), confined to `folder`.

    Raises ACCESS_DENIED naming `path` when a link on its way leads out of `folder`, or when what is there is not
    a regular file (a FIFO, a device, a socket, a folder). Nothing is created."""
    relative = path.relative_to(folder).as_posix()
    try:
        real = cast(ConfinedPath, resolve_path(relative, [folder]))
    except BridgeError as exc:
        if exc.data.get("reason") != OUTSIDE_ROOTS:
            raise
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"{path} leads out of the project folder {folder} (it, or a folder on its way, is a symbolic "
            "link to somewhere else); deskbridge writes project files only inside the project",
            hint=f"See where it points (`ls -l {path}`); if you did not make that link, delete it, then run the "
            "command again; nothing was changed.",
            data={"path": str(path), "diskTouched": False},
        ) from None
    try:
        mode = os.lstat(real).st_mode
    except FileNotFoundError:
        return real
    if not stat.S_ISREG(mode):
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"{path} is not a regular file (a pipe, device, socket or folder is there); deskbridge writes only "
            "ordinary files",
            hint="Move it away (or delete it if you did not make it), then run the command again; nothing was "
            "changed.",
            data={"path": str(path), "diskTouched": False},
        )
    return real
