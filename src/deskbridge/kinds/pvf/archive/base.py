"""The `Archive` protocol every PVF family implements, plus the shared overlay, save and verify machinery.

Contract for family implementations (classic: `archive/classic.py`; nkpi: `archive/nkpi.py`):

* Opening parses only headers, tables and names; payloads are decrypted/inflated on first `read`.
* Paths are archive-internal, `/`-separated; lookups are case-insensitive (`norm_path`), as in every tool
  (research/pvf.md §1A "Path normalisation").
* `read(path)` returns the decoded payload bytes (classic: decrypted and trimmed to dataLen; nkpi: the
  inflated file bytes). Staged content wins over the original.
* `stage(path, data)` puts a new payload (or `None` = delete) in an in-memory overlay; nothing touches the
  disk until `save`/`save_copy`. `stage_text(path, text)` compiles editable text first.
* `save(target=None, *, backup=False)` writes the archive (to its source by default) through
  `core.files.atomic_write`, verifies the written temp file (re-open + every staged file reads back
  identical) in its `verify` step *before* the rename, and then re-binds the object to the written file with an empty overlay.
  `save_copy(target)` does the same into another file and leaves this object's source and overlay alone.
  An archive without staged changes is written byte-identical to its source.

Families subclass `ArchiveBase` and implement the `_`-prefixed hooks; `open_archive` in
`archive/__init__.py` detects the family. nkpi entry points expected by `open_archive` (module
`archive/nkpi.py`): `looks_like_nkpi(head: bytes) -> bool` and
`open_nkpi(source: Path | bytes, *, encoding: str | None, keys: object | None) -> Archive`.
"""

from __future__ import annotations

import contextlib
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol, runtime_checkable

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import FileIdentity, atomic_write, remove_stale_temps
from deskbridge.core.terminal import escaped_controls, has_control
from deskbridge.kinds.pvf.paths import normalize_archive_path, refuse_case_duplicates

Progress = Callable[[int, int], None]
"""`progress(done, total)` callback for long work (CLI progress bars); units are chosen by the caller."""


norm_path = normalize_archive_path
"""Lookup key of an archive path (the one rule, `kinds/pvf/paths.py`); kept under this name for callers."""


def corrupt(offset: int, expected: str, *, what: str = "archive", **data: Any) -> BridgeError:
    """A `PVF_CORRUPT` error naming the byte offset and what was expected there."""
    return BridgeError(
        ErrorCode.PVF_CORRUPT,
        f"{what} is damaged at offset {offset}: expected {expected}",
        data={"offset": offset, "expected": expected, **data},
    )


def not_found(path: str) -> BridgeError:
    return BridgeError(ErrorCode.NOT_FOUND, f"no file '{path}' in the archive", data={"path": path})


@dataclass(frozen=True, slots=True)
class FileInfo:
    """What the archive knows about one file without reading its payload."""

    path: str
    size: int
    """Payload size in bytes (staged size when staged)."""
    kind: str
    """"script" (token stream), "text" or "binary"; a cheap guess from the name/type until read."""
    staged: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Family fields: classic `name_hash`, `checksum`, `offset`; nkpi `chunk`, `data_offset`, `data_type`."""

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "size": self.size, "kind": self.kind, "staged": self.staged, **self.extra}


@dataclass(frozen=True, slots=True)
class SaveReport:
    """What a save wrote and how it was checked."""

    target: Path
    bytes_written: int
    changed: tuple[str, ...]
    """Paths whose payload was added, replaced or deleted."""
    verified: int
    """How many changed files were read back from the written file and compared."""
    byte_identical: bool
    """True when nothing was staged and the original bytes were written unchanged."""
    backup: Path | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": str(self.target),
            "bytesWritten": self.bytes_written,
            "changed": list(self.changed),
            "verified": self.verified,
            "byteIdentical": self.byte_identical,
            "backup": None if self.backup is None else str(self.backup),
            "seconds": round(self.seconds, 4),
        }


@runtime_checkable
class Archive(Protocol):
    """One open PVF archive of any family (see the module docstring for the contract)."""

    family: str
    """"classic" or "nkpi"."""
    variant: str
    """classic: "classic"; nkpi: "legacy" | "guard" | "protected" | "paged"."""
    encoding: str
    """Codec name for archive text (classic pack encoding, e.g. "windows-950"; nkpi: "utf-8"/"utf-16-le")."""
    source: Path | None
    warnings: list[BridgeError]
    """Non-fatal findings (ENCODING_MISMATCH, checksum mismatches) collected while opening/reading."""

    def paths(self) -> list[str]: ...
    def stored_paths(self) -> list[str]: ...
    def exists(self, path: str) -> bool: ...
    def read(self, path: str) -> bytes: ...
    def file_info(self, path: str) -> FileInfo: ...
    def read_text(self, path: str) -> str: ...
    def list_prefix_text(self, path: str, data: bytes, count: int) -> tuple[str, int] | None: ...
    def text_to_payload(self, path: str, text: str) -> bytes: ...
    def stage(self, path: str, data: bytes | None) -> None: ...
    def stage_text(self, path: str, text: str) -> None: ...
    def staged(self) -> Mapping[str, bytes | None]: ...
    def staged_value(self, path: str, default: Any = None) -> Any: ...
    def save(
        self, target: Path | str | None = None, *, backup: bool = False, progress: Progress | None = None
    ) -> SaveReport: ...
    def save_copy(
        self, target: Path | str, *, backup: bool = False, progress: Progress | None = None
    ) -> SaveReport: ...
    def close(self) -> None: ...


class ArchiveBase(ABC):
    """Overlay bookkeeping and the save/verify pipeline shared by both families.

    A family implements: `_original_keys()` (norm key → display path, in archive order), `_read_original(key)`,
    `_original_info(key)`, `_write(out, progress)` (the whole archive with the overlay applied),
    `_write_unchanged(out, progress)` (the source bytes verbatim), `_reopen(path)` (re-bind after save) and
    the text hooks `read_text`/`text_to_payload`.
    """

    family: str = ""
    variant: str = ""
    encoding: str = ""

    def __init__(self, source: Path | None) -> None:
        self.source = source
        self.warnings: list[BridgeError] = []
        self._overlay: dict[str, bytes | None] = {}
        self._overlay_names: dict[str, str] = {}
        self._last_written: FileIdentity | None = None
        self._source_key = _stat_key(source)
        """The source's (device, inode, size, mtime, ctime) when opened: an in-place save refuses with
        `SOURCE_CHANGED` when another program wrote the file since (checked right before the rename)."""
        if source is not None:
            _clean_stale_temps(source)

    # ----------------------------------------------------------------------------------------- hooks

    @abstractmethod
    def _original_keys(self) -> Mapping[str, str]: ...

    @abstractmethod
    def _read_original(self, key: str) -> bytes: ...

    @abstractmethod
    def _original_info(self, key: str) -> FileInfo: ...

    @abstractmethod
    def _write(self, out: BinaryIO, progress: Progress | None) -> None: ...

    @abstractmethod
    def _write_unchanged(self, out: BinaryIO, progress: Progress | None) -> None: ...

    @abstractmethod
    def _reopen(self, path: Path) -> None: ...

    @abstractmethod
    def read_text(self, path: str) -> str: ...

    @abstractmethod
    def list_prefix_text(self, path: str, data: bytes, count: int) -> tuple[str, int] | None:
        """The first `count` tokens of a large `.lst` as text (the first lines of `read_text`), and its
        token count, so a page of it is read without decompiling the rest; None: read the whole text."""

    @abstractmethod
    def text_to_payload(self, path: str, text: str) -> bytes: ...

    # ----------------------------------------------------------------------------------------- reading

    def paths(self) -> list[str]:
        """Every path (original order, staged new files last, staged deletions left out)."""
        orig = self._original_keys()
        if not self._overlay:
            return list(orig.values())
        out = [p for k, p in orig.items() if self._overlay.get(k, b"") is not None]
        out.extend(
            self._overlay_names[k] for k, v in self._overlay.items() if v is not None and k not in orig
        )
        return out

    def stored_paths(self) -> list[str]:
        """Every path as stored in the source, in archive order, duplicates included (for `verify`)."""
        return list(self._original_keys().values())

    def exists(self, path: str) -> bool:
        key = norm_path(path)
        if key in self._overlay:
            return self._overlay[key] is not None
        return key in self._original_keys()

    def read(self, path: str) -> bytes:
        key = norm_path(path)
        if key in self._overlay:
            data = self._overlay[key]
            if data is None:
                raise not_found(path)
            return data
        if key not in self._original_keys():
            raise not_found(path)
        return self._read_original(key)

    def read_original(self, path: str) -> bytes:
        """The payload as stored in the source, whatever is staged (the content index reads files as they
        are on disk, the state it was built from)."""
        key = norm_path(path)
        if key not in self._original_keys():
            raise not_found(path)
        return self._read_original(key)

    def has_original(self, path: str) -> bool:
        """True when the source stores `path` (staged changes ignored)."""
        return norm_path(path) in self._original_keys()

    def file_info(self, path: str) -> FileInfo:
        key = norm_path(path)
        if key in self._overlay:
            data = self._overlay[key]
            if data is None:
                raise not_found(path)
            base = self._original_info(key) if key in self._original_keys() else None
            return FileInfo(
                self._overlay_names[key],
                len(data),
                self._staged_kind(key, data, base),
                True,
                base.extra if base else {},
            )
        if key not in self._original_keys():
            raise not_found(path)
        return self._original_info(key)

    def _staged_kind(self, key: str, data: bytes, base: FileInfo | None) -> str:
        """The kind of a staged payload. Classic scripts carry their kind in the bytes (B0 D0)."""
        return guess_kind(key, data)

    # ----------------------------------------------------------------------------------------- staging

    def stage(self, path: str, data: bytes | None) -> None:
        """Put `data` (or a deletion when `None`) in the overlay; a later stage of the same path wins."""
        key = norm_path(path)
        if not key or key.endswith("/"):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{path}' is not a file path")
        if data is None and key not in self._original_keys():
            self._overlay.pop(key, None)
            return
        if data is not None and key in self._original_keys():
            with contextlib.suppress(BridgeError):
                if self._read_original(key) == data:
                    self._overlay.pop(key, None)  # staging the original bytes back is no change at all
                    return
        if data is not None and key not in self._overlay_names and key not in self._original_keys():
            _refuse_bad_new_name(path, key)
        self._overlay[key] = None if data is None else bytes(data)
        # a new file is stored under its normalised (lower-case) name, as pvfUtility writes it: a stored
        # upper-case name would be unreachable from string links and registries in other tools
        self._overlay_names[key] = self._original_keys().get(key, key)

    def stage_text(self, path: str, text: str) -> None:
        self.stage(path, self.text_to_payload(path, text))

    def stage_many(self, items: Mapping[str, bytes | None] | Iterable[tuple[str, bytes | None]]) -> None:
        """Stage several files at once (an import); two names that differ only in case are refused with
        both names and nothing is staged, where one `stage` after another would silently keep the last."""
        pairs = list(items.items() if isinstance(items, Mapping) else items)
        refuse_case_duplicates([p for p, _ in pairs], where="the files to stage")
        for path, data in pairs:
            self.stage(path, data)

    def staged(self) -> Mapping[str, bytes | None]:
        return {self._overlay_names[k]: v for k, v in self._overlay.items()}

    def staged_value(self, path: str, default: Any = None) -> Any:
        """What is staged for `path` (its payload, None for a deletion), or `default` when nothing is: one
        lookup, where `staged()` copies the whole overlay (a compile asks twice per file)."""
        return self._overlay.get(norm_path(path), default)

    def discard(self, path: str | None = None) -> None:
        """Drop the staged change of `path`, or every staged change."""
        if path is None:
            self._overlay.clear()
            self._overlay_names.clear()
        else:
            self._overlay.pop(norm_path(path), None)

    @property
    def dirty(self) -> bool:
        return bool(self._overlay)

    def iter_overlay(self) -> Iterator[tuple[str, bytes | None]]:
        yield from self._overlay.items()

    # ----------------------------------------------------------------------------------------- saving

    def write(
        self,
        out: BinaryIO,
        overlay: Mapping[str, bytes | None] | None = None,
        progress: Progress | None = None,
    ) -> None:
        """The one writer of this family: the whole archive, the source with `overlay` applied (path →
        payload, `None` deletes; default: the staged changes), streamed into `out`. With nothing to apply
        the source bytes are written unchanged. Saves, `pack`, `build_classic` and the CLI's single-file
        edits all write through here and `core.files` (docs/pvf-format.md "Writing").

        A write to a file is checked with `verify_written(tmp)` before it replaces anything, and the object
        is moved onto the published file with `rebind(path, identity)`; a workspace that writes through
        `core.files` itself (the PVF `Store`) calls the three in that order, as `save` does."""
        self._begin_write()
        if overlay is None:
            (self._write_unchanged if not self._overlay else self._write)(out, progress)
            return
        saved = self._overlay, self._overlay_names
        self._overlay, self._overlay_names = {}, {}
        try:
            for path, data in overlay.items():
                self.stage(path, data)
            (self._write_unchanged if not self._overlay else self._write)(out, progress)
        finally:
            self._overlay, self._overlay_names = saved

    def _begin_write(self) -> None:
        """Reset a family's per-write state (what its writer leaves for its verify and its re-bind), so a
        previous write's state never leaks into this one."""
        return None

    def written_payloads(self) -> Mapping[str, bytes]:
        """Payloads the last `write` stored differently from the staged bytes (lookup key → bytes as
        written); a family that renumbers references while writing (nkpi pools) reports them here, so a
        caller recording what was saved (the history journal) records what is on disk."""
        return {}

    def verify_written(self, path: Path | str, expected: Mapping[str, bytes | None] | None = None) -> int:
        """Check a file this object just wrote (`write` with the staged changes) before it replaces anything:
        re-open it with the family reader; every payload of `expected` (path → bytes, `None` = deleted;
        default: the staged changes) must read back equal. Returns how many files were checked (0 when
        nothing was staged: the source bytes were copied verbatim). Raises `INTERNAL` "verify failed: …"."""
        if expected is None:
            want = dict(self._overlay)
        else:
            want = {norm_path(k): None if v is None else bytes(v) for k, v in expected.items()}
        if not want:
            return 0
        return int(self._verify_written(Path(path), want))

    def rebind(self, path: Path | str, identity: FileIdentity | None = None) -> None:
        """Move this object onto `path`, the file its last `write` produced and `verify_written` checked,
        now published (renamed into place): it becomes the source, the overlay empties. `identity` (the
        `core.files` identity of the published file) lets a family re-bind without re-parsing the file it
        wrote (classic edit-only saves); without it, or when the file is no longer that one, it re-opens."""
        target = Path(path)
        self._last_written = identity
        self._reopen(target)
        self.source = target
        self._source_key = _stat_key(target)
        self.discard()

    def save(
        self,
        target: Path | str | None = None,
        *,
        backup: bool = False,
        progress: Progress | None = None,
        expected_identity: FileIdentity | None = None,
    ) -> SaveReport:
        """Write to `target` (default: the source), verify, then re-bind to the written file.

        Saving over the source refuses with `SOURCE_CHANGED` (nothing written) when the file changed on
        disk since it was opened, and also when `expected_identity` (a caller's `core.files` identity of
        the source, content hash included) no longer matches right before the rename."""
        if target is None:
            if self.source is None:
                raise BridgeError(
                    ErrorCode.SAVE_AS_REQUIRED, "this archive was opened from bytes; give a target"
                )
            target = self.source
        report = self._save_to(
            Path(target), backup=backup, progress=progress, expected_identity=expected_identity
        )
        self.rebind(report.target, self._last_written)
        return report

    def save_copy(
        self, target: Path | str, *, backup: bool = False, progress: Progress | None = None
    ) -> SaveReport:
        """Write a copy to `target`; this object keeps its source and its staged changes."""
        target = Path(target)
        if self.source is not None and target.exists() and os.path.samefile(target, self.source):
            raise BridgeError(ErrorCode.SAME_AS_SOURCE, f"'{target}' is the open archive itself; use save")
        return self._save_to(target, backup=backup, progress=progress)

    def _save_to(
        self,
        target: Path,
        *,
        backup: bool,
        progress: Progress | None,
        expected_identity: FileIdentity | None = None,
    ) -> SaveReport:
        t0 = time.perf_counter()
        _clean_stale_temps(target)
        unchanged = not self._overlay
        changed = tuple(sorted(self._overlay_names[k] for k in self._overlay))
        expected = dict(self._overlay)
        over_source = self.source is not None and target.exists() and os.path.samefile(target, self.source)

        verified = 0

        def verify(tmp: Path) -> None:
            nonlocal verified
            verified = 0 if unchanged else self._verify_written(tmp, expected)
            if over_source:
                self._check_source_unchanged()

        written = atomic_write(
            target,
            lambda out: self.write(out, None, progress),
            backup=backup,
            verify=verify,
            expected_identity=expected_identity if over_source else None,
        )
        self._last_written = written.identity  # lets a family re-bind to exactly the file it wrote
        return SaveReport(
            target,
            written.identity.size,
            changed,
            verified,
            unchanged,
            written.backup_path,
            time.perf_counter() - t0,
        )

    def _check_source_unchanged(self) -> None:
        """`SOURCE_CHANGED` when the source file is no longer the one opened (another program wrote it)."""
        assert self.source is not None
        if self._source_key is not None and _stat_key(self.source) != self._source_key:
            raise BridgeError(
                ErrorCode.SOURCE_CHANGED,
                f"'{self.source}' changed on disk since it was opened (another program wrote it); "
                "nothing was written",
                "Open the archive again and repeat the change, so that the other program's edit is not lost.",
                data={
                    "path": str(self.source),
                    "diskTouched": True,
                    "diskCommitted": False,
                    "originalIntact": True,
                },
            )

    def _verify_written(self, path: Path, expected: Mapping[str, bytes | None]) -> int:
        """Re-open the written file with the same family reader; every staged payload must read back equal."""
        from deskbridge.kinds.pvf.archive import open_archive  # local: the package imports this module

        again = open_archive(path, encoding=self.encoding or None)
        try:
            for key, data in expected.items():
                name = self._overlay_names.get(key, key)
                if data is None:
                    if again.exists(key):
                        raise BridgeError(
                            ErrorCode.INTERNAL, f"verify failed: deleted '{name}' is still present"
                        )
                elif again.read(key) != data:
                    raise BridgeError(
                        ErrorCode.INTERNAL, f"verify failed: '{name}' reads back different bytes"
                    )
            return len(expected)
        finally:
            again.close()

    def close(self) -> None:
        """Release file handles; the object must not be used afterwards."""
        return None

    def __enter__(self) -> ArchiveBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


STALE_TEMP_AGE_S = 3600.0
"""A `.deskbridge-tmp-*` file next to an archive untouched this long is left over from a killed save."""


def _refuse_bad_new_name(path: str, key: str) -> None:
    """The last line for a new file's name, whoever stages it (CLI, edits, imports, scripts): no empty, `.` or
    `..` component and no control character. Such an entry is meaningless to the game, a tool that extracts
    the archive would write it outside its folder, and a control character in a name (a newline, ESC) splits
    `.lst` registries and drives the terminal of whoever lists the archive. (Names already in an archive are
    kept as they are: they are only read.)"""
    if has_control(key):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"'{escaped_controls(path)}' is not a valid archive path (it holds a control character)",
            "Use printable characters only in file names.",
            data={"path": escaped_controls(path)},
        )
    padded = f"/{key}/"
    if "/../" in padded or "/./" in padded or "//" in padded:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"'{path}' is not a valid archive path (an empty, '.' or '..' component)",
            "Use '/'-separated names without '.' or '..' components.",
            data={"path": path},
        )


def _clean_stale_temps(path: Path) -> None:
    """Remove our own temp files a killed save left beside `path` (SIGKILL skips every cleanup): only names
    with `core.files`' temp prefix, only after `STALE_TEMP_AGE_S` (a save still running in another process
    keeps its file), never another program's files (`core.files.remove_stale_temps`)."""
    with contextlib.suppress(OSError):
        remove_stale_temps(Path(path).parent, STALE_TEMP_AGE_S)


def _stat_key(path: Path | None) -> tuple[int, ...] | None:
    """What any write to a file changes (ctime included, which `utime` cannot set back); None if absent."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


SCRIPT_SUFFIXES = frozenset(
    {
        ".equ",
        ".stk",
        ".skl",
        ".mob",
        ".lst",
        ".npc",
        ".dgn",
        ".twn",
        ".map",
        ".atk",
        ".obj",
        ".ptl",
        ".act",
        ".ai",
        ".key",
        ".aic",
        ".cha",
        ".shp",
        ".qst",
        ".etc",
        ".tbl",
        ".cre",
        ".rcp",
        ".lay",
        ".til",
        ".ui",
    }
)
TEXT_SUFFIXES = frozenset({".str", ".nut", ".txt", ".als", ".xml", ".ini", ".csv"})


def guess_kind(path: str, data: bytes | None = None) -> str:
    """ "script", "text" or "binary" from the payload when given (classic scripts start B0 D0), else the name."""
    if data is not None and data[:2] == b"\xb0\xd0":
        return "script"
    suffix = os.path.splitext(path)[1].lower()
    if suffix in TEXT_SUFFIXES:
        return "text"
    if suffix in SCRIPT_SUFFIXES and data is None:
        return "script"
    return "binary"


def kernel_copy(out: BinaryIO, source_fd: int, start: int, length: int) -> int:
    """Copy source bytes to the end of `out` in the kernel (`os.copy_file_range`); returns the bytes copied
    (0 when `out` has no file descriptor, or the platform or file system refuses). Untouched ciphertext is
    nearly all of an edit save, so copying it without passing through Python keeps the save close to a file
    copy. `core.files.atomic_write`'s temp file offers `copy_range`, which also keeps its running content
    hash (it hashes the copied range in a worker thread); a plain file gets the raw system call."""
    copy_range = getattr(out, "copy_range", None)
    if copy_range is not None:
        return int(copy_range(source_fd, start, length))
    if not hasattr(os, "copy_file_range"):
        return 0
    try:
        out_fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        return 0
    out.flush()
    pos = out.tell()
    os.lseek(out_fd, pos, os.SEEK_SET)
    done = 0
    try:
        while done < length:
            n = os.copy_file_range(source_fd, out_fd, length - done, start + done)
            if n <= 0:
                break  # end of the source file: the caller pads the rest
            done += n
    except OSError:
        pass  # e.g. EXDEV on older kernels: the caller copies the rest through memory
    out.seek(pos + done)
    return done
