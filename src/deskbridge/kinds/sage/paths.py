"""SAGE path resolution: `DATA:` / `ART:` / `AUDIO:` / `ROOT:` aliases, relative includes, and case-folded lookup.

Facts from research/sage.md §2.3: BAB's resolver tries each search path in order and the first existing file
wins; a search path `*` is the including document's folder; `ART:` with no directory part only tries
`<artPath>/<first two letters>/<file>`; Windows tools ignore letter case, accept backslashes and strip
trailing dots. On Linux we answer all of that from a per-directory listing keyed by case-folded names
(one `scandir` per directory, no `stat` per candidate path).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path

from deskbridge.kinds.sage._record import Record

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

ALIASES = ("data", "art", "audio", "root")
RACY_DIR_NS = 2_000_000_000
"""Directories modified this recently are not trusted to stay as listed (coarse filesystem clocks)."""


def _posix_join(base: str, name: str) -> str:
    return base + name if not base or base.endswith("/") else base + "/" + name


_join = _posix_join if os.sep == "/" and os.altsep is None else os.path.join
"""`os.path.join` of a folder and one entry name from its listing (no separator, never absolute): on POSIX
the same string by concatenation, without `posixpath.join`'s checks."""


class CaseFoldTree:
    """Lazily listed directories, mapping case-folded entry names to their real names."""

    def __init__(self) -> None:
        self._listings: dict[str, dict[str, tuple[str, bool]] | None] = {}
        self.mtimes: dict[str, int | None] = {}
        """Directory → its mtime_ns when listed (None: not a directory), to validate persisted answers."""

    def listing(self, directory: str) -> dict[str, tuple[str, bool]] | None:
        """`{folded name: (real name, is_dir)}` of one directory, or None when it is not a directory."""
        cached = self._listings.get(directory, False)
        if cached is not False:
            return cached  # type: ignore[return-value]
        entries: dict[str, tuple[str, bool]] | None
        try:
            st = os.stat(directory)
            # A directory changed within the clock's granularity of this listing may change again unseen.
            racy = st.st_mtime_ns > time.time_ns() - RACY_DIR_NS
            self.mtimes[directory] = None if racy else st.st_mtime_ns
            entries = {}
            with os.scandir(directory) as it:
                for entry in it:
                    try:
                        is_dir = entry.is_dir()
                    except OSError:
                        is_dir = False
                    # Exact names win over case-folded twins (Linux can hold both `a.xml` and `A.xml`).
                    entries.setdefault(entry.name.casefold(), (entry.name, is_dir))
                    if entry.name.casefold() != entry.name:
                        entries[entry.name] = (entry.name, is_dir)
        except OSError:
            entries = None
            self.mtimes.setdefault(directory, -1)
        self._listings[directory] = entries
        return entries

    def cached_listing(self, directory: str) -> dict[str, tuple[str, bool]] | None:
        """The listing taken earlier, without listing again (None when never listed)."""
        return self._listings.get(directory)

    def forget(self, directory: str) -> None:
        """Drop one directory's listing (the watcher saw something appear or vanish there)."""
        self._listings.pop(directory, None)
        self.mtimes.pop(directory, None)

    def clear(self) -> None:
        self._listings.clear()
        self.mtimes.clear()

    def changed_directories(self, suffixes: tuple[str, ...]) -> list[str]:
        """Directories listed (or validated) since the last `clear` that gained, lost or renamed a folder
        or a file ending in one of `suffixes` (lower case): how a new file shows, which no index row names
        yet (the missing file an include names, a deleted Data/Mod.xml written back). The mtime tells
        which directories to look at (adding, removing or renaming an entry changes it); their names are
        then compared with the listing, so an editor's swap file beside a mod file changes nothing."""
        out = []
        for directory, mtime in list(self.mtimes.items()):
            try:
                now = os.stat(directory).st_mtime_ns
            except OSError:
                now = -1
            if mtime is not None and now == mtime:
                continue
            listed = self._listings.get(directory)
            if listed is None:
                # Never listed here (answers taken from the cache), or no directory then: a change counts
                # only if it is one now (an edited file that a lookup once tried as a folder is not).
                if os.path.isdir(directory):
                    out.append(directory)
                continue
            try:
                with os.scandir(directory) as it:
                    names = {(e.name, e.is_dir()) for e in it}
            except OSError:
                out.append(directory)
                continue
            before = set(listed.values())
            if any(d or name.casefold().endswith(suffixes) for name, d in names ^ before):
                out.append(directory)
        return out

    def find(self, base: str, parts: Iterable[str]) -> str | None:
        """The real path of `base/parts…` matched case-insensitively, or None. `base` itself must exist."""
        return self._find(base, parts, None)

    def find_file(self, base: str, parts: Iterable[str]) -> str | None:
        """`find`, when what it finds is a file (`is_file`): the listing the last part was found in says
        so, without splitting the path and looking it up again (~12 k lookups per cold build)."""
        return self._find(base, parts, True)

    def find_folder(self, base: str, parts: Iterable[str]) -> str | None:
        """`find`, when what it finds is a folder (the listing says so, as for `find_file`)."""
        return self._find(base, parts, False)

    def find_file_or_folder(self, base: str, parts: Iterable[str]) -> tuple[str | None, Any]:
        """(`find_file`'s answer, `find_folder`'s answer) from one walk of the listings, or `UNKNOWN_FOLDER`
        as the second when telling it would list a directory `find_file` does not (a path ending in `.`
        or `..`): an include that finds no file is then asked whether it names a folder
        (`PathResolver.resolve_folder`), which another walk of the same listings answered (~3,300 of a
        cold RA3 build's lookups, on its serial tail)."""
        found = self._find(base, parts, None, either=True)
        return found if found.__class__ is tuple else (None, None)  # type: ignore[return-value]

    def _find(self, base: str, parts: Iterable[str], file: bool | None, either: bool = False) -> Any:
        """`file` True: only a file; False: only a folder; None: either. `either`: (file, folder) as
        `find_file_or_folder` answers, or None when neither exists."""
        current = base
        last: dict[str, tuple[str, bool]] | None = None
        """The listing the last part was found in (None when the last part was not looked up)."""
        name = ""
        for part in parts:
            if part in ("", "."):
                last = None
                continue
            if part == "..":
                current = os.path.dirname(current)
                last = None
                continue
            listing = self.listing(current)
            if listing is None:
                return None
            hit = listing.get(part) or listing.get(part.casefold())
            if hit is None:
                return None
            name = hit[0]
            current = _join(current, name)
            last = listing
        if either:
            if last is None:
                return (current, None) if self.is_file(current) else (None, UNKNOWN_FOLDER)
            found = last.get(name)
            if found is None:
                return None
            return (None, current) if found[1] else (current, None)
        if file is None:
            return current
        if last is None:
            if file:
                return current if self.is_file(current) else None
            return current if self.listing(current) is not None else None
        found = last.get(name)  # as `is_file` looks it up: by the real name
        return current if found is not None and found[1] is not file else None

    def is_file(self, path: str) -> bool:
        parent, name = os.path.split(path)
        listing = self.listing(parent)
        if listing is None:
            return False
        hit = listing.get(name)
        return hit is not None and not hit[1]


def match_case(path: str) -> str:
    """`path` with the parts that do not exist as written matched case-insensitively, as Windows tools do
    (a modder's `data\\units\\TANK.xml`), or `path` itself when nothing matches."""
    head, tail = path, []
    while not os.path.lexists(head):
        head, name = os.path.split(head)
        if not name:
            return path
        tail.append(name)
    if not tail:
        return path
    return CaseFoldTree().find(head, reversed(tail)) or path


def split_source(source: str) -> list[str]:
    """Path components of an include source: backslashes become separators, trailing dots/spaces go
    (Windows strips them; research/sage.md §2.3 counts two `….xml.` includes in EA's data)."""
    parts = source.replace("\\", "/").split("/")
    return [p.rstrip(". ") if p not in (".", "..") else p for p in parts]


class SearchPaths(Record):
    """Ordered search folders per alias; `*` means the including document's folder."""

    __slots__ = _fields = ("data", "art", "audio", "root")

    def __init__(
        self,
        data: list[str] | None = None,
        art: list[str] | None = None,
        audio: list[str] | None = None,
        root: list[str] | None = None,
    ) -> None:
        self.data: list[str] = [] if data is None else data
        self.art: list[str] = [] if art is None else art
        self.audio: list[str] = [] if audio is None else audio
        self.root: list[str] = [] if root is None else root

    def for_alias(self, alias: str) -> list[str]:
        return getattr(self, alias)


def default_search_paths(project: Path, sdk: Path | None, extra: Iterable[Path] = ()) -> SearchPaths:
    """The RA3 SDK build script's order (research/sage.md §2.3:
    `/data:".;.\\Mods\\{mod}\\Data;.\\Mods;.\\SageXml"`, same shape for art and audio), run from the SDK
    folder, with the mod's parent folder added for `DATA:<ModFolder>/Data/…` includes."""

    def existing(paths: Iterable[Path | None]) -> list[str]:
        out: list[str] = []
        for p in paths:
            if p is None:
                continue
            s = str(p)
            if s not in out and os.path.isdir(s):
                out.append(s)
        return out

    def sub(base: Path | None, name: str) -> Path | None:
        if base is None:
            return None
        tree = CaseFoldTree()
        hit = tree.find(str(base), [name])
        return Path(hit) if hit else None

    extra = list(extra)
    sdk_mods = sub(sdk, "Mods")
    # The folder holding the mod serves `DATA:<ModFolder>/Data/…`; an SDK opened as the project has none.
    parent = None if sdk is not None and project == sdk else project.parent
    return SearchPaths(
        data=existing([sdk, sub(project, "Data"), sdk_mods, parent, sub(sdk, "SageXml"), *extra]),
        art=existing([sdk, sub(project, "Art"), sdk_mods, parent, sub(sdk, "Art")]),
        audio=existing([sdk, sub(project, "Audio"), sdk_mods, parent, sub(sdk, "Audio")]),
        root=existing([sdk, project]),
    )


UNKNOWN_FOLDER: Any = object()
"""`CaseFoldTree.find_file_or_folder`'s answer when it cannot tell a folder without listing one more directory."""
OUTSIDE = "\0outside"
"""Memo value of a source that leads outside every allowed root (never returned as a path)."""
_UNKNOWN: Any = object()
"""A source not asked yet (the memo also holds None: asked, nothing found)."""


def inside(path: str, roots: Iterable[str]) -> bool:
    """True when `path` is one of `roots` or lies below one (plain string test on normalised paths)."""
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


class Scope:
    """The folders an index may read: the mod, the SDK and the person's configured search paths.

    Every resolved include must lie inside one of them after symlink resolution (issue 8, "SAGE scope
    escape"): `<Include source="/abs">`, `../../..`, `DATA:../..` or a symlink to `/dev/zero` is refused
    with `include-outside-roots` and never read."""

    def __init__(self, roots: Iterable[Path | str]) -> None:
        out: list[str] = []
        for r in roots:
            real = os.path.realpath(str(r))
            if real not in out:
                out.append(real)
        self.roots = out
        self._real_dirs: dict[str, str] = {}

    def contains(self, path: str) -> bool:
        """True when `path` (which may not exist) lies inside a root both as written and as resolved."""
        norm = os.path.abspath(path)  # normalised already (`abspath` ends with `normpath`)
        if not inside(norm, self.roots):
            return False
        folder, name = os.path.split(norm)
        real_dir = self._real_dirs.get(folder)
        if real_dir is None:
            real_dir = self._real_dirs[folder] = os.path.realpath(folder)
        real = os.path.realpath(norm) if os.path.islink(norm) else os.path.join(real_dir, name)
        return inside(real, self.roots)

    def forget(self) -> None:
        """Drop the folders' resolved paths (each build starts afresh: a folder may have become a link)."""
        self._real_dirs.clear()


class PathResolver:
    """Resolve include sources to real files, remembering every answer until `invalidate()`."""

    def __init__(
        self, search: SearchPaths, tree: CaseFoldTree | None = None, scope: Scope | None = None
    ) -> None:
        self.search = search
        self.tree = tree or CaseFoldTree()
        self.scope = scope
        self._memo: dict[tuple[str, str], str | None] = {}
        self._folders: dict[tuple[str, str], str | None] = {}
        """`resolve_folder`'s answers found by the file searches that found nothing (`_checked`), same keys."""
        self._shared: dict[str, bool] = {}
        """Source → whether its answer is the same from every folder (`_base_free`)."""
        self._dirnames: dict[str, str] = {}
        self.calls = 0
        self.memo_hits = 0
        self.changed = True
        """False while the answers are the ones `import_state` took (then there is nothing to save)."""

    def invalidate(self, directories: Iterable[str] = ()) -> None:
        """Forget answers (all of them: a new file can change which search path wins)."""
        for d in directories:
            self.tree.forget(d)
        self._memo.clear()
        self._folders.clear()
        self._shared.clear()
        self.changed = True
        if self.scope is not None:
            self.scope.forget()

    def export_state(self) -> dict[str, Any] | None:
        """Every answer so far with the mtimes of the directories they depend on (for the disk cache).

        Copies, not the live dicts: the cache keeps what it was given, and it must not change when the
        next build lists directories again. The caller makes sure no build runs meanwhile
        (`ProjectIndexer.save_cache`)."""
        dirs = dict(self.tree.mtimes)
        if any(m is None for m in dirs.values()):
            return None  # a directory was changing while listed: do not persist
        return {
            "dirs": dirs,
            "memo": [[s, b, t] for (s, b), t in list(self._memo.items())],
            "setup": self._setup(),
        }

    def _setup(self) -> list[Any]:
        """What the answers depend on besides the directories: the search paths and the scope."""
        s = self.search
        return [s.data, s.art, s.audio, s.root, self.scope.roots if self.scope else None]

    def import_state(self, state: Any) -> bool:
        """Reuse persisted answers when no directory they depend on changed (an entry added, removed or
        renamed changes its directory's mtime); returns whether they were taken."""
        try:
            dirs, memo = state["dirs"], state["memo"]
            if state.get("setup") != self._setup():
                return False
            for directory, mtime in dirs.items():
                try:
                    now = os.stat(directory).st_mtime_ns
                except OSError:
                    now = -1
                if now != mtime:
                    return False
            self._memo.update(((s, b), t) for s, b, t in memo)
        except (KeyError, TypeError, ValueError):
            return False
        self.tree.mtimes.update(dirs)
        self.changed = False
        return True

    def resolve(self, source: str, from_file: str | None) -> str | None:
        """The real path `source` names when written in `from_file`, or None when nothing matches or the
        match lies outside the scope (`resolve_checked` tells the two apart)."""
        found = self.resolve_checked(source, from_file)
        return None if found == OUTSIDE else found

    def resolve_checked(self, source: str, from_file: str | None) -> str | None:
        """Like `resolve`, but `OUTSIDE` when the source leads outside every allowed root: an existing
        file whose real path is outside, or a rooted / climbing (`..`) path that is outside as written,
        whether or not anything exists there (so the answer does not reveal what exists outside).

        A file never includes itself: WrathEd's `Data/Static.xml` writes `DATA:static.xml` for the game's
        static stream, which the mod's own Data folder would otherwise shadow; the next match is taken."""
        self.calls += 1
        base_dir = self._base_dir(from_file)
        found = self._checked(source, base_dir, None)
        if found is not None and found == from_file:
            found = self._checked(source, base_dir, from_file)
        return found

    def _base_dir(self, from_file: str | None) -> str:
        if not from_file:
            return ""
        # Every include of a file asks with the same `from_file` (~5 k calls on a warm start).
        base_dir = self._dirnames.get(from_file)
        if base_dir is None:
            base_dir = self._dirnames[from_file] = os.path.dirname(from_file)
        return base_dir

    def _base_free(self, source: str) -> bool:
        """True when what `source` names does not depend on the including file's folder: a rooted path
        (`C:\\…`), an unknown alias, or an alias none of whose search paths is `*`. Such a source is
        answered once for every file that writes it (RA3Afterdash's `DATA:`/`ART:` includes: ~3,600 of
        a cold build's ~7,800 searches were the same source asked again from another folder)."""
        shared = self._shared.get(source)
        if shared is None:
            alias, sep, _rest = source.strip().partition(":")
            if not sep:
                shared = False
            elif len(alias) == 1 and alias.isalpha():
                shared = True
            else:
                alias = alias.strip().casefold()
                shared = alias not in ALIASES or "*" not in self.search.for_alias(alias)
            self._shared[source] = shared
        return shared

    def _checked(self, source: str, base_dir: str, exclude: str | None) -> str | None:
        if exclude is not None:
            key = (source, "\0" + exclude)
        else:
            key = (source, "" if self._base_free(source) else base_dir)
        found = self._memo.get(key, _UNKNOWN)
        if found is not _UNKNOWN:
            self.memo_hits += 1
            return found
        src = source.strip()
        found, folder = self._search(src, base_dir, exclude, False)
        if found is None and folder is not UNKNOWN_FOLDER:
            # A search that found no file has looked at every search path, so its first folder is the one
            # `resolve_folder` would find (with or without `exclude`: the excluded hit is a file).
            self._folders[(src, "" if self._base_free(source) else base_dir)] = folder
        if self.scope is not None:
            if found is not None:
                if not self.scope.contains(found):
                    found = OUTSIDE
            elif self._escapes(src, base_dir):
                found = OUTSIDE
        self._memo[key] = found
        self.changed = True
        return found

    def _escapes(self, source: str, base_dir: str) -> bool:
        """A source that found nothing, but names a place outside the scope as written."""
        assert self.scope is not None
        alias, sep, rest = source.partition(":")
        if (sep and len(alias) == 1) or source.startswith(("/", "\\")):
            # Rooted (`/etc/x`, `C:\\x`): outside unless it names a place inside the scope.
            return not (os.path.isabs(source) and self.scope.contains(source))
        if ".." not in source:
            return False  # no part can climb (~2,800 unresolved `ART:` includes of a cold build end here)
        parts = [p for p in split_source(rest if sep else source) if p]
        if ".." not in parts:
            return False
        rel = os.path.normpath(os.path.join(*parts))
        if rel != ".." and not rel.startswith(".." + os.sep):
            return False  # `a/../b` stays below its base
        if not sep:
            bases = [base_dir]
        else:
            alias = alias.strip().casefold()
            if alias not in ALIASES:
                return False
            bases = [base_dir if r == "*" else r for r in self.search.for_alias(alias)]
        return any(not self.scope.contains(os.path.join(b, rel)) for b in bases if b)

    def resolve_folder(self, source: str, from_file: str | None) -> str | None:
        """The folder `source` names when written in `from_file`, found as `resolve` finds a file (the same
        search paths, aliases and case folding), or None: for telling a modder whose include found no file
        that it names a folder (`<Include source="DATA:Units"/>`). A folder outside the scope is None, like
        a file there. Asked only for includes that found nothing: answered from the search that found nothing
        when it could tell (`_checked`), else searched, and not remembered."""
        base_dir = self._base_dir(from_file)
        src = source.strip()
        found = self._folders.get((src, "" if self._base_free(source) else base_dir), UNKNOWN_FOLDER)
        if found is UNKNOWN_FOLDER:
            found = self._search(src, base_dir, None, True)[1]
        if found is not None and self.scope is not None and not self.scope.contains(found):
            return None
        return found

    def _search(self, source: str, base_dir: str, exclude: str | None, folder: bool) -> tuple[Any, Any]:
        """(file, folder) `source` names by BAB's rules (the module docstring). A file search (`folder`
        False) answers the first file found that is not `exclude`, and the first folder met on the way
        (`UNKNOWN_FOLDER` when it cannot tell); a folder search answers (None, the first folder)."""
        if not source:
            return None, None
        alias, sep, rest = source.partition(":")
        if sep and len(alias) == 1 and alias.isalpha():
            # A drive letter (`C:\\…`): treat as rooted, as BAB does for rooted paths.
            return self._rooted(source, folder)
        if not sep:
            if source.startswith(("/", "\\")):
                return self._rooted(source, folder)
            return self._find_in(base_dir, split_source(source), folder) if base_dir else (None, None)
        alias = alias.strip().casefold()
        if alias not in ALIASES or ":" in rest:
            return None, None  # BAB: unknown alias / more than one colon are illegal paths
        parts = [p for p in split_source(rest) if p]
        if not parts:
            return None, None
        roots = self.search.for_alias(alias)
        if alias == "art" and len(parts) == 1:
            # The ART two-letter rule: `ART:AUTank_SKN.w3x` lives in `<art>/AU/AUTank_SKN.w3x`.
            parts = [parts[0][:2], parts[0]]
        first_folder = None
        for root in roots:
            hit, folder_hit = self._find_in(base_dir if root == "*" else root, parts, folder)
            if hit and hit != exclude:
                return hit, first_folder
            if folder_hit is not None:
                if folder:
                    return None, folder_hit
                if first_folder is None:
                    first_folder = folder_hit
        return None, first_folder

    def _find_in(self, base: str, parts: list[str], folder: bool = False) -> tuple[Any, Any]:
        if not base:
            return None, None
        if folder:
            return None, self.tree.find_folder(base, parts)
        return self.tree.find_file_or_folder(base, parts)

    def _rooted(self, source: str, folder: bool) -> tuple[Any, Any]:
        if folder:
            return None, self._find_rooted(source, True)
        return self._find_rooted(source), UNKNOWN_FOLDER

    def _find_rooted(self, source: str, folder: bool = False) -> str | None:
        """Absolute paths (rare in mod XML): as-is when they exist here, else matched case-insensitively."""
        if os.path.isabs(source) and (os.path.isdir(source) if folder else os.path.isfile(source)):
            return os.path.normpath(source)
        parts = split_source(source)
        if parts and parts[0].endswith(":"):
            return None  # a drive of another machine
        parts = [p for p in parts if p]
        return self.tree.find_folder("/", parts) if folder else self.tree.find_file("/", parts)
