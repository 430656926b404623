"""Import of local files into the workspace and export of archive content (direct, `110USextend`, `115CN-mod`).

Import (pvfine MCP design "普通文件与目录导入"): `prepare` reads and *freezes* every source file at once (later
changes on disk do not matter), maps it into the archive (a file by its name, a folder keeps its own name and
inner layout: `/tmp/items/equipment` into the root gives `equipment/…`), refuses two sources mapping to one
target, symlinks, special files and illegal archive paths, and holds the bytes in a bounded spill file rather
than memory. The plan shows each target as add or overwrite with a diff; `apply` takes `selectedKeys` and, for
every overwrite, the same key in `overwriteKeys` — all or nothing, through the engine (one revision step).

Export ("统一导出与来源"): sources `selection` (files/folders given by `scopes`, no baseline), `memory` (the
unsaved overlay against the file on disk), `working` (every change since the first recorded history commit,
plus the overlay) and `commit` (one history commit). `mode=direct` writes the files (text where it has a text
form, else bytes) into a new folder; `mode=mod` writes `110USextend` (`<name>-<version>/` with `pack.json`,
`pvf/`, `merge/`) or `115CN-mod` (`<name>-<version>.zip` with `mod.json` and `pvf/`; docs/pvf-mods.md).
Both publish through `core.files` without overwriting (`TARGET_EXISTS`). An export plan records the workspace
revision; running it after the workspace moved is `STALE_EXPORT`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import stat
import tempfile
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deskbridge.core import files, limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.plans import Change, PlanKind, PlanWarning, make_change, text_diff
from deskbridge.core.workspace import DELETED, Workspace
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.paths import BAD_NAME, check_archive_path
from deskbridge.kinds.pvf.store import STRINGTABLE, Compiler, PvfSource, add_side_changes, mirror, text_of
from deskbridge.kinds.pvf.tree import safe_parts

_VERSION_RE = re.compile(r"^[^\x00-\x1f\x7f]{1,128}$")
_LINK_RE = re.compile(r"<(\d+)::([^<>`\s]+)(?:`[^`]*`)?>")
MOD_FORMATS = ("110USextend", "115CN-mod")


def payload_text(archive: Any, path: str, data: bytes) -> str | None:
    """Editable text of any payload of `path` (not only the current one), or None when it has none."""
    if archive.family == "classic":
        from deskbridge.kinds.pvf.archive.classic_text import decode_text, text_encoding_for
        from deskbridge.kinds.pvf.script import classic_codec

        if norm_path(path) == STRINGTABLE:
            return None
        if classic_codec.is_script(data):
            try:
                return archive.strings.decompile(path, data)
            except BridgeError:
                return None
        return decode_text(data, text_encoding_for(path, archive.encoding))
    from deskbridge.kinds.pvf.script import nkpi_codec

    dt = archive.data_type(path)
    try:
        if dt == 1:
            return nkpi_codec.decompile(data, archive.pools, lst=norm_path(path).endswith(".lst"))
        if dt == 3:
            return nkpi_codec.decode_utf16_text(data)[0]
    except BridgeError:
        return None
    return None


# --------------------------------------------------------------------------------------------- spill store


class SpillStore:
    """Frozen import bytes in one anonymous temp file (removed by the OS when closed), bounded by the import
    limits; small payloads stay in memory."""

    MEMORY_MAX = 1 * limits.MIB

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self._fh = tempfile.TemporaryFile(dir=folder, prefix="deskbridge-import-")  # noqa: SIM115 - closed in close()
        self._mem: dict[int, bytes] = {}
        self._where: list[tuple[int, int]] = []
        self._lock = threading.Lock()
        self._end = 0

    def put(self, data: bytes) -> int:
        with self._lock:
            ref = len(self._where)
            if len(data) <= 4096 or sum(len(v) for v in self._mem.values()) + len(data) <= self.MEMORY_MAX:
                self._mem[ref] = data
                self._where.append((-1, len(data)))
            else:
                self._fh.seek(self._end)
                self._fh.write(data)
                self._where.append((self._end, len(data)))
                self._end += len(data)
            return ref

    def get(self, ref: int) -> bytes:
        with self._lock:
            if ref in self._mem:
                return self._mem[ref]
            offset, size = self._where[ref]
            self._fh.seek(offset)
            return self._fh.read(size)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._fh.close()
        self._mem.clear()


# --------------------------------------------------------------------------------------------- import


@dataclass
class Source:
    local: str
    target: str
    ref: int
    size: int
    sha256: str


SECRET_HOME_DIRS = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".kube",
    ".docker",
    ".password-store",
    ".config/gcloud",
)
"""Folders under the home directory whose files are credentials, never imported (an import followed by a read
would hand them to the agent)."""


def refuse_secret(path: Path, protected: list[Path], done: str = "imported") -> None:
    """ACCESS_DENIED when `path` (links followed) lies in a credential folder or in one of `protected`
    (deskbridge's own config and runtime folders); `done` says what is refused (imported, opened)."""
    real = Path(os.path.realpath(path))
    home = Path(os.path.realpath(Path.home()))
    roots = [home / d for d in SECRET_HOME_DIRS] + [Path(os.path.realpath(p)) for p in protected]
    for root in roots:
        if real == root or root in real.parents:
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"'{path}' is in a folder of credentials ({root.name}); it is never {done}",
                f"Give a game data file; credentials and deskbridge's own settings are never {done}.",
            )


def collect_import(
    source_paths: list[str],
    target_dir: str,
    spill: SpillStore,
    progress: Any = None,
    protected: list[Path] | None = None,
) -> list[Source]:
    """Walk the sources (no symlinks, no special files, no credentials), freeze their bytes, map them into the
    archive. `protected`: more folders to refuse (deskbridge's config folder, which holds the MCP token)."""
    protected = list(protected or [])
    base = check_archive_path(target_dir) if target_dir.strip("/\\") else ""
    found: list[Source] = []
    by_target: dict[str, list[str]] = {}
    total = 0

    def add(local: Path, rel: str) -> None:
        nonlocal total
        refuse_secret(local, protected)
        if len(found) >= limits.IMPORT_MAX_FILES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"more than {limits.IMPORT_MAX_FILES} files to import"
            )
        data = files.read_regular_file(local, max_bytes=limits.IMPORT_FILE_MAX_BYTES, shown_as=str(local))
        total += len(data)
        if total > limits.IMPORT_TOTAL_MAX_BYTES:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED, f"the import is over {limits.IMPORT_TOTAL_MAX_BYTES} bytes in total"
            )
        target = check_archive_path(f"{base}/{rel}" if base else rel)
        by_target.setdefault(norm_path(target), []).append(str(local))
        found.append(Source(str(local), target, spill.put(data), len(data), hashlib.sha256(data).hexdigest()))
        if progress is not None and len(found) % 50 == 0:
            progress(len(found), 0)

    for raw in source_paths:
        src = Path(raw)
        if not src.is_absolute():
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"source {raw!r} is not an absolute path")
        refuse_secret(src, protected)
        try:
            st = src.lstat()
        except FileNotFoundError:
            raise BridgeError(ErrorCode.NOT_FOUND, f"'{raw}' does not exist") from None
        if stat.S_ISLNK(st.st_mode):
            raise BridgeError(ErrorCode.ACCESS_DENIED, f"'{raw}' is a symbolic link; import the real file")
        if stat.S_ISREG(st.st_mode):
            add(src, src.name)
        elif stat.S_ISDIR(st.st_mode):
            for root, dirs, names in os.walk(src, followlinks=False):
                dirs.sort()
                for d in list(dirs):
                    if (Path(root) / d).is_symlink():
                        raise BridgeError(ErrorCode.ACCESS_DENIED, f"'{Path(root) / d}' is a symbolic link")
                for name in sorted(names):
                    local = Path(root) / name
                    lst = local.lstat()
                    if not stat.S_ISREG(lst.st_mode):
                        raise BridgeError(
                            ErrorCode.ACCESS_DENIED,
                            f"'{local}' is not a regular file (a link, pipe or device); remove it from the import",
                        )
                    rel = src.name + "/" + local.relative_to(src).as_posix()
                    add(local, rel)
        else:
            raise BridgeError(ErrorCode.ACCESS_DENIED, f"'{raw}' is not a regular file or folder")
    conflicts = {t: s for t, s in by_target.items() if len(s) > 1}
    if conflicts:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{len(conflicts)} archive path(s) would get more than one source file",
            "Import the conflicting sources separately or into different target folders.",
            data={"conflicts": [{"target": t, "sources": s} for t, s in list(conflicts.items())[:50]]},
        )
    if not found:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the sources hold no files")
    return found


def build_import_changes(ws: Workspace, sources: list[Source], spill: SpillStore, mode: str) -> list[Change]:
    """Under `Engine.lock`: one change per target (payload compiled for `text`), plus a grown string table."""
    changes: list[Change] = []
    with Compiler(ws) as comp:
        for s in sources:
            data = spill.get(s.ref)
            exists = ws.exists(s.target)
            old = ws.read(s.target) if exists else None
            shown = ws.source.archive.file_info(s.target).path if exists else s.target  # type: ignore[union-attr]
            meta: dict[str, Any] = {
                "source": s.local,
                "target": shown,
                "size": s.size,
                "sourceSha256": s.sha256,
                "overwrite": exists,
                "mode": mode,
            }
            if mode == "text":
                try:
                    text = data.decode("utf-8-sig")
                except UnicodeDecodeError as exc:
                    raise BridgeError(
                        ErrorCode.ENCODING_MISMATCH,
                        f"'{s.local}' is not UTF-8 text (byte {exc.start}); import it with mode 'raw'",
                        data={"source": s.local, "position": exc.start},
                    ) from None
                payload = comp.compile(s.target, text)
                old_text = text_of(ws, s.target, old) if old is not None else None
                meta["type"] = (
                    "script" if payload[:2] == b"\xb0\xd0" or _is_nkpi_script(ws, s.target) else "text"
                )
                diff = text_diff(shown, old_text, text) if old is None or old_text is not None else None
                binary = None if diff is not None else _summary(old, payload)
                changes.append(
                    Change(shown, "modify" if exists else "add", payload, diff=diff, binary=binary, meta=meta)
                )
            else:
                meta["type"] = "binary"
                changes.append(
                    make_change(shown, old, data, **meta)
                    if old is not None
                    else Change(shown, "add", data, binary=_summary(None, data), meta=meta)
                )
    add_side_changes(ws, comp.extra, changes, comp.grew, derived=True, overwrite=False)
    return changes


def _is_nkpi_script(ws: Workspace, path: str) -> bool:
    ar = ws.source.archive  # type: ignore[union-attr]
    return ar.family == "nkpi" and ar.data_type(path) == 1


def _summary(old: bytes | None, new: bytes) -> dict[str, Any]:
    def d(b: bytes | None) -> dict[str, Any] | None:
        return None if b is None else {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()}

    return {"old": d(old), "new": d(new)}


def import_on_apply(ws: Workspace, overwrite_keys: set[str]):  # type: ignore[no-untyped-def]
    def on_apply(selected: list[Change]) -> dict[str, Any]:
        missing = [c.key for c in selected if c.meta.get("overwrite") and c.key not in overwrite_keys]
        if missing:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{len(missing)} selected change(s) overwrite existing files without being in overwriteKeys",
                "Add each overwrite you want to overwriteKeys (or leave it out of selectedKeys); nothing was applied.",
                data={"needOverwrite": missing[:100]},
            )
        mapping = {c.key: c.new for c in selected}
        mirror(ws, mapping)
        return mapping

    return on_apply


# --------------------------------------------------------------------------------------------- export


@dataclass
class Item:
    """One logical content item of an export: a file with its content before and after (None: absent)."""

    path: str
    before: bytes | None
    after: bytes | None
    baseline: bool


def export_items(
    svc: Any, ws: Workspace, source: str, scopes: list[str], commit_id: str | None
) -> list[Item]:
    """The items of an export source (see the module docstring). Under `Engine.lock`."""
    src: PvfSource = ws.source  # type: ignore[assignment]
    items: dict[str, Item] = {}
    if source == "selection":
        if not scopes:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, "source 'selection' needs scopes (files or folders)"
            )
        wanted = [norm_path(s).rstrip("/") for s in scopes]
        root = "" in wanted
        for p in ws.all_keys():
            k = norm_path(p)
            if root or any(k == w or k.startswith(w + "/") for w in wanted):
                items[k] = Item(p, None, ws.read(p), False)
                if len(items) > limits.EXPORT_MAX_FILES:
                    raise BridgeError(
                        ErrorCode.LIMIT_EXCEEDED, f"more than {limits.EXPORT_MAX_FILES} files to export"
                    )
        missing = [
            s
            for s, w in zip(scopes, wanted, strict=True)
            if w and not any(k == w or k.startswith(w + "/") for k in items)
        ]
        if missing:
            raise BridgeError(
                ErrorCode.NOT_FOUND, f"nothing in the archive under {missing[:5]}", data={"scopes": missing}
            )
        return list(items.values())
    if source in ("working", "commit"):
        from deskbridge.kinds.pvf.history import Journal

        if ws.source_path is None:
            raise BridgeError(ErrorCode.NOT_FOUND, "this workspace has no history")
        journal = Journal(svc.data_dir, ws.source_path)
        if source == "commit":
            if not commit_id:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT, "source 'commit' needs commitId (see pvf_history)"
                )
            c = journal.get(commit_id)
            for f in c["files"]:
                items[norm_path(f["path"])] = Item(
                    f["path"], journal.blob(f["before"]), journal.blob(f["after"]), True
                )
            return list(items.values())
        for k, (path, before, after) in journal.working().items():
            items[k] = Item(path, journal.blob(before), journal.blob(after), True)
    elif source != "memory":
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"source {source!r} is not selection, memory, working or commit"
        )
    for k, v in ws.overlay.items():
        after = None if v is DELETED else v
        prior = items.get(k)
        before = prior.before if prior is not None else src.originals.get(k)
        name = ws.names.get(k) or (src.archive.file_info(k).path if src.archive.exists(k) else k)
        items[k] = Item(name, before, after, True)
    return [i for i in items.values() if i.before != i.after]


def _lst_pairs(ar: Any, path: str, data: bytes | None) -> dict[int, str]:
    if data is None:
        return {}
    if ar.family == "classic":
        from deskbridge.kinds.pvf.lists import parse_classic_list

        return dict(parse_classic_list(path, data, ar.strings.table).entries)
    text = payload_text(ar, path, data) or ""
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^\s*(\d+)\s+`([^`]*)`", text, re.M)}


def _str_entries(ar: Any, path: str, data: bytes | None) -> dict[str, str]:
    if data is None:
        return {}
    from deskbridge.kinds.pvf.strings.strfile import StrFile

    text = payload_text(ar, path, data)
    if text is None:
        text = data.decode(ar.encoding, "replace")
    return StrFile.from_text(text).entries()


@dataclass
class Entry:
    key: str
    """Output path inside the package (the entryKey)."""
    content: bytes
    item: str
    kind: str
    """"pvf", "merge", "raw" or "meta"."""
    data_type: int | None = None


def plan_export(
    ar: Any,
    items: list[Item],
    *,
    mode: str,
    fmt: str | None,
    include_dependencies: bool,
    current: Any,
) -> tuple[list[Entry], list[PlanWarning], list[dict[str, Any]], dict[str, Any]]:
    """Output entries, warnings, skipped deletes and counts of an export (see the module docstring)."""
    entries: list[Entry] = []
    warnings: list[PlanWarning] = []
    skipped: list[dict[str, Any]] = []
    total = 0
    deps: set[str] = set()
    for it in items:
        k = norm_path(it.path)
        if mode == "direct":
            data = it.after if it.after is not None else it.before  # a deletion exports what it was
            if data is None:
                continue
            text = payload_text(ar, it.path, data)
            if text is not None:
                entries.append(Entry(it.path, text.encode("utf-8"), it.path, "pvf"))
            else:
                entries.append(Entry(it.path, data, it.path, "raw"))
            if it.after is None:
                warnings.append(
                    PlanWarning(
                        f"'{it.path}' is deleted in this source; its content before is exported", (it.path,)
                    )
                )
            continue
        if it.after is None:
            skipped.append({"path": it.path, "reason": "MOD packages cannot delete files"})
            continue
        if k.endswith(".lst") or k.endswith(".str"):
            if not it.baseline:
                # A whole table without the content it changed from: never written whole over the client's.
                warnings.append(
                    PlanWarning(f"'{it.path}' has no baseline to compute added entries from; skipped", ())
                )
                skipped.append({"path": it.path, "reason": "no baseline"})
                continue
            if fmt == "115CN-mod":
                text = payload_text(ar, it.path, it.after)
                if text is not None:
                    entries.append(Entry(f"pvf/{it.path}", text.encode("utf-8"), it.path, "pvf"))
                    warnings.append(
                        PlanWarning(
                            f"'{it.path}': 115CN-mod has no merge entries; the whole table is written", ()
                        )
                    )
                continue
            if k.endswith(".lst"):
                old, new = _lst_pairs(ar, it.path, it.before), _lst_pairs(ar, it.path, it.after)
                lines = [f"{i}\t`{p}`" for i, p in new.items() if old.get(i) != p]
                removed = [i for i in old if i not in new]
            else:
                old_s, new_s = _str_entries(ar, it.path, it.before), _str_entries(ar, it.path, it.after)
                lines = [f"{key}>{v}" for key, v in new_s.items() if old_s.get(key) != v]
                removed = [key for key in old_s if key not in new_s]
            if removed:
                skipped.append(
                    {"path": it.path, "reason": f"{len(removed)} entries removed (not representable)"}
                )
            if lines:
                entries.append(
                    Entry(f"merge/{it.path}", ("\n".join(lines) + "\n").encode("utf-8"), it.path, "merge")
                )
            continue
        text = payload_text(ar, it.path, it.after)
        if text is None:
            warnings.append(
                PlanWarning(f"'{it.path}' has no text form; MOD packages hold only scripts and text", ())
            )
            skipped.append({"path": it.path, "reason": "binary"})
            continue
        dt = ar.data_type(it.path) if ar.family == "nkpi" else (1 if it.after[:2] == b"\xb0\xd0" else 3)
        entries.append(Entry(f"pvf/{it.path}", text.encode("utf-8"), it.path, "pvf", dt))
        for m in _LINK_RE.finditer(text):
            deps.add(f"<{m.group(1)}::{m.group(2)}>")
    dep_entries: list[str] = []
    if deps and mode == "mod":
        # String links used by the exported scripts live in the archive's .str tables, which the target client
        # may not have: name them (and add them as merge entries when asked to).
        by_file: dict[str, dict[str, str]] = {}
        for link in sorted(deps):
            m = _LINK_RE.match(link)
            assert m is not None
            table, key = int(m.group(1)), m.group(2)
            rel = _nstring_path(ar, table)
            if rel is None:
                continue
            value = current(table, key)
            if value is None:
                continue
            by_file.setdefault(rel, {})[key] = value
            dep_entries.append(link)
        if include_dependencies and fmt == "110USextend":
            have = {e.key for e in entries}
            for rel, kv in by_file.items():
                key = f"merge/{rel}"
                lines = [f"{k}>{v}" for k, v in sorted(kv.items())]
                if key in have:
                    continue
                entries.append(Entry(key, ("\n".join(lines) + "\n").encode("utf-8"), rel, "merge"))
        elif dep_entries:
            warnings.append(
                PlanWarning(
                    f"{len(dep_entries)} string link(s) used by exported scripts are not in the package "
                    "(includeDependencies false); the target client must already have them",
                    (),
                )
            )
    total = sum(len(e.content) for e in entries)
    if len(entries) > limits.EXPORT_MAX_FILES or total > limits.EXPORT_TOTAL_MAX_BYTES:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED,
            f"the export is over {limits.EXPORT_MAX_FILES} files or {limits.EXPORT_TOTAL_MAX_BYTES} bytes",
        )
    if not entries:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            "nothing to export: the source has no content the chosen format can hold",
            "Check skippedDeletes and warnings in the answer; pick another source or mode.",
            data={"skippedDeletes": skipped[:50], "warnings": [w.to_dict() for w in warnings][:20]},
        )
    return entries, warnings, skipped, {"dependencies": len(dep_entries)}


def _nstring_path(ar: Any, table: int) -> str | None:
    if ar.family == "classic":
        return ar.strings.nstring().get(table)
    for lst in getattr(ar.refs(), "_lists", []):
        if table in lst:
            return lst[table]
    return None


def validate_mod_meta(
    fmt: str | None, name: str | None, version: str | None, mod_id: str | None
) -> tuple[str, str]:
    if fmt not in MOD_FORMATS:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"format must be one of {', '.join(MOD_FORMATS)} (pvf_export_formats)"
        )
    if not name or BAD_NAME.search(name) or name.strip() != name or name in (".", ".."):
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "a MOD needs a name usable as a file name")
    version = (version or "").strip() or "1.0"
    if not _VERSION_RE.match(version) or len(version.encode()) > 128 or BAD_NAME.search(version):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, "version must be 1–128 bytes without control or path characters"
        )
    if fmt == "115CN-mod" and not (mod_id and re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{2,127}", mod_id)):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            "115CN-mod needs modId: a stable unique id (3–128 of A–Z a–z 0–9 . _ -), reused for updates",
        )
    return name, version


def output_target(
    out_parent: Path, out_name: str | None, mode: str, fmt: str | None, meta: dict[str, Any]
) -> Path:
    """Where the package goes; checked before the plan is consumed (an unusable target leaves it pending)."""
    if not out_parent.is_absolute():
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "outputParent must be an absolute path")
    if not out_parent.is_dir():
        raise BridgeError(ErrorCode.NOT_FOUND, f"the folder '{out_parent}' does not exist")
    if mode == "direct":
        if not out_name:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "a direct export needs outputName (a new folder)")
        check_archive_path(out_name)
        if "/" in out_name.strip("/"):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "outputName is one folder name")
        target = out_parent / out_name
    elif fmt == "115CN-mod":
        target = out_parent / f"{meta['name']}-{meta['version']}.zip"
    else:
        target = out_parent / f"{meta['name']}-{meta['version']}"
    if target.exists() or target.is_symlink():
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{target}' already exists; exports never merge into or replace it",
            "Choose another outputName / version, or remove the old output first.",
            data={"path": str(target), "diskTouched": False, "diskCommitted": False},
        )
    return target


def write_package(
    target: Path,
    mode: str,
    fmt: str | None,
    entries: list[Entry],
    meta: dict[str, Any],
    *,
    progress: Any = None,
) -> dict[str, Any]:
    """Publish the package at `target` without overwriting anything; returns the output path and counts."""
    _check_collisions([e.key for e in entries])
    if fmt == "115CN-mod":
        buf = io.BytesIO()
        manifest = {
            "schema": 1,
            "format": "115CN-mod",
            "modId": meta["modId"],
            "name": meta["name"],
            "version": meta["version"],
            "files": [{"path": e.key, "dataType": e.data_type} for e in entries],
        }
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("mod.json", json.dumps(manifest, ensure_ascii=False, indent=2))
            for e in entries:
                z.writestr(e.key, e.content)
        files.publish_new(target, buf.getvalue())
    else:

        def fill(tmp: Path) -> None:
            for n, e in enumerate(entries, 1):
                if progress is not None and n % 100 == 0:
                    progress(n, len(entries))
                dest = tmp.joinpath(*e.key.split("/"))
                dest.parent.mkdir(parents=True, exist_ok=True)
                with open(dest, "xb") as fh:
                    fh.write(e.content)
            if mode == "mod":
                pack = {
                    "name": meta["name"],
                    "version": meta["version"],
                    "priority": 100,
                    "enabled": True,
                    "types": {e.key[len("pvf/") :]: e.data_type for e in entries if e.kind == "pvf"},
                }
                with open(tmp / "pack.json", "xb") as fh:
                    fh.write(json.dumps(pack, ensure_ascii=False, indent=2).encode("utf-8"))

        files.publish_directory(target, fill)
    return {"outputPath": str(target), "files": len(entries), "bytes": sum(len(e.content) for e in entries)}


def _check_collisions(keys: list[str]) -> None:
    """Two outputs that one case-insensitive file system (Windows, macOS) would see as one, a file that is
    also a folder, or a name that would leave the output folder, are refused before anything is written."""
    seen: dict[str, str] = {}
    dirs: set[str] = set()
    for k in keys:
        # An entry of a hostile archive named `../../x` was written outside the export folder (through the
        # temp folder's parent), and a 115CN zip would carry it to whoever unpacks the package (zip slip).
        safe_parts(k)
        low = k.lower()
        if low in seen:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{k}' and '{seen[low]}' differ only in case")
        seen[low] = k
        parts = low.split("/")
        for i in range(1, len(parts)):
            dirs.add("/".join(parts[:i]))
    clash = [k for k in seen if k in dirs]
    if clash:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT, f"'{clash[0]}' is both a file and a folder in the output"
        )


EXPORT_FORMATS = [
    {
        "id": "direct",
        "mode": "direct",
        "read": False,
        "write": True,
        "operations": ["replace"],
        "output": "folder",
    },
    {
        "id": "110USextend",
        "mode": "mod",
        "read": False,
        "write": True,
        "operations": ["replace", "merge-list", "merge-strings"],
        "output": "<name>-<version>/ with pack.json, pvf/, merge/",
    },
    {
        "id": "115CN-mod",
        "mode": "mod",
        "read": False,
        "write": True,
        "operations": ["replace"],
        "output": "<name>-<version>.zip with mod.json and pvf/ (docs/pvf-mods.md)",
    },
]

__all__ = ["EXPORT_FORMATS", "PlanKind", "SpillStore", "collect_import"]
