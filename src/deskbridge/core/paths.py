"""Safe path resolution: turn a caller's path into a real path inside the allowed roots, or refuse it.

Order of checks (each a typed `BridgeError` with a hint, REL-PATHS in TARGETS.md):

1. shape — empty, NUL, control characters, overlong (`PATH_MAX_CHARS`, `PATH_COMPONENT_MAX_BYTES`);
2. Windows forms, refused on every platform because project data travels between systems —
   device paths (`\\\\?\\`, `\\\\.\\`), UNC (`\\\\server\\share`, `//server/share`), drive letters (`C:`),
   alternate data streams (`a:b`), reserved device names (CON, NUL, COM1 … also `nul.txt`, `CON .md`)
   and names ending in a dot or a space (Windows silently strips them, so they alias another name);
   backslashes count as separators, so `..\\..\\x` is traversal, not a funny file name;
3. traversal — any `..` component is refused outright, even one that would land inside the root: a path
   that needs `..` is a path the model should not have been given;
4. symlinks — the path is resolved with `os.path.realpath` (every existing component, including the
   parent of a not-yet-existing file and a dangling final symlink), then compared with each root's own
   real path by whole components (`os.path.commonpath`), so `/root_evil` is not inside `/root`
   (CVE-2025-53110, the MCP filesystem server's prefix bypass).

Case aliasing: `case_collisions` groups names equal under Unicode NFC + casefold; `resolve_path(...,
check_case=True)` refuses a new entry whose name differs only by case from an existing sibling, which on
a case-insensitive disk (Windows, macOS) would overwrite it.

Checks run on strings and one `realpath`; nothing is created. The race that remains after a check (a folder
swapped for a symbolic link between the check and the write: save-as TOCTOU) is closed by the writer: the
result is a `ConfinedPath` that remembers the root it was found inside, and `core.files` opens the target's
folder once by walking this real path with O_NOFOLLOW (a link that appeared is refused) and then does every
step relative to that folder's descriptor.

Errors name the path as the caller gave it, never where a link leads, and a path outside the roots is refused
with the same error whether or not something exists there (nothing about the outside is revealed).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode

_RESERVED_STEMS = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$", "CLOCK$"}
    | {f"COM{c}" for c in "0123456789¹²³"}
    | {f"LPT{c}" for c in "0123456789¹²³"}
)
OUTSIDE_ROOTS = "outside-roots"
"""`data["reason"]` of the refusal of a well-formed path that lies outside the roots (vs. a malformed one)."""

_DRIVE = re.compile(r"^[A-Za-z]:")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ILLEGAL_PORTABLE = set('<>:"|?*')


def _invalid(msg: str, hint: str | None = None) -> BridgeError:
    return BridgeError(ErrorCode.INVALID_ARGUMENT, msg, hint)


def _denied(msg: str, hint: str | None = None) -> BridgeError:
    return BridgeError(ErrorCode.ACCESS_DENIED, msg, hint)


def is_reserved_name(name: str) -> bool:
    """True for Windows device names with or without an extension (`CON`, `nul.txt`, `COM1.tar.gz`, `aux `)."""
    stem = name.split(".", 1)[0].rstrip(" ").upper()
    return stem in _RESERVED_STEMS


def check_component(name: str) -> None:
    """Refuse one path component that is unsafe or non-portable (see module docstring, step 2)."""
    if name in ("", "."):
        raise _invalid("a path has an empty component", "Remove doubled or trailing slashes.")
    if name == "..":
        raise _denied("'..' is not allowed in a path", "Give the path from the workspace root without '..'.")
    if len(name.encode("utf-8", "surrogatepass")) > limits.PATH_COMPONENT_MAX_BYTES:
        raise _invalid(
            f"a path component is longer than {limits.PATH_COMPONENT_MAX_BYTES} bytes",
            "Use a shorter file or folder name.",
        )
    if _CONTROL.search(name):
        raise _invalid("a path contains a control character", "Remove control characters from the name.")
    bad = _ILLEGAL_PORTABLE.intersection(name)
    if bad:
        raise _invalid(
            f"the name {name!r} contains {''.join(sorted(bad))!r}, not allowed in portable names",
            'Remove the characters < > : " | ? * from the name.',
        )
    if name[-1] in ". ":
        raise _invalid(
            f"the name {name!r} ends with a dot or a space (Windows would silently change it)",
            "Remove the trailing dot or space.",
        )
    if is_reserved_name(name):
        raise _invalid(
            f"the name {name!r} is a reserved device name on Windows",
            "Rename it; CON, PRN, AUX, NUL, COM1-9 and LPT1-9 cannot be file names, even with an extension.",
        )


def _check_shape(raw: str) -> str:
    if not isinstance(raw, str):
        raise _invalid("a path must be a string")
    if raw == "":
        raise _invalid("the path is empty")
    if "\x00" in raw:
        raise _invalid("a path contains a NUL byte", "Remove the NUL character from the path.")
    if len(raw) > limits.PATH_MAX_CHARS:
        raise _invalid(f"the path is longer than {limits.PATH_MAX_CHARS} characters", "Use a shorter path.")
    s = raw.replace("\\", "/")
    if s.startswith(("//?/", "//./", "/??/")):
        raise _denied(f"device paths are not allowed: {raw!r}", "Give an ordinary path inside the workspace.")
    if s.startswith("//") and len(s) > 2 and s[2] != "/":
        raise _denied(
            f"network (UNC) paths are not allowed: {raw!r}", "Copy the files to a local folder first."
        )
    if _DRIVE.match(s) and os.name != "nt":
        raise _denied(
            f"drive-letter paths are not valid here: {raw!r}",
            "Give a path on this machine, inside the workspace.",
        )
    return s


def safe_relative_path(raw: str) -> str:
    """Normalise a relative path *inside* a container (an archive, an export folder): 'a/b/c', no escapes.

    Backslashes become '/', a single leading './' is dropped; absolute paths, drive letters, `..`, empty
    components and unsafe names are refused. The result is safe to join under any directory.
    """
    s = _check_shape(raw)
    if s.startswith("/") or _DRIVE.match(s):
        raise _denied(
            f"expected a relative path, got {raw!r}", "Give the path relative to the workspace root."
        )
    while s.startswith("./"):
        s = s[2:]
    parts = s.split("/")
    for part in parts:
        check_component(part)
    return "/".join(parts)


class ConfinedPath(type(Path())):  # type: ignore[misc]  # PosixPath / WindowsPath: subclassable on 3.11 too
    """A real path found inside an allowed root; `confined_root` is that root (`core.files` keeps writes there).

    It is an ordinary `Path` in every other way; paths derived from it (`.parent`, `/ "x"`) are plain paths
    again (`confined_root` None): only the checked path itself carries the promise.
    """

    confined_root: Path | None = None


def _realpath(p: str) -> str:
    # A link removed between realpath's lstat and readlink raises even with strict=False (Python < 3.13):
    # look again; a path that keeps changing under the check is refused, never an INTERNAL error.
    for _ in range(3):
        try:
            return os.path.realpath(p, strict=False)
        except OSError:
            continue
    raise _denied(
        "the path changed while it was being checked (a link was replaced meanwhile)",
        "Retry once the folder has stopped changing.",
    )


def _inside(candidate: str, root: str) -> bool:
    # Whole-component comparison: '/srv/root_evil' is not inside '/srv/root' (CVE-2025-53110).
    try:
        return os.path.commonpath([candidate, root]) == root
    except ValueError:  # different drives on Windows
        return False


_REAL_ROOTS_MAX = 256
_real_roots: dict[str, tuple[Path, int, int]] = {}
"""Roots that were their own real path when first seen: name → (the root as a Path, st_dev, st_ino)."""


def _known_real_root(root: str) -> Path | None:
    """`root` as a Path when it is known to be its own real path and still the very folder it was (one `lstat`:
    a real folder, not a link, the same device and inode as when it was first resolved); else None."""
    known = _real_roots.get(root)
    if known is None:
        return None
    try:
        st = os.lstat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or (st.st_dev, st.st_ino) != known[1:]:
        return None
    return known[0]


def _remember_real_root(root: str) -> None:
    try:
        st = os.lstat(root)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        return
    if len(_real_roots) >= _REAL_ROOTS_MAX:
        _real_roots.clear()
    _real_roots[root] = (Path(root), st.st_dev, st.st_ino)


def _walk_plain(root: str, parts: list[str]) -> tuple[str, bool] | None:
    """`(real path, exists)` of `parts` below the real folder `root` when no existing component is a symbolic
    link — which is then exactly what `os.path.realpath` returns, found with one `lstat` per component instead
    of a walk from `/` — or None when a link is met (the caller then resolves the general way)."""
    path = root.rstrip("/")
    for i, part in enumerate(parts):
        path = f"{path}/{part}"
        try:
            st = os.lstat(path)
        except OSError:  # nothing there (or not a folder): realpath keeps the rest as written
            rest = parts[i + 1 :]
            return (f"{path}/{'/'.join(rest)}" if rest else path), False
        if stat.S_ISLNK(st.st_mode):
            return None
    return (path or "/"), True


def resolve_path(
    raw: str,
    roots: Sequence[Path | str],
    *,
    must_exist: bool = False,
    check_case: bool = False,
) -> Path:
    """The real, absolute path of `raw` if it lies inside one of `roots` after following symlinks.

    Relative paths are taken from the first root. `must_exist`: `NOT_FOUND` when nothing is there.
    `check_case`: refuse a *new* name that differs only by case from an existing sibling.

    A root that is its own real path (workspaces resolve theirs once, at open) is remembered with its device
    and inode, and a path below it whose components are plain files and folders is resolved with one `lstat`
    per component of the path below the root; any symbolic link on the way, a root that changed (another
    folder, or a link, now under its name) or a root that is not real takes the general path: `realpath` of
    the root and of the whole target. Either way the answer is the same real path inside the same root.
    """
    if not roots:
        raise _denied(
            "no folder is allowed in the current access scope", "Open a workspace or widen the access scope."
        )
    s = _check_shape(raw)
    is_abs = s.startswith("/") or bool(_DRIVE.match(s))
    rel = s.lstrip("/") if s.startswith("/") else s
    if _DRIVE.match(rel):
        rel = rel[2:].lstrip("/")
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    for part in parts:
        check_component(part)
    if os.name == "posix":
        fast = _resolve_below_known_root(s, parts, is_abs, roots)
        if fast is not None:
            real, exists, root_path = fast
            return _finish(raw, real, root_path, exists, must_exist=must_exist, check_case=check_case)
    real_roots = [_realpath(os.path.abspath(os.fspath(r))) for r in roots]
    if os.name == "posix":
        for given, real_root in zip(roots, real_roots, strict=True):
            # A root that is real now is remembered (again, if the folder under its name was replaced).
            if os.path.abspath(os.fspath(given)) == real_root and _known_real_root(real_root) is None:
                _remember_real_root(real_root)
    joined = os.path.abspath(s) if is_abs else os.path.join(real_roots[0], s)
    real = _realpath(joined)
    root = next((r for r in real_roots if _inside(real, r)), None)
    if root is None:
        raise _outside(raw)
    return _finish(raw, real, Path(root), None, must_exist=must_exist, check_case=check_case)


def _resolve_below_known_root(
    s: str, parts: list[str], is_abs: bool, roots: Sequence[Path | str]
) -> tuple[str, bool, Path] | None:
    """The fast path of `resolve_path` (POSIX): `(real path, exists, root)` or None to take the general one."""
    if is_abs:
        # The first root (in order) whose components begin the path, as the general path would choose.
        for r in roots:
            name = os.fspath(r)
            root_path = _known_real_root(name)
            if root_path is None:
                return None
            prefix = [p for p in name.split("/") if p]
            if parts[: len(prefix)] == prefix:
                walked = _walk_plain(name, parts[len(prefix) :])
                return None if walked is None else (*walked, root_path)
        return None
    name = os.fspath(roots[0])
    root_path = _known_real_root(name)
    if root_path is None:
        return None
    walked = _walk_plain(name, parts)
    return None if walked is None else (*walked, root_path)


def _outside(raw: str) -> BridgeError:
    # The caller's own words only: never the real path (where a link leads, e.g. /proc/self/environ), and the
    # same answer whether or not anything exists out there.
    return BridgeError(
        ErrorCode.ACCESS_DENIED,
        f"{raw!r} is outside the allowed folders",
        "Stay inside the workspace folder (symbolic links leading out of it are refused too).",
        data={"reason": OUTSIDE_ROOTS},
    )


def _finish(
    raw: str, real: str, root: Path, exists: bool | None, *, must_exist: bool, check_case: bool
) -> Path:
    if (must_exist or check_case) and exists is None:
        exists = os.path.lexists(real)
    if must_exist and not exists:
        raise BridgeError(ErrorCode.NOT_FOUND, f"{raw!r} does not exist")
    if check_case and not exists:
        clash = case_alias_of(Path(real))
        if clash is not None:
            raise _invalid(
                f"{raw!r} differs only by letter case from the existing '{clash.name}'",
                "Use the existing name exactly, or choose a name that differs by more than case.",
            )
    path = ConfinedPath(real)
    path.confined_root = root
    return path


def case_key(name: str) -> str:
    """The key under which two names collide on a case-insensitive file system (NFC + casefold)."""
    return unicodedata.normalize("NFC", name).casefold()


def case_alias_of(path: Path) -> Path | None:
    """An existing sibling of `path` whose name differs from it only by case, or None."""
    key = case_key(path.name)
    try:
        with os.scandir(path.parent) as it:
            for entry in it:
                if entry.name != path.name and case_key(entry.name) == key:
                    return path.parent / entry.name
    except OSError:
        return None
    return None


def case_collisions(paths: Iterable[str]) -> list[list[str]]:
    """Groups of relative paths that would land on the same file on a case-insensitive disk."""
    groups: dict[str, list[str]] = {}
    for p in paths:
        key = "/".join(case_key(c) for c in PurePosixPath(p.replace("\\", "/")).parts)
        groups.setdefault(key, []).append(p)
    return [sorted(g) for g in groups.values() if len(set(g)) > 1]
