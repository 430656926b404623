"""The PVF kind's `core.lifecycle.Store`: an archive as the engine's read-only source, saved through `core.files`.

The engine owns identity, revisions, plans, tasks and the lifecycle order; this module says what a PVF
workspace *is* and how it is read and written:

* `load(path, encoding=, keys=, progress=)` opens the archive with the format library (`open_archive`), so
  paged nkpi archives take the same key material as the CLI (`--keys`, `--sk-dat` …; `KEY_REQUIRED` names
  them). The source's keys are archive paths, normalised like the library (`norm_path`: `\\` → `/`, no
  leading `/`, lower case), so `Equipment/A.equ` and `equipment/a.equ` are one key.
* Committed changes live in the workspace overlay (the engine's truth) **and** are mirrored into the
  archive object's staging area (`stage`) under `Engine.lock`, because the library's text compiler reads
  the archive's current string table: a script compiled after a committed `stringtable.bin` change must
  see that table, not the one on disk.
* `serialize(ws, out, progress=)` writes the whole archive with the library's one writer
  (`ArchiveBase.write` over the mirrored overlay), `verify(ws, tmp)` is the library's `verify_written`
  (re-open the temp file, every changed file reads back equal) *before* `core.files` renames it
  (`atomic_write` / `publish_new`, which also check the target's identity right before the rename:
  `SOURCE_CHANGED`, `TARGET_CHANGED`, `TARGET_EXISTS`), and `rebind(ws, path, identity)` is the library's
  `rebind` (the archive moves onto the file just written, its overlay empties) — the same three steps the
  library's own `save` takes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import posixpath
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import FileIdentity
from deskbridge.core.plans import Change, make_change
from deskbridge.core.workspace import DELETED, Workspace
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.strings.encodings import resolve_encoding
from deskbridge.settings import private_dir

Progress = Callable[[int, int], None]
STRINGTABLE = "stringtable.bin"
_MISSING = object()


# --------------------------------------------------------------------------------------------- the source


class DirIndex:
    """Folders → (sub-folders, files) of the archive as opened; built once, lazily (≈1 s per million paths)."""

    def __init__(self, paths: Sequence[str]) -> None:
        dirs: dict[str, set[str]] = {"": set()}
        files: dict[str, list[str]] = {}
        for p in paths:
            key = norm_path(p)
            parent, _, _name = key.rpartition("/")
            files.setdefault(parent, []).append(p)
            # New folders up to the first known one; linked after the walk, so creating a parent's entry
            # cannot stop the walk before that parent is linked to its own parent (a path's first file deep in
            # a new folder tree used to leave the middle folders unlisted).
            child = parent
            links = []
            while child and child not in dirs:
                dirs[child] = set()
                up = child.rpartition("/")[0]
                links.append((up, child))
                child = up
            for up, child in links:
                dirs[up].add(child)
            # a folder already known has its parents already known
        self.dirs = dirs
        self.files = files
        self.display: dict[str, str] = {}
        for d in dirs:
            self.display.setdefault(d, d)
        # Folder display names from the first file under each (archives keep mixed case).
        for parent, names in files.items():
            if parent and names:
                shown = names[0].replace("\\", "/").lstrip("/").rsplit("/", 1)[0]
                self.display[parent] = shown


class PvfSource:
    """One opened archive as the engine's read-only source (see the module docstring)."""

    def __init__(self, archive: Any, path: Path | None, options: Mapping[str, Any]) -> None:
        self.archive = archive
        self.path = path
        self.options = dict(options)
        self._paths: Sequence[str] | None = None
        self._norm: set[str] | None = None
        self._dirs: DirIndex | None = None
        self._lock = threading.Lock()
        self.originals: dict[str, bytes | None] = {}
        """key → payload on disk before the first committed change (None: the file did not exist); the
        `before` side of history commits and of `memory`/`working` exports."""

    # Source protocol -------------------------------------------------------------------------------

    def get(self, key: str) -> bytes:
        # Only asked for keys the workspace overlay does not hold, so the archive's mirror of that overlay
        # holds no change for them either: this is the payload on disk.
        try:
            return self.archive.read(key)
        except BridgeError as exc:
            if exc.code is ErrorCode.NOT_FOUND:
                raise KeyError(key) from None
            raise

    def all_keys(self) -> Iterable[str]:
        return self.paths()

    @staticmethod
    def normalize_key(key: str) -> str:
        return norm_path(key)

    # ---------------------------------------------------------------------------------------------

    def paths(self) -> Sequence[str]:
        """The archive's paths as opened (or last saved), without the overlay: the library's own sequence
        (nkpi: a `PathList` decoding blocks on demand), not a copy — a cached reopen that only searches never
        creates a million path strings. Taken at open and right after a re-bind, when nothing is staged:
        the paths on disk."""
        with self._lock:
            if self._paths is None:
                self._paths = self.archive.paths()
            return self._paths

    def norm_set(self) -> set[str]:
        if self._norm is None:
            self._norm = {norm_path(p) for p in self.paths()}
        return self._norm

    def dirs(self) -> DirIndex:
        paths = self.paths()
        with self._lock:
            if self._dirs is None:
                self._dirs = DirIndex(paths)
            return self._dirs

    def info(self) -> dict[str, Any]:
        ar = self.archive
        return {
            "family": ar.family,
            "variant": ar.variant,
            "encoding": ar.encoding,
            "files": len(self.paths()),
            "warnings": [w.to_dict() for w in getattr(ar, "warnings", [])][:20],
        }

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.archive.close()


class EmptySource:
    """An empty workspace (nothing open yet): no keys."""

    archive = None
    path = None

    def get(self, key: str) -> bytes:
        raise KeyError(key)

    def all_keys(self) -> Iterable[str]:
        return []

    @staticmethod
    def normalize_key(key: str) -> str:
        return norm_path(key)


# --------------------------------------------------------------------------------------------- identity


def _stat_key(st: os.stat_result) -> str:
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


class VerifiedIdentities:
    """Content digests of archives this machine hashed, by (st_dev, st_ino, st_size, st_mtime_ns,
    st_ctime_ns), in one small JSON file beside the content indexes: a reopen of an unchanged archive
    finds its identity (and with it its index) without reading 100s of MB first.

    Why a matching stat is enough here. `st_ctime_ns` is set by the kernel to the current time on every
    change of the file's content or metadata and cannot be set by a program (utime/touch set mtime and
    atime only; POSIX `stat(2)`, "st_ctime"), so content written after we hashed gives another ctime — as
    long as the kernel clock had moved past the old ctime, which timestamp granularity (a jiffy on Linux,
    2 s on FAT) could hide. So a digest is recorded only for a file that had been *quiet*: its ctime and
    mtime at least `QUIET_NS` older than the start of the hash, and the same five fields after the hash as
    before. Any later write then carries a ctime at least `QUIET_NS` newer and misses this record, and a
    replaced file is another inode or ctime. What is left is a clock set backwards by more than that
    (administrator action) — and even then a save still hashes the target right before replacing it
    (`core.files` `expected_identity`), so a replaced archive is reported as `SOURCE_CHANGED`, never
    overwritten. Not used where ctime is the creation time (Windows): there every open hashes.
    Anything unreadable or of another `IDENTITY_SCHEME` is ignored (the file is hashed).

    Beside a recorded digest its chunk digests are kept (`chunks/<digest>`, `core.files.chunk_record`) and
    adopted when the record is used, so the first save after such a reopen reuses them for what it copies
    unchanged instead of hashing the whole archive (PVF-SAVE); a record that does not reproduce the digest
    is ignored (`core.files.adopt_chunk_record`)."""

    QUIET_NS = 3_000_000_000
    KEPT = 64

    def __init__(self, path: Path, quiet_ns: int = QUIET_NS) -> None:
        self.path = path
        self.quiet_ns = quiet_ns
        self._lock = threading.Lock()

    def _read_all(self) -> tuple[dict[str, str], dict[str, str]]:
        """(stat key → digest, digest → detected classic encoding)."""
        try:
            data = json.loads(self.path.read_bytes())
        except (OSError, ValueError):
            return {}, {}
        if not isinstance(data, dict) or data.get("scheme") != files.IDENTITY_SCHEME:
            return {}, {}
        known, encodings = data.get("files"), data.get("encodings")
        return (known if isinstance(known, dict) else {}), (encodings if isinstance(encodings, dict) else {})

    def _read(self) -> dict[str, str]:
        return self._read_all()[0]

    def recorded_digest(self, target: Path, known: dict[str, str] | None = None) -> str | None:
        """The digest recorded for `target` (in `known`, else the file) when its stat is the recorded one
        (see the class), else None."""
        if os.name != "posix":
            return None
        try:
            st = os.stat(target)
        except OSError:
            return None
        digest = (self._read() if known is None else known).get(_stat_key(st))
        return digest if isinstance(digest, str) and len(digest) == 64 else None

    def encoding_of(self, target: Path) -> str | None:
        """The classic pack encoding detected before on the same bytes (keyed by content digest, so it is
        what detection would answer again: it reads only stringtable.bin's bytes), else None."""
        known, encodings = self._read_all()
        digest = self.recorded_digest(target, known)
        name = encodings.get(digest) if digest is not None else None
        if not isinstance(name, str):
            return None
        try:  # a damaged record must not stop the archive from opening: detect instead
            return resolve_encoding(name)
        except BridgeError:
            return None

    def remember_encoding(self, target: Path, name: str) -> None:
        digest = self.recorded_digest(target)
        if digest is not None:
            self._write(encoding=(digest, name))

    def identity(self, target: Path) -> FileIdentity:
        """`files.file_identity(target)`, from the record when the file is the one hashed before."""
        if os.name != "posix":
            return files.file_identity(target)
        try:
            st = os.stat(target)
        except OSError:
            return files.file_identity(target)  # its error (NOT_FOUND …)
        if stat.S_ISREG(st.st_mode):
            digest = self._read().get(_stat_key(st))
            if isinstance(digest, str) and len(digest) == 64:
                self._adopt_chunks(st, digest)
                return FileIdentity(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, digest)
        started = time.time_ns()
        ident = files.file_identity(target)
        try:
            after = os.stat(target)
        except OSError:
            return ident
        quiet = max(st.st_ctime_ns, st.st_mtime_ns) <= started - self.quiet_ns
        same = _stat_key(after) == _stat_key(st) and (ident.inode, ident.size, ident.mtime_ns) == (
            st.st_ino,
            st.st_size,
            st.st_mtime_ns,
        )
        if quiet and same and len(ident.sha256) == 64:
            self._remember(_stat_key(st), ident.sha256)
            self._keep_chunks(after, ident.sha256)
        return ident

    def _chunks_path(self, digest: str) -> Path:
        return self.path.parent / "chunks" / digest

    def _keep_chunks(self, st: os.stat_result, digest: str) -> None:
        record = files.chunk_record(st)
        if record is None:
            return
        folder = self._chunks_path(digest).parent
        with contextlib.suppress(OSError, BridgeError):  # a cache: losing it costs one full hash
            folder.mkdir(parents=True, exist_ok=True)
            files.atomic_write(self._chunks_path(digest), record, durable=False)
            kept = set(self._read().values())  # records of digests no longer kept go too
            for old in folder.iterdir():
                if old.name not in kept and not old.name.startswith(files.TEMP_PREFIX):
                    old.unlink(missing_ok=True)

    def _adopt_chunks(self, st: os.stat_result, digest: str) -> None:
        with contextlib.suppress(OSError, BridgeError):
            record = files.read_regular_file(self._chunks_path(digest), max_bytes=1 << 24)
            files.adopt_chunk_record(st, digest, record)

    def _remember(self, key: str, digest: str) -> None:
        self._write(file=(key, digest))

    def _write(self, *, file: tuple[str, str] | None = None, encoding: tuple[str, str] | None = None) -> None:
        with self._lock:
            known, encodings = self._read_all()
            for table, item in ((known, file), (encodings, encoding)):
                if item is not None:
                    table.pop(item[0], None)
                    table[item[0]] = item[1]
                    while len(table) > self.KEPT:
                        table.pop(next(iter(table)))
            with contextlib.suppress(OSError, BridgeError):
                private_dir(self.path.parent)  # owner-only: it names the archives a person opened
                payload = {"scheme": files.IDENTITY_SCHEME, "files": known, "encodings": encodings}
                files.atomic_write(self.path, json.dumps(payload).encode("utf-8"))


# --------------------------------------------------------------------------------------------- the store


class PvfStore:
    """`core.lifecycle.Store` for PVF archives. `hooks` are called after saves (index, journal)."""

    def __init__(self, identities: VerifiedIdentities | None = None) -> None:
        self.identities = identities
        self.after_save_hooks: list[Callable[[Workspace, Path], None]] = []
        self.last_serialised: dict[str, tuple[str, Any, bytes | None]] = {}
        """key → (display path, value, payload before the change) of the overlay the last serialise wrote."""

    def file_identity(self, path: Path) -> FileIdentity:
        """The lifecycle's identity of an archive being opened (see `VerifiedIdentities`)."""
        if self.identities is None:
            return files.file_identity(path)
        return self.identities.identity(path)

    def load(
        self,
        path: Path | None,
        *,
        encoding: str | None = None,
        keys: Any = None,
        progress: Progress | None = None,
    ) -> PvfSource | EmptySource:
        if path is None:
            return EmptySource()
        if progress is not None:
            progress(0, 3)
        archive = open_archive(path, encoding=encoding, keys=keys)
        try:
            source = PvfSource(archive, path, {"encoding": encoding, "keys": keys})
            if progress is not None:
                progress(1, 3)
            source.paths()  # taken now, while nothing is staged (not a copy: see `paths`)
            if progress is not None:
                progress(2, 3)
            # classic: detect the pack encoding now, not on the first read — or take the detection of these
            # same bytes from an earlier open (≈ 0.5 s of a classic-200k reopen)
            known = None
            if encoding is None and archive.family == "classic" and self.identities is not None:
                known = self.identities.encoding_of(path)
                if known is not None:
                    archive.adopt_detected_encoding(known)
            detected = archive.encoding
            if (
                known is None
                and encoding is None
                and archive.family == "classic"
                and self.identities is not None
            ):
                self.identities.remember_encoding(path, detected)
            if progress is not None:
                progress(3, 3)
        except BaseException:
            archive.close()
            raise
        return source

    def serialize(self, workspace: Workspace, out: BinaryIO, *, progress: Progress | None = None) -> None:
        src = workspace.source
        if not isinstance(src, PvfSource):
            raise BridgeError(
                ErrorCode.SAVE_AS_REQUIRED,
                "this workspace has no archive to write",
                "Open an archive first (pvf_archive_open).",
            )
        self.last_serialised = {
            k: (_shown(src.archive, k, workspace), v, src.originals.get(k))
            for k, v in workspace.overlay.items()
        }
        src.archive.write(out, None, progress)  # the family's one writer, over the mirrored overlay
        for key, data in src.archive.written_payloads().items():  # as stored (nkpi string renumbering)
            if key in self.last_serialised:
                shown, _value, before = self.last_serialised[key]
                self.last_serialised[key] = (shown, data, before)

    def verify(self, workspace: Workspace, tmp: Path) -> None:
        src = workspace.source
        if isinstance(src, PvfSource):
            src.archive.verify_written(tmp)

    def rebind(self, workspace: Workspace, path: Path, identity: FileIdentity | None) -> PvfSource | None:
        src = workspace.source
        if not isinstance(src, PvfSource):
            return None
        src.archive.rebind(path, identity)
        fresh = PvfSource(src.archive, path, src.options)
        return fresh

    def after_save(self, workspace: Workspace, path: Path) -> None:
        errors = []
        for hook in self.after_save_hooks:
            try:
                hook(workspace, path)
            except Exception as exc:  # each hook runs; the lifecycle turns the failure into a warning
                errors.append(f"{type(exc).__name__}: {exc}")
        if errors:
            raise RuntimeError("; ".join(errors))


# --------------------------------------------------------------------------------------------- helpers


def mirror(workspace: Workspace, mapping: Mapping[str, Any]) -> None:
    """Stage committed changes into the archive (call under `Engine.lock`, right with the commit)."""
    src = workspace.source
    if not isinstance(src, PvfSource):
        return
    for key, value in mapping.items():
        norm = norm_path(key)
        if norm not in src.originals:
            src.originals[norm] = src.archive.read(key) if src.archive.exists(key) else None
        src.archive.stage(key, None if value is DELETED else value)


def mirror_on_apply(workspace: Workspace) -> Callable[[list[Change]], dict[str, Any]]:
    """A plan's `on_apply` that commits the selected changes as they are and stages them into the archive
    (edit and script plans; import checks its overwrite keys first, see transfer.import_on_apply)."""

    def on_apply(selected: list[Change]) -> dict[str, Any]:
        mapping = {c.key: c.new for c in selected}
        mirror(workspace, mapping)
        return mapping

    return on_apply


class Compiler:
    """Compile several files' text against one evolving string table; use as a context manager under
    `Engine.lock`.

    The library's classic compiler stages what a text needs besides its own payload: the grown
    `stringtable.bin` (new strings) and the `.str` files whose entries a link's edited text changes
    (`<id::key`…`>`, pvfVSCode's behaviour). Within one plan these accumulate (two scripts adding strings
    get distinct indices; two link edits of one `.str` file both land). On exit every such staging is taken
    back — the archive mirrors the *committed* state only, so nothing reaches it behind the plan — and what
    was staged is offered in `extra` (normalised key → new payload) to become the plan's own changes (see
    `add_side_changes`), with `grew` naming the files that need the grown table. nkpi string pools only grow in
    memory and are written with the archive, so they need no extra change.

    `resume` is the `extra` of an earlier `Compiler` of the same plan (a plan compiled in batches, the lock
    released between them): it is staged on entry, so new strings keep growing that table and later link
    edits see the earlier ones, and `extra` then holds everything every batch staged. `grew` names only
    this batch's files.
    """

    def __init__(self, workspace: Workspace, resume: Mapping[str, bytes] | None = None) -> None:
        src = workspace.source
        if not isinstance(src, PvfSource):
            raise BridgeError(ErrorCode.NO_WORKSPACE, "no archive is open", "Open one with pvf_archive_open.")
        self.archive = src.archive
        self.before: dict[str, bytes | None] = {}
        self.resume = dict(resume or {})
        self.extra: dict[str, bytes] = {}
        self.grew: list[str] = []

    def __enter__(self) -> Compiler:
        # one copy of the overlay's entries (values compared by identity on exit: a stage makes a new object)
        self.before = dict(self.archive.iter_overlay())
        for key, data in self.resume.items():
            self.archive.stage(key, data)
        return self

    def compile(self, path: str, text: str) -> bytes:
        was = _staged_value(self.archive, STRINGTABLE)
        payload = self.archive.text_to_payload(path, text)
        if _staged_value(self.archive, STRINGTABLE) is not was:
            self.grew.append(path)
        return payload

    def __exit__(self, *exc: object) -> None:
        ar = self.archive
        now = dict(ar.iter_overlay())
        changed = [
            k
            for k in now.keys() | self.before.keys()
            if now.get(k, _MISSING) is not self.before.get(k, _MISSING)
        ]
        if exc[0] is None:
            self.extra = {k: now[k] for k in sorted(changed) if now.get(k) is not None}  # type: ignore[misc]
        # Restore what was committed (re-staging also resets the library's cached tables).
        strings = getattr(ar, "strings", None) if ar.family == "classic" else None
        for key in changed:
            if key in self.before:
                ar.stage(key, self.before[key])
            else:
                ar.discard(key)
                if strings is not None and hasattr(strings, "invalidate"):
                    strings.invalidate(key)


def add_side_changes(
    workspace: Workspace,
    extra: Mapping[str, bytes],
    changes: list[Change],
    grew: Iterable[str] = (),
    **table_meta: Any,
) -> None:
    """Append to a plan's `changes` what a `Compiler`'s compiles staged beside the files compiled (`extra`):
    a change for each `.str` file edited through a link's text — unless `changes` writes that file itself
    (a script that also wrote that `.str` file: that change counts) — and the grown string table as one
    change (`reason: new strings` plus `table_meta`), which the change of every file in `grew` then requires:
    applied without it, such a file would name strings the archive lacks."""
    taken = {norm_path(c.key) for c in changes}
    archive = workspace.source.archive  # type: ignore[union-attr]
    enc = archive.encoding
    for key, data in extra.items():
        if key == STRINGTABLE or key in taken:
            continue
        old = workspace.read(key) if workspace.exists(key) else None
        change = make_change(
            _shown(archive, key, workspace),
            None if old is None else old.decode(enc, "replace"),
            data.decode(enc, "replace"),
            reason="link text edited",
        )
        change.new = data  # the exact bytes (the texts above are only for the diff)
        changes.append(change)
    table = extra.get(STRINGTABLE)
    if table is None:
        return
    old_table = workspace.read(STRINGTABLE) if workspace.exists(STRINGTABLE) else None
    table_key = _shown(archive, STRINGTABLE, workspace) if old_table is not None else STRINGTABLE
    changes.append(make_change(table_key, old_table, table, reason="new strings", **table_meta))
    needing = {workspace.key_of(p) for p in grew}
    for ch in changes:
        if workspace.key_of(ch.key) in needing and table_key not in ch.requires:
            ch.requires = (*ch.requires, table_key)


def _shown(archive: Any, key: str, workspace: Workspace) -> str:
    if key in workspace.names:
        return workspace.names[key]
    try:
        return archive.file_info(key).path
    except BridgeError:
        return key  # deleted: the normalised key names it


def _staged_value(archive: Any, path: str) -> Any:
    return archive.staged_value(path, _MISSING)


def text_of(workspace: Workspace, path: str, data: bytes) -> str | None:
    """The editable text of a file's current payload, or None when it has no text form (binary)."""
    src = workspace.source
    if not isinstance(src, PvfSource):
        return None
    try:
        return src.archive.read_text(path)
    except BridgeError as exc:
        if exc.code in (ErrorCode.INVALID_ARGUMENT, ErrorCode.UNSUPPORTED_CHANGE):
            return None
        raise


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def parent_of(path: str) -> str:
    return posixpath.dirname(norm_path(path))
