"""The one rule for archive paths: how a path is spelled when stored and looked up, and which names collide.

Every tool keys PVF files case-insensitively: pvfUtility lowercases lookups and writes new names in lower
case with `/`, pvf-parser-ts and the Go port lowercase on read (research/pvf.md §1A "Path normalisation").
A stored name with upper case is therefore unreachable from string links and `.lst` registries in
pvfUtility, and two names that differ only in case make an ambiguous archive (each tool reads a different
file for the same path). So every path deskbridge stores or looks up goes through
`normalize_archive_path`, and a set of new names is checked with `refuse_case_duplicates` before it is
written (pack, import, stage of several files). A name that may hold control characters is shown with
`core.terminal.escaped_controls` (messages) or `printable` (the terminal), and found with `has_control`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from deskbridge.core.errors import BridgeError, ErrorCode

# Characters and names Windows cannot hold in a file name: an archive extracted there must unpack.
BAD_NAME = re.compile(r'[<>:"|?*\x00-\x1f\x7f-\x9f\\]')  # and every control character (C0, DEL, C1)
_WIN_RESERVED = {
    "con",
    "prn",
    "aux",
    "nul",
    *(f"com{i}" for i in range(1, 10)),
    *(f"lpt{i}" for i in range(1, 10)),
}


def check_archive_path(path: str) -> str:
    """An archive path safe to create: `/`-separated components, none empty, `.`/`..`, reserved or with
    characters Windows cannot hold (research: pvfine's MOD path validation rules)."""
    p = path.replace("\\", "/").strip("/")
    parts = p.split("/")
    for part in parts:
        low = part.lower()
        if (
            not part
            or part in (".", "..")
            or BAD_NAME.search(part)
            or part.endswith((".", " "))
            or low.split(".")[0] in _WIN_RESERVED
            or len(part.encode("utf-16-le")) > 510
        ):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"'{path}' is not a valid archive path (component {part!r})",
                "Use '/'-separated names without .., reserved names or <>:\"|?* characters.",
                data={"path": path},
            )
    return p


def normalize_archive_path(path: str) -> str:
    """The stored and lookup form of an archive path: `\\` → `/`, no leading `/`, lower case."""
    return path.replace("\\", "/").lstrip("/").lower()


def case_duplicates(paths: Iterable[str]) -> list[tuple[str, str]]:
    """Pairs (first name, later name) of paths that normalise to the same key, in input order."""
    first: dict[str, str] = {}
    pairs: list[tuple[str, str]] = []
    for p in paths:
        key = normalize_archive_path(p)
        if key in first:
            pairs.append((first[key], p))
        else:
            first[key] = p
    return pairs


def refuse_case_duplicates(paths: Iterable[str], *, where: str = "the files") -> None:
    """`INVALID_ARGUMENT` naming both names when two paths differ only in case (or in `\\` vs `/`)."""
    pairs = case_duplicates(paths)
    if not pairs:
        return
    a, b = pairs[0]
    more = f" (and {len(pairs) - 1} more pairs)" if len(pairs) > 1 else ""
    raise BridgeError(
        ErrorCode.INVALID_ARGUMENT,
        f"'{a}' and '{b}' in {where} are the same archive path '{normalize_archive_path(a)}'{more}: "
        "archive paths ignore case, so an archive holding both would be read differently by each tool",
        "Rename or remove one of the two, then retry.",
        data={"paths": [a, b], "key": normalize_archive_path(a), "pairs": len(pairs)},
    )
