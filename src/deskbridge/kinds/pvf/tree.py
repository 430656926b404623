"""Extract an archive to an editable directory tree, pack such a tree back, and verify an archive end to end.

Extract writes each file at its archive path: scripts as dialect text (UTF-8), text files (`.str`, `.nut`)
as UTF-8, and everything that is not clean text as raw payload bytes; `.deskbridge-pvf.json` records the
family, variant, encoding, header fields and each file's mode, so pack knows how to turn it back into a
payload. Round trip contract: extract → pack → extract leaves every payload unchanged (tested).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import atomic_write, make_dirs, publish_directory, read_regular_file
from deskbridge.core.terminal import escaped_controls, has_control
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import TEXT_SUFFIXES, Progress, norm_path
from deskbridge.kinds.pvf.paths import case_duplicates, refuse_case_duplicates
from deskbridge.kinds.pvf.strings.encodings import DEFAULT_ENCODING, cannot_encode, resolve_encoding

MANIFEST = ".deskbridge-pvf.json"
TREE_FILE_MAX_BYTES = 256 * 1024 * 1024
"""Largest file `pack` reads from a tree (a payload cannot exceed an nkpi chunk's 256 MiB; as `pvf set`)."""
MODE_SCRIPT, MODE_TEXT, MODE_RAW, MODE_TABLE = "script", "text", "raw", "stringtable"
VERIFY_PROBLEMS = ("unreadable", "checksum", "structural", "duplicates", "conversion", "roundtrip")
"""The `verify_archive` lists that make `pvf verify` exit non-zero (each entry is one problem)."""


def safe_parts(path: str) -> list[str]:
    """The components an archive path is written under on disk (extract, export); refuses traversal, absolute,
    drive and empty components: a hostile archive's `../../x` must never land outside the output folder.

    A component holding a control character (U+0000–U+001F, U+007F–U+009F: `\\x01`, a newline …) is refused
    too, never written nor escaped: such a name breaks every listing and script that reads the tree (a newline
    splits one file into two lines of `find` or `ls`), Windows cannot hold one at all, and an escaped name
    would pack back as another archive path than the one extracted."""
    parts = path.replace("\\", "/").split("/")
    if not path or any(p in ("", ".", "..") or ":" in p or "\0" in p for p in parts):
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"archive path '{escaped_controls(path)}' cannot be extracted safely",
            "The archive names a file outside the output folder (`..`, a drive or an empty part): leave it out "
            "(scopes), or delete it from the archive (pvf_edit_prepare with delete) and add it under a proper name.",
            data={"path": path},
        )
    if has_control(path):
        raise BridgeError(
            ErrorCode.ACCESS_DENIED,
            f"archive path '{escaped_controls(path)}' holds a control character, which deskbridge refuses to "
            "write as a file name; nothing was written",
            "Delete it from the archive and add it back under a name without control characters (`deskbridge "
            "pvf rm` and `pvf add`, or pvf_edit_prepare in a workspace), or leave it out of an export (scopes).",
            data={"path": path},
        )
    return parts


def _safe_target(root: Path, path: str) -> Path:
    """Where an archive path lands under `root`; refuses traversal, absolute and empty components."""
    return root.joinpath(*safe_parts(path))


def _mode_of(ar: Any, path: str, data: bytes) -> str:
    if norm_path(path) == "stringtable.bin":
        return MODE_TABLE
    if ar.family == "classic":
        return MODE_SCRIPT if data[:2] == b"\xb0\xd0" else MODE_TEXT
    data_type = getattr(ar, "data_type", None)
    if callable(data_type) and data_type(path) == 1:
        return MODE_SCRIPT
    return MODE_TEXT


def refuse_existing(out: Path) -> None:
    """`TARGET_EXISTS` when an output archive is already there (pack, `set/add/rm -o`): never replaced
    without `--force`."""
    if Path(out).exists():
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{out}' already exists",
            "Pass --force to replace it (the new archive is verified before it replaces the old one), or "
            "choose another -o.",
            data={"path": str(out)},
        )


def script_typed(ar: Any, path: str, data: bytes) -> bool:
    """True when the file is a script by its content (classic `B0 D0`) or its DataType (nkpi 1 and 3):
    a failed text conversion of such a file is a problem to report, not an ordinary binary file."""
    if ar.family == "classic":
        return data[:2] == b"\xb0\xd0"
    data_type = getattr(ar, "data_type", None)
    return callable(data_type) and data_type(path) in (1, 3)


def _text_typed(path: str) -> bool:
    return os.path.splitext(path)[1].lower() in TEXT_SUFFIXES


def _ensure_empty_target(out: Path, force: bool) -> bool:
    """True when `out` must be created (absent or empty); TARGET_EXISTS for a non-empty folder unless `force`."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"'{out}' exists and is not a folder",
            "Give the path of a new or empty folder with -o.",
            data={"path": str(out)},
        )
    if not out.exists():
        return True
    if any(out.iterdir()):
        if not force:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS,
                f"'{out}' is not empty; extracting into it would mix two trees (and pack would then build "
                "an archive of both)",
                "Choose a new or empty folder, or pass --force to write over the files that are there.",
                data={"path": str(out)},
            )
        return False
    return True


def extract_tree(
    ar: Any, out: Path, *, raw: bool = False, force: bool = False, progress: Progress | None = None
) -> dict[str, Any]:
    """Write every file of `ar` under `out` (text where lossless, else raw) and the manifest.

    A new (or empty) `out` is built next to it and published whole (`core.files.publish_directory`), so an
    interrupted extract leaves no half tree; a non-empty `out` is refused unless `force` (then files are
    written over in place). `fallbacks` lists every file that has a text form (a script, or a text file
    by name) but was written raw, with the reason; `script_fallbacks` counts the scripts among them.
    """
    out = Path(out)
    for path in ar.paths():  # a name that cannot be written is refused before anything is (`safe_parts`)
        safe_parts(path)
    fresh = _ensure_empty_target(out, force)
    result: dict[str, Any] = {}

    def fill(root: Path) -> None:
        result.update(_extract_into(ar, root, raw=raw, progress=progress))

    if fresh:
        # An empty folder the person made is taken away so the whole tree can appear in its place, and put
        # back (with its permissions) if the extraction does not get that far — a Ctrl-C included.
        kept_mode = stat.S_IMODE(out.stat().st_mode) if out.is_dir() else None
        if kept_mode is not None:
            out.rmdir()
        try:
            publish_directory(out, fill)
        except BaseException:
            if kept_mode is not None and not out.exists():
                out.mkdir()
                os.chmod(out, kept_mode)
            raise
    else:
        # Over an existing folder nothing is published whole: the manifest says "incomplete" until the last
        # file is written (pack refuses such a tree, so a Ctrl-C cannot leave a part that packs as if it were
        # the archive), and every write refuses a symbolic link below `out` (a planted `equipment -> /etc`
        # would otherwise receive the files).
        root = Path(os.path.realpath(out))
        made: set[Path] = set()

        def write(target: Path, content: bytes) -> None:
            if target.parent not in made:
                make_dirs(target.parent, root=root)
                made.add(target.parent)
            atomic_write(target, content, root=root, durable=False)

        write(root / MANIFEST, json.dumps({"version": 1, "incomplete": True}).encode("utf-8"))
        try:
            result.update(_extract_into(ar, root, raw=raw, progress=progress, write=write))
        except BridgeError as exc:
            # The refused write wrote nothing, but the files before it were written over: say what is on disk
            # (the message said "nothing was written" of a folder holding part of the tree).
            raise BridgeError(
                exc.code,
                f"{exc.message.removesuffix('; nothing was written')}: the extraction stopped there; {out} "
                "holds the files written before it, and its manifest marks the tree incomplete (pack refuses it)",
                f"{exc.hint} Then run the same extract again to finish it.",
                {**exc.data, "diskTouched": True, "originalIntact": False},
            ) from None
    return result


def _plain_write(target: Path, content: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(content)


def _extract_into(
    ar: Any,
    out: Path,
    *,
    raw: bool,
    progress: Progress | None,
    write: Callable[[Path, bytes], None] = _plain_write,
) -> dict[str, Any]:
    modes: dict[str, str] = {}
    paths = ar.paths()
    counts = {"text": 0, "raw": 0}
    fallbacks: list[dict[str, Any]] = []
    for i, path in enumerate(paths):
        data = ar.read(path)
        target = _safe_target(out, path)
        mode = MODE_RAW
        content = data
        if not raw:
            try:
                text = ar.read_text(path)
                mode = _mode_of(ar, path, data)
                content = text.encode("utf-8")
            except BridgeError as exc:
                mode = MODE_RAW
                is_script = script_typed(ar, path, data)
                if is_script or _text_typed(path):
                    fallbacks.append(
                        {"path": path, "reason": f"{exc.code}: {exc.message}", "script": is_script}
                    )
        modes[path] = mode
        counts["raw" if mode == MODE_RAW else "text"] += 1
        write(target, content)
        if progress is not None and i % 512 == 0:
            progress(i, len(paths))
    header = getattr(ar, "header", None)
    manifest = {
        "version": 1,
        "family": ar.family,
        "variant": ar.variant,
        "encoding": ar.encoding,
        "header": header.to_dict() if header is not None and hasattr(header, "to_dict") else None,
        "files": modes,
    }
    write(out / MANIFEST, json.dumps(manifest, ensure_ascii=False, indent=1).encode("utf-8"))
    if progress is not None:
        progress(len(paths), len(paths))
    return {
        "files": len(paths),
        **counts,
        "fallbacks": fallbacks,
        "script_fallbacks": sum(1 for f in fallbacks if f["script"]),
        "warnings": [w.to_dict() for w in ar.warnings],
    }


def _walk(root: Path) -> list[str]:
    found = []
    for dirpath, dirs, names in os.walk(root):
        for name in (*dirs, *names):
            full = Path(dirpath) / name
            if full.is_symlink():
                # A link in a tree someone else made (a downloaded mod) would pack whatever it points at
                # (`stolen.txt -> ~/.ssh/id_rsa`) into an archive that is then shared; a linked folder was
                # skipped without a word. The tree holds files, so a link is refused, never followed.
                raise BridgeError(
                    ErrorCode.ACCESS_DENIED,
                    f"'{full.relative_to(root).as_posix()}' in the tree '{root}' is a symbolic link; pack "
                    "reads only the tree's own files",
                    "Replace the link with a copy of the file or folder it points at (or delete it), then pack.",
                    data={"path": str(full)},
                )
        for name in names:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if rel == MANIFEST or name.startswith(".deskbridge-tmp-"):
                continue
            found.append(rel)
    return sorted(found)


def _guess_mode(path: str, data: bytes) -> str:
    if norm_path(path) == "stringtable.bin":
        return MODE_TABLE if data.startswith(b"#PVF_StringTable") else MODE_RAW
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"#PVF_File"):
        return MODE_SCRIPT
    return MODE_TEXT if os.path.splitext(path)[1].lower() in TEXT_SUFFIXES else MODE_RAW


def pack_tree(
    directory: Path,
    out: Path,
    *,
    like: Path | None = None,
    encoding: str | None = None,
    keys: Any = None,
    force: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Build an archive at `out` from an extracted tree (see the module docstring). An existing `out` is
    `TARGET_EXISTS` unless `force` (then it is replaced atomically once the new archive is verified)."""
    root = Path(directory)
    if not root.is_dir():
        raise BridgeError(ErrorCode.NOT_FOUND, f"no directory '{root}'")
    if not force:
        refuse_existing(out)
    manifest: dict[str, Any] = {}
    if (root / MANIFEST).is_file():
        try:
            manifest = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"{MANIFEST} is not valid JSON: {exc}") from None
    if manifest.get("incomplete"):
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"'{root}' holds an extraction that did not finish (interrupted or failed); packing it would "
            "build an archive that lacks the files never written",
            "Run `deskbridge pvf extract ARCHIVE -o FOLDER --force` again to the end (your edits to files "
            "it rewrites are overwritten), then pack.",
            data={"path": str(root)},
        )
    like_ar = open_archive(like, keys=keys) if like is not None else None
    family = like_ar.family if like_ar is not None else manifest.get("family", "classic")
    if family != "classic":
        if like_ar is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "packing an nkpi tree needs --like ARCHIVE (its variant, keys and header come from there)",
            )
        return _pack_by_staging(root, out, like_ar, manifest, progress)
    enc = (
        resolve_encoding(encoding)
        if encoding
        else (like_ar.encoding if like_ar is not None else manifest.get("encoding") or DEFAULT_ENCODING)
    )
    enc = resolve_encoding(enc)  # a manifest written before names "cp950"
    return _pack_classic(root, out, enc, like_ar, manifest, progress)


def _read_modes(root: Path, manifest: dict[str, Any]) -> list[tuple[str, str, bytes]]:
    modes = {norm_path(k): v for k, v in (manifest.get("files") or {}).items()}
    out = []
    rels = _walk(root)
    # `whitebear.cre` beside `WhiteBear.cre` (a case-sensitive file system) would pack into one ambiguous
    # archive: refuse before reading anything
    refuse_case_duplicates(rels, where=f"the tree '{root}'")
    for rel in rels:
        # a FIFO or device put in the tree would block `read_bytes()` forever or never end
        data = read_regular_file(root / rel, max_bytes=TREE_FILE_MAX_BYTES, shown_as=rel)
        out.append((rel, modes.get(norm_path(rel)) or _guess_mode(rel, data), data))
    return out


def _pack_classic(
    root: Path, out: Path, enc: str, like_ar: Any, manifest: dict[str, Any], progress: Progress | None
) -> dict[str, Any]:
    from deskbridge.kinds.pvf.archive.classic import ClassicArchive, empty_classic
    from deskbridge.kinds.pvf.archive.classic_text import text_encoding_for
    from deskbridge.kinds.pvf.script import classic_codec
    from deskbridge.kinds.pvf.script import text as dialect
    from deskbridge.kinds.pvf.strings.stringtable import StringTable

    files = _read_modes(root, manifest)
    table = StringTable([], enc)
    for rel, mode, data in files:
        if norm_path(rel) == "stringtable.bin":
            if mode == MODE_RAW:
                table = StringTable.parse(data, enc)
            else:
                text = data.decode("utf-8")
                for tok in dialect.lex(text):
                    if tok.kind is not dialect.Kind.STRING:
                        raise dialect.syntax_error(
                            text, tok.pos, "stringtable.bin text holds one `string` per line"
                        )
                    table.append(str(tok.value))
                table.appended = 0
                table._original = None
    payloads: list[tuple[str, bytes]] = []
    table_at = None
    for i, (rel, mode, data) in enumerate(files):
        if norm_path(rel) == "stringtable.bin":
            table_at = len(payloads)
            payloads.append((rel, b""))
            continue
        try:
            if mode == MODE_SCRIPT:
                payloads.append(
                    (rel, classic_codec.compile_text(data.decode("utf-8").lstrip("\ufeff"), table))
                )
            elif mode == MODE_TEXT:
                payloads.append((rel, data.decode("utf-8").encode(text_encoding_for(rel, enc))))
            else:
                payloads.append((rel, data))
        except BridgeError as exc:
            exc.data.setdefault("path", rel)
            exc.message = f"{rel}: {exc.message}"
            raise
        except UnicodeEncodeError as exc:
            err = cannot_encode(exc.object, enc, exc, where=rel)
            err.data["path"] = rel
            raise err from None
        except UnicodeDecodeError as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"{rel}: byte {exc.start} is not UTF-8; extracted text files are UTF-8",
                "Save the file as UTF-8 in your editor (or mark it raw in .deskbridge-pvf.json), then pack.",
                data={"path": rel, "position": exc.start},
            ) from None
        if progress is not None and i % 512 == 0:
            progress(i, len(files))
    warnings = check_registries(payloads, table)
    table_bytes = table.to_bytes() if (len(table) or table_at is not None) else b""
    if table_at is not None:
        payloads[table_at] = (payloads[table_at][0], table_bytes)
    elif len(table):
        payloads.append(("stringtable.bin", table_bytes))
    header = like_ar.header if like_ar is not None else None
    mh = manifest.get("header") or {}
    guid = header.guid if header is not None else (mh.get("guid") or "").encode("ascii") or None
    version = header.file_version if header is not None else int(mh.get("fileVersion", 66282))
    trailer = header.trailer if header is not None else bytes.fromhex(mh.get("trailer", ""))

    # Staged onto an empty archive and saved by the family's one writer, whose verify re-opens the temp
    # file and reads every payload back before the rename.
    ar = ClassicArchive(None, empty_classic(guid, version, trailer), enc)
    ar.stage_many(payloads)
    ar.save_copy(Path(out))
    if progress is not None:
        progress(len(files), len(files))
    return {"files": len(payloads), "family": "classic", "encoding": enc, "warnings": warnings}


def _links_of(payload: bytes) -> list[tuple[int, int]]:
    """(table id, key index) of every string link (type 9 + 10 records) in a classic script payload."""
    import numpy as np

    from deskbridge.kinds.pvf.script import classic_codec

    if not classic_codec.is_script(payload) or (len(payload) - 2) % 5:
        return []
    recs = classic_codec.read_tokens(payload)
    at = np.flatnonzero(recs["t"][:-1] == classic_codec.T_LINK_ID) if len(recs) else []
    return [
        (int(recs["v"][i]), int(recs["v"][i + 1])) for i in at if recs["t"][i + 1] == classic_codec.T_LINK_KEY
    ]


def check_registries(payloads: list[tuple[str, bytes]], table: Any) -> list[str]:
    """The registries a classic tree's scripts need: string links need `n_string.lst` (refused without it:
    every link would resolve to nothing in game), and each table id a `.str` file that is in the tree
    (a warning per id). Returns the warnings."""
    from deskbridge.kinds.pvf.lists import N_STRING_LST, parse_classic_list
    from deskbridge.kinds.pvf.strings.strfile import StrFile

    users = [(rel, links) for rel, data in payloads if (links := _links_of(data))]
    if not users:
        return []
    by_key = {norm_path(rel): data for rel, data in payloads}
    if N_STRING_LST not in by_key:
        first, links = users[0]
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"{N_STRING_LST} is missing from the tree, but {len(users)} scripts use string links "
            f"(first: {first}, table {links[0][0]}); without it every link shows nothing in game",
            "Put n_string.lst back at the top of the tree (extract it again from the archive), then pack.",
            data={"path": N_STRING_LST, "scripts": len(users)},
        )
    registry = parse_classic_list(N_STRING_LST, by_key[N_STRING_LST], table)
    registry.root_relative = True
    warnings = []
    entries: dict[int, tuple[str, dict[str, str]] | None] = {}
    for table_id in sorted({tid for _, links in users for tid, _ in links}):
        target = registry.resolve(table_id)
        entries[table_id] = None
        if target is None:
            warnings.append(f"string links use table {table_id}, which {N_STRING_LST} does not list")
        elif norm_path(target) not in by_key:
            warnings.append(f"{N_STRING_LST} maps table {table_id} to '{target}', which is not in the tree")
        else:
            f = StrFile.from_text(by_key[norm_path(target)].decode(table.encoding, "replace"))
            entries[table_id] = (target, f.entries())
            warnings += [
                f"duplicate key in {target}: {k} (tools disagree on which line wins)"
                for k in f.duplicate_keys()
            ]
    missing = []
    for rel, links in users:
        for tid, key_index in links:
            known = entries.get(tid)
            key = table.get(key_index) if table.is_canonical(key_index) else None
            if known is not None and key is not None and key not in known[1]:
                missing.append(f"{rel}: <{tid}::{key}> has no entry in {known[0]}")
    warnings += missing[:20]
    if len(missing) > 20:
        warnings.append(f"… and {len(missing) - 20} more links to missing keys")
    return warnings


def _pack_by_staging(
    root: Path, out: Path, like_ar: Any, manifest: dict[str, Any], progress: Progress | None
) -> dict[str, Any]:
    """Any family: stage every file of the tree onto the --like archive (deleting what the tree lacks), save a copy."""
    files = _read_modes(root, manifest)
    present = set()
    for i, (rel, mode, data) in enumerate(files):
        present.add(norm_path(rel))
        if mode == MODE_RAW:
            like_ar.stage(rel, data)
        else:
            like_ar.stage_text(rel, data.decode("utf-8"))
        if progress is not None and i % 512 == 0:
            progress(i, len(files))
    for path in like_ar.paths():
        if norm_path(path) not in present:
            like_ar.stage(path, None)
    like_ar.save_copy(out)
    return {"files": len(files), "family": like_ar.family, "encoding": like_ar.encoding}


def verify_archive(ar: Any, progress: Progress | None = None) -> dict[str, Any]:
    """Read every file; scripts/text must convert to text and back to identical bytes; classic checksums.

    `problems` counts what makes `pvf verify` exit non-zero: unreadable files, checksum failures, failed
    round trips, scripts (by content or DataType) whose text conversion fails (`conversion`), and
    structural warnings found while opening (`structural`, e.g. a tree checksum mismatch), and stored
    paths that differ only in case (`duplicates`: other tools would read a different file than we do).
    """
    report: dict[str, Any] = {
        "files": 0,
        "scripts": 0,
        "text": 0,
        "binary": 0,
        "unreadable": [],
        "roundtrip": [],
        "checksum": [],
        "conversion": [],
        "textFallback": [],
    }
    paths = ar.paths()
    report["files"] = len(paths)
    checksums = getattr(ar, "verify_checksums", None)
    if callable(checksums):
        report["checksum"] = checksums()
    for i, path in enumerate(paths):
        if progress is not None and i % 512 == 0:
            progress(i, len(paths))
        try:
            data = ar.read(path)
        except BridgeError as exc:
            report["unreadable"].append(f"{path}: {exc.message}")
            continue
        try:
            text = ar.read_text(path)
        except BridgeError as exc:
            if script_typed(ar, path, data):
                report["conversion"].append(f"{path}: {exc.code}: {exc.message}")
            elif _text_typed(path):
                report["textFallback"].append(f"{path}: {exc.message}")
                report["binary"] += 1
            else:
                report["binary"] += 1
            continue
        mode = _mode_of(ar, path, data)
        report["scripts" if mode == MODE_SCRIPT else "text"] += 1
        if norm_path(path) == "stringtable.bin":
            continue
        try:
            if _payload_of(ar, path, text) != data:
                report["roundtrip"].append(path)
        except BridgeError as exc:
            report["roundtrip"].append(f"{path}: {exc.message}")
    report["duplicates"] = [f"'{a}' and '{b}'" for a, b in case_duplicates(ar.stored_paths())]
    report["links"] = _link_warnings(ar)
    report["warnings"] = [w.to_dict() for w in ar.warnings]
    report["structural"] = [w["message"] for w in report["warnings"] if w["code"] == ErrorCode.PVF_CORRUPT]
    report["problems"] = sum(len(report[k]) for k in VERIFY_PROBLEMS)
    return report


def _link_warnings(ar: Any) -> list[str]:
    """Classic string links that resolve to nothing, and keys repeated in a `.str` (warnings: the archive
    still works, but those links show nothing in game, or a different text in each tool)."""
    strings = getattr(ar, "strings", None) if ar.family == "classic" else None
    if strings is None:
        return []
    out = [f"<{tid}::{key}> resolves to nothing: {why}" for (tid, key), why in strings.missing_links.items()]
    out += [f"duplicate key in {d} (tools disagree on which line wins)" for d in strings.duplicate_keys()]
    return out


class _ScratchStrings:
    """A string table view that gives new strings provisional indexes without growing the real table."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.extra: dict[str, int] = {}

    def get(self, index: int) -> str | None:
        return self.table.get(index)

    def is_canonical(self, index: int) -> bool:
        return self.table.is_canonical(index)

    def intern(self, text: str) -> int:
        found = self.table.index_of(text)
        if found is None:
            found = self.extra.setdefault(text, len(self.table) + len(self.extra))
        return found


def _payload_of(ar: Any, path: str, text: str) -> bytes:
    """text → payload without touching the archive's staged state (classic: compile against a scratch view)."""
    if ar.family == "classic":
        from deskbridge.kinds.pvf.archive.classic_text import text_encoding_for
        from deskbridge.kinds.pvf.script import classic_codec

        if text.startswith(classic_codec.HEADER_LINE):
            return classic_codec.compile_text(text, _ScratchStrings(ar.strings.table))
        return text.encode(text_encoding_for(path, ar.encoding))
    return ar.text_to_payload(path, text)
