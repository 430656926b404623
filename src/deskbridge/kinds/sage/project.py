"""Find a SAGE mod project's root from any path inside it, and the mod SDK it builds against.

Markers (research/sage.md §1.4, issue #5): `Data/Mod.xml`, WrathEd's `Data/Static.xml`,
`Data/additionalmaps/mapmetadata_*.xml` or a `*.babproj` file, matched case-insensitively; the nearest folder
wins. A mod SDK folder itself (the game's vanilla XML) is a project too. The SDK is recognised by
`Schemas/xsd/CnC3Types.xsd` or `Schemas/CnC3Types.xsd` next to a `SageXml/` folder.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from deskbridge.kinds.sage.paths import CaseFoldTree
from deskbridge.kinds.sage.settings import SDK_ENV, read_sage_config

UP_LEVELS = 12
"""How many parent folders are searched for a project marker (the extension's limit)."""

DOWN_LEVELS = 3
"""How many levels of sub-folders are searched when no parent folder is a project."""

MAPMETADATA = re.compile(r"^mapmetadata_.*\.xml$", re.IGNORECASE)


def is_project_root(folder: Path, tree: CaseFoldTree | None = None) -> bool:
    """True when `folder` holds one of the project markers."""
    tree = tree or CaseFoldTree()
    listing = tree.listing(str(folder))
    if not listing:
        return False
    if any(not is_dir and name.casefold().endswith(".babproj") for name, is_dir in listing.values()):
        return True
    data = tree.find(str(folder), ["data"])
    if not data or not os.path.isdir(data):
        return is_sdk(folder)  # the SDK itself: its vanilla streams are the project
    if tree.find(data, ["mod.xml"]) or tree.find(data, ["static.xml"]):
        return True  # BAB's `Data/Mod.xml`, or WrathEd's `Data/Static.xml`
    maps = tree.find(data, ["additionalmaps"])
    if maps and (entries := tree.listing(maps)):
        return any(MAPMETADATA.match(name) and not is_dir for name, is_dir in entries.values())
    return False


def find_project_root(start: Path) -> Path:
    """The nearest project root at or above `start` (or, failing that, below it within a few levels)."""
    start = start.expanduser().resolve()
    if not start.exists():
        from deskbridge.core.errors import BridgeError, ErrorCode  # `typing`: not on the warm path

        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"The path {str(start)!r} does not exist.",
            hint="Pass the mod folder (the one holding Data/Mod.xml) or any path inside it.",
        )
    tree = CaseFoldTree()
    folder = start if start.is_dir() else start.parent
    for candidate in [folder, *list(folder.parents)[:UP_LEVELS]]:
        if is_project_root(candidate, tree):
            return candidate
    level = [folder]
    for _ in range(DOWN_LEVELS):
        nxt: list[Path] = []
        for parent in level:
            listing = tree.listing(str(parent)) or {}
            for name, is_dir in sorted(set(listing.values())):
                if is_dir and not name.startswith("."):
                    child = parent / name
                    if is_project_root(child, tree):
                        return child
                    nxt.append(child)
        level = nxt
    from deskbridge.core.errors import BridgeError, ErrorCode  # `typing`: not on the warm path

    raise BridgeError(
        ErrorCode.NOT_FOUND,
        f"No SAGE mod project at or around {str(start)!r}: no Data/Mod.xml, "
        "Data/additionalmaps/mapmetadata_*.xml or *.babproj found.",
        hint="Pass the mod folder that holds Data/Mod.xml.",
    )


def is_sdk(folder: Path) -> bool:
    """True when `folder` looks like the RA3 / C&C3 mod SDK (or EA's Xml + Schemas copy of it)."""
    return schema_entry(folder) is not None and CaseFoldTree().find(str(folder), ["sagexml"]) is not None


def schema_entry(sdk: Path) -> Path | None:
    """The SDK's entry schema `CnC3Types.xsd` (under `Schemas/xsd/` in the SDK, `Schemas/` in EA's repo)."""
    tree = CaseFoldTree()
    for parts in (["schemas", "xsd", "cnc3types.xsd"], ["schemas", "cnc3types.xsd"]):
        hit = tree.find(str(sdk), parts)
        if hit and os.path.isfile(hit):
            return Path(hit)
    return None


def locate_sdk(explicit: Path | str | None = None) -> Path | None:
    """The SDK folder from `--sdk`, else `$DESKBRIDGE_SAGE_SDK`, else config `sage.sdk`; None if unset.

    A configured folder that is not an SDK is an error rather than silently ignored: answers built
    without the SDK would miss every vanilla definition.
    """
    for origin, value in (
        ("--sdk", explicit),
        (SDK_ENV, os.environ.get(SDK_ENV) or None),
        ("config sage.sdk", read_sage_config().sdk),
    ):
        if value:
            path = Path(value).expanduser().resolve()
            if not is_sdk(path):
                from deskbridge.core.errors import BridgeError, ErrorCode  # `typing`: not on the warm path

                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"{origin} points at {str(path)!r}, which is not a mod SDK "
                    "(no Schemas/xsd/CnC3Types.xsd or Schemas/CnC3Types.xsd with a SageXml folder).",
                    hint="Pass the SDK folder that holds Schemas/ and SageXml/.",
                )
            return path
    return None


def looks_like_project(path: Path) -> bool:
    """True when `path` or a folder above it is a SAGE project (the workspace kind detector)."""
    tree = CaseFoldTree()
    start = path if path.is_dir() else path.parent
    return any(is_project_root(c, tree) for c in [start, *list(start.parents)[:UP_LEVELS]])
