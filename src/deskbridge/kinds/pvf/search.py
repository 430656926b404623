"""PVF search: path mode over the path list, content mode over a persistent token index.

Path mode is a case-insensitive substring search over every current path (original paths joined into one
lower-case string and searched with `str.find`, so a million paths answer in milliseconds), plus the
overlay's added files.

Content mode asks a per-archive index in the platform cache folder (`<cache>/pvf-index/<sha256>.pvfidx/`,
keyed by the archive file's content hash, so a reopened archive finds its index at once): token postings
and the vocabulary of token texts (`postings.py` says why that finds every hit without decompiling every
file). The index only proposes candidates — every hit is confirmed on the file's text as stored and its
matching lines found — so it never returns a stale line. Files changed in the workspace overlay are
skipped in the index and searched directly; after a save their rows are replaced and the index is re-keyed
to the saved file's hash (incremental, not a rebuild).

Queries shorter than three characters scan the text of the files in `scope`, refused with
`LIMIT_EXCEEDED` when the scope holds more than `SHORT_QUERY_SCAN_MAX` files.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import DELETED
from deskbridge.kinds.pvf import postings
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.settings import private_dir

INDEX_VERSION = 5
"""5: distinct vocabulary entries, each with its run of keys (`vocab_key_offs.npy`); 4: the vocabulary's offsets
count UTF-8 bytes and the paths are a binary table (3: characters, JSON)."""
SHORT_QUERY_SCAN_MAX = 20_000
SNIPPET_MAX_CHARS = 200
HITS_PER_FILE_MAX = 20


# --------------------------------------------------------------------------------------------- paths


class PathList:
    """Every original path of one source, searchable by case-insensitive substring in one `str.find` loop."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths
        lowered = [norm_path(p) for p in paths]
        self.blob = "\n".join(lowered) + "\n"
        starts = [0] * len(lowered)
        pos = 0
        for i, p in enumerate(lowered):
            starts[i] = pos
            pos += len(p) + 1
        self.starts = starts

    def find(self, needle: str, start_index: int = 0) -> Iterator[int]:
        """Indices of paths containing `needle` (already lower case), in order, from `start_index`."""
        if not self.paths:
            return
        blob, starts = self.blob, self.starts
        pos = starts[start_index] if start_index < len(starts) else len(blob)
        last = -1
        while True:
            hit = blob.find(needle, pos)
            if hit < 0:
                return
            i = bisect.bisect_right(starts, hit) - 1
            if i != last:
                yield i
                last = i
            pos = starts[i + 1] if i + 1 < len(starts) else len(blob)


# --------------------------------------------------------------------------------------------- index


class _Stored:
    """What `ClassicStrings` reads, as the archive stores it (staged changes ignored)."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive
        self.encoding = archive.encoding
        self.warnings: list[BridgeError] = []

    def read(self, path: str) -> bytes:
        return self.archive.read_original(path)

    def exists(self, path: str) -> bool:
        return self.archive.has_original(path)


class DiskText:
    """The text of a file as stored in the archive on disk — the state the index was built from — whatever
    the workspace has staged (an unsaved `.str` edit must not change what the index confirms)."""

    TEXTS_KEPT = 4096
    """Texts kept after confirming (≈ 12 MiB): searches one after another confirm the same first files (row
    order), and a file's text on disk only changes with a save (`reset`)."""

    def __init__(self, archive: Any, lock: Any) -> None:
        self.archive = archive
        self.lock = lock
        self._strings: Any = None
        self._generation = 0  # counts `reset`s: a table read before one is not installed after it
        self._texts: dict[str, str | None] = {}

    def warm(self) -> None:
        """Read the tables the first confirmation needs (string table index, n_string.lst), so that the
        first search does not pay for them."""
        if self.archive.family != "classic":
            return
        # Built outside the engine lock — ≈ 0.8 s on classic-200k, during which every tool call (the open's
        # own answer included) would wait — and installed under it only if no save re-read the archive
        # meanwhile (`reset`). Best effort: on any failure the first search reads the tables instead.
        generation = self._generation
        try:
            strings = self._new_strings()
            strings.table.index_of("")
            strings.nstring()
        except Exception:
            return
        with self.lock:
            if self._strings is None and generation == self._generation:
                self._strings = strings

    def reset(self) -> None:
        """After a save the archive on disk is another file: read its tables afresh."""
        with self.lock:
            self._generation += 1
            self._strings = None
            self._texts.clear()

    def link_texts(self, pairs: np.ndarray) -> list[tuple[int, str]]:
        """(key record, text) of the string links `pairs` (`id << 32 | key index`) as they read now."""
        with self.lock:
            strings = self._classic()
            return list(postings.link_texts(strings.table, strings.link_text, pairs))

    def _classic(self) -> Any:
        if self._strings is None:
            self._strings = self._new_strings()
        return self._strings

    def _new_strings(self) -> Any:
        from deskbridge.kinds.pvf.archive.classic_text import ClassicStrings

        return ClassicStrings(_Stored(self.archive))  # type: ignore[arg-type]

    def __call__(self, path: str) -> str | None:
        with self.lock:
            if path in self._texts:
                return self._texts[path]
            text = self._read(path)
            if len(self._texts) >= self.TEXTS_KEPT:
                self._texts.pop(next(iter(self._texts)))
            self._texts[path] = text
            return text

    def _read(self, path: str) -> str | None:
        ar = self.archive
        try:
            if ar.family == "classic":
                return self._classic().read_text(path)
            from deskbridge.kinds.pvf.script import nkpi_codec

            data = ar.read_original(path)
            dt = ar.data_type(path)
            if dt == 3:
                return nkpi_codec.decode_utf16_text(data)[0]
            if dt == 1:
                return nkpi_codec.decompile(data, ar.pools, lst=norm_path(path).endswith(".lst"))
            return None
        except BridgeError:
            return None


class PathTable:
    """The index's row paths as stored: one UTF-8 byte string and the offsets of each path in it. A cached
    reopen reads two files instead of parsing a JSON list of a million strings; a path is decoded when a
    candidate needs it."""

    def __init__(self, blob: bytes, offs: np.ndarray) -> None:
        self.blob = blob
        self.offs = offs

    @classmethod
    def of(cls, paths: list[str]) -> PathTable:
        encoded = [p.encode("utf-8", "surrogatepass") for p in paths]
        offs = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offs[1:])
        return cls(b"".join(encoded), offs)

    def __len__(self) -> int:
        return len(self.offs) - 1

    def __getitem__(self, i: int) -> str:
        lo, hi = int(self.offs[i]), int(self.offs[i + 1])
        return self.blob[lo:hi].decode("utf-8", "surrogatepass")

    def __iter__(self) -> Iterator[str]:
        blob, offs = self.blob, self.offs.tolist()
        for lo, hi in itertools.pairwise(offs):
            yield blob[lo:hi].decode("utf-8", "surrogatepass")


def _mapped(path: Path) -> np.ndarray:
    """The array in `path`, mapped (pages are read when a query touches them) as a plain `ndarray`: slices of
    an `np.memmap` are memmaps too, each paying the subclass's bookkeeping, and a query takes thousands."""
    return np.asarray(np.load(path, mmap_mode="r"))


_CONTEXT_FILES = ("stringtable.bin", "n_string.lst")
"""Classic files whose content changes the text of other files (string links read n_string.lst → .str)."""


class ContentIndex:
    """The persistent content index of one archive file (see the module docstring). Thread-safe.

    On disk: `<root>/<sha256>.pvfidx/` with `meta.json` (file count, rows changed by saves since the build),
    the row paths (`paths.bin`, `paths_offs.npy`: `PathTable`), the vocabulary (`vocab.txt` in UTF-8, `vocab_starts.npy`, `vocab_keys.npy`, `vocab_key_offs.npy`), the postings
    (`seg0_keys.npy`, `seg0_offs.npy`, `seg0_files.npy`) and the classic string links (`pairs.npy`; see
    `postings.py`). Rows are the archive's files in `paths()` order (row id = position + 1); a save marks
    the rows of the files it changed as gone and appends rows for their new content (kept as text in
    `meta.json`), so no save rebuilds the index."""

    def __init__(self, root: Path, sha256: str) -> None:
        self.root = root
        self.sha256 = sha256
        self.path = root / f"{sha256}.pvfidx"
        self.state = "missing"
        """missing → building → ready (or failed)."""
        self.error: str | None = None
        self.task_id: str | None = None
        self.progress: tuple[int, int] = (0, 0)
        self.seconds: float | None = None
        self.cached = False
        self.reader: Callable[[str], str | None] | None = None
        """Text of an indexed file as on disk (`DiskText`); set by the workspace."""
        self._lock = threading.RLock()
        self._paths: PathTable = PathTable(b"", np.zeros(1, np.int64))
        self._vocab: postings.Vocabulary | None = None
        self._segments: list[postings.Segment] = []
        self._pairs: np.ndarray = np.empty(0, np.uint64)
        self._meta: dict[str, Any] = {}
        self._dead: np.ndarray = np.zeros(0, dtype=bool)
        self._rows_of: dict[str, int] | None = None
        self._recent: dict[str, tuple[np.ndarray, list[dict[str, Any]]]] = {}
        for old in (root / f"{sha256}.sqlite", root / f"{sha256}.sqlite-wal", root / f"{sha256}.sqlite-shm"):
            with contextlib.suppress(OSError):
                old.unlink()  # the FTS5 index of earlier versions: never read again
        if (self.path / "meta.json").exists():
            with contextlib.suppress(OSError, ValueError, KeyError):
                self._load()
                self.state = "ready"
                self.cached = True

    def status(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "taskId": self.task_id,
            "cached": self.cached,
            "done": self.progress[0],
            "total": self.progress[1],
            "seconds": self.seconds,
            "error": self.error,
        }

    # -- storage -------------------------------------------------------------------------------------

    def _load(self) -> None:
        d = self.path
        meta = json.loads((d / "meta.json").read_text("utf-8"))
        if meta.get("version") != INDEX_VERSION or not meta.get("complete"):
            raise ValueError("not a complete index of this version")
        self._paths = PathTable((d / "paths.bin").read_bytes(), _mapped(d / "paths_offs.npy"))
        self._vocab = postings.Vocabulary(
            (d / "vocab.txt").read_bytes(),
            _mapped(d / "vocab_starts.npy"),
            _mapped(d / "vocab_keys.npy"),
            _mapped(d / "vocab_key_offs.npy"),
        )
        self._segments = [
            postings.Segment(
                _mapped(d / f"seg{i}_keys.npy"),
                _mapped(d / f"seg{i}_offs.npy"),
                _mapped(d / f"seg{i}_files.npy"),
            )
            for i in range(int(meta["segments"]))
        ]
        self._pairs = np.load(d / "pairs.npy")
        self._meta = meta
        self._dead = np.zeros(len(self._paths), dtype=bool)
        if meta.get("dead"):
            self._dead[np.array(meta["dead"], dtype=np.int64)] = True
        extra = meta.get("links")
        if extra:  # link texts added by saves since the build (`_relink`)
            self._vocab = self._vocab.extended([(int(k), str(t)) for k, t in extra])

    def _write_meta(self, directory: Path) -> None:
        from deskbridge.core.files import atomic_write

        atomic_write(directory / "meta.json", json.dumps(self._meta, ensure_ascii=False).encode("utf-8"))

    # -- building ------------------------------------------------------------------------------------

    def build(
        self,
        archive_path: Path,
        options: dict[str, Any],
        *,
        progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Index every file of the archive on disk (its own handle: saves never disturb it)."""
        t0 = time.perf_counter()
        # owner-only (0700): the index holds every word of the archive's files (vocab.txt), readable by every
        # local user in a folder made with the umask
        private_dir(self.root)
        tmp = self.root / f"{self.sha256}.{os.getpid()}.{threading.get_ident()}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        with self._lock:
            self.state = "building"
        ar = open_archive(archive_path, **{k: v for k, v in options.items() if v is not None})
        try:
            paths = list(ar.paths())  # nkpi answers a lazy PathList; the index stores plain strings
            total = len(paths)
            if total > postings.FILE_MASK:
                raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"{total} files are more than the index holds")
            self.progress = (0, total)

            def step(done: int) -> None:
                self.progress = (done, total)
                if progress is not None:
                    progress(done, total)

            parts = postings.extract_parallel(
                ar, archive_path, options, total, tmp / "work", progress=step, cancelled=cancelled
            )
            segments = []
            for ex in parts:
                segments.append(postings.Segment.from_combined(ex.combined))
                ex.combined = np.empty(0, np.uint64)
            keys = segments[0].keys
            for seg in segments[1:]:
                keys = np.union1d(keys, seg.keys)
            pairs = postings._sorted_unique(np.concatenate([ex.pairs for ex in parts]))
            vocab = postings.vocabulary(ar, keys, pairs, {ex.line_base: ex.lines for ex in parts})
            if cancelled():
                raise InterruptedError("index build cancelled")
            tmp.mkdir(exist_ok=True)
            shutil.rmtree(tmp / "work", ignore_errors=True)
            table = PathTable.of(paths)
            (tmp / "paths.bin").write_bytes(table.blob)
            (tmp / "vocab.txt").write_bytes(vocab.blob)
            for name, arr in (
                ("paths_offs", table.offs),
                ("vocab_starts", vocab.starts),
                ("vocab_keys", vocab.keys),
                ("vocab_key_offs", vocab.key_offs),
                ("pairs", pairs),
            ):
                np.save(tmp / f"{name}.npy", arr)
            for i, seg in enumerate(segments):  # file ranges in order: row order across segments
                np.save(tmp / f"seg{i}_keys.npy", seg.keys)
                np.save(tmp / f"seg{i}_offs.npy", seg.offs)
                np.save(tmp / f"seg{i}_files.npy", seg.files)
            self._meta = {
                "version": INDEX_VERSION,
                "complete": True,
                "files": total,
                "segments": len(segments),
                "family": ar.family,
                "dead": [],
                "delta": [],
                "nextRow": total + 1,
            }
            self._write_meta(tmp)
            if self.path.exists():
                shutil.rmtree(self.path, ignore_errors=True)
            os.replace(tmp, self.path)
        except BaseException as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            with self._lock:
                self.state = "failed"
                self.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            ar.close()
        with self._lock:
            self._load()
            self._recent.clear()
            self.state = "ready"
            self.progress = (total, total)
            self.seconds = round(time.perf_counter() - t0, 3)
        if progress is not None:
            progress(total, total)

    # -- querying --------------------------------------------------------------------------------------

    def _candidates(self, query: str) -> tuple[np.ndarray, list[dict[str, Any]]]:
        """(row ids of indexed files that may contain `query`, ascending; changed-file rows that do)."""
        folded = query.casefold()
        hit = self._recent.get(folded)
        if hit is not None:
            return hit
        delta = [r for r in self._meta.get("delta", ()) if folded in r["text"]]
        n = len(self._paths)
        found: np.ndarray | None = None
        if any(c in postings.LINE_BREAKS for c in folded):
            found = np.empty(0, np.int64)  # no line holds a line break
        else:
            assert self._vocab is not None
            for piece in sorted(set(postings.pieces(folded)), key=len, reverse=True)[:4]:
                keys = self._vocab.keys_containing(piece)
                if keys is None:
                    continue  # in nearly every file: narrows nothing
                files: list[np.ndarray] = []
                for seg in self._segments:
                    got = seg.files_of(keys)
                    if got is None:
                        break
                    files.append(got)
                else:
                    sel = (np.concatenate(files) if len(files) > 1 else files[0]).astype(np.int64)
                    found = sel if found is None else np.intersect1d(found, sel, assume_unique=True)
                    if len(found) == 0:
                        break
        if found is None:
            found = np.arange(n, dtype=np.int64)
        found = found[~self._dead[found]] + 1
        out = (found, delta)
        if len(self._recent) >= 16:
            self._recent.pop(next(iter(self._recent)))
        self._recent[folded] = out
        return out

    def candidates(self, query: str, after: int, limit: int) -> list[tuple[int, str]]:
        """(row id, path) of files whose text may contain `query` (≥ 3 characters), row id > `after`, in row
        order; confirm each with `text(path)` and `matching_lines`."""
        with self._lock:
            self._require()
            rows, delta = self._candidates(query)
            at = int(np.searchsorted(rows, after, side="right"))
            out = [(r, self._paths[r - 1]) for r in rows[at : at + limit].tolist()]
            out.extend((int(r["row"]), str(r["path"])) for r in delta if r["row"] > after)
        out.sort()
        return out[:limit]

    def text(self, path: str) -> str | None:
        """The text `candidates` proposed `path` for, as on disk."""
        return None if self.reader is None else self.reader(path)

    def _require(self) -> None:
        if self._vocab is None or self.state != "ready":
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"the content index is {self.state}",
                "Poll pvf_task_status with data.taskId (or pvf_workspace_info's index) and search again when "
                "it is ready; path search works meanwhile.",
                data=self.status(),
            )

    # -- incremental refresh -----------------------------------------------------------------------------

    def refresh(self, changes: dict[str, tuple[str | None, str | None]], new_sha256: str) -> None:
        """After a save: the rows of changed files (`key → (display path, text | None)`; None display =
        deleted, None text = binary) are replaced — the old row marked gone, a new one appended with the
        text — and the index is re-keyed to the saved archive's hash."""
        with self._lock:
            self._require()
            if self._rows_of is None:
                self._rows_of = {}
                for i, p in enumerate(self._paths):
                    self._rows_of.setdefault(norm_path(p), i)
            meta = dict(self._meta)
            dead = set(meta.get("dead", ()))
            delta = [r for r in meta.get("delta", ()) if r["key"] not in changes]
            nxt = int(meta.get("nextRow", len(self._paths) + 1))
            for key, (display, text) in changes.items():
                i = self._rows_of.get(key)
                if i is not None:
                    dead.add(i)
                    self._dead[i] = True
                if display is None or not text:
                    continue
                delta.append({"row": nxt, "path": display, "key": key, "text": text.casefold()})
                nxt += 1
            meta.update(dead=sorted(dead), delta=delta, nextRow=nxt)
            self._meta = meta
            self._recent.clear()
            if isinstance(self.reader, DiskText):
                self.reader.reset()
                if meta.get("family") == "classic" and any(
                    k in _CONTEXT_FILES or k.endswith(".str") for k in changes
                ):
                    # String links in unchanged files may read other texts now: add those texts to the
                    # vocabulary (the old ones stay; candidates may only grow).
                    added = self.reader.link_texts(self._pairs)
                    meta["links"] = [*meta.get("links", ()), *added]
                    assert self._vocab is not None
                    self._vocab = self._vocab.extended(added)
            target = self.root / f"{new_sha256}.pvfidx"
            self._write_meta(self.path)
            if target != self.path:
                shutil.rmtree(target, ignore_errors=True)
                os.replace(self.path, target)
                self.path = target
            self.sha256 = new_sha256

    def close(self) -> None:
        with self._lock:
            self._vocab = None
            self._segments = []
            if self.state == "ready":
                self.state = "missing"


# --------------------------------------------------------------------------------------------- matching


def matching_lines(text: str, needle_folded: str, max_hits: int = HITS_PER_FILE_MAX) -> list[dict[str, Any]]:
    """Lines of `text` containing `needle_folded` case-insensitively: `{line, text}` (1-based lines)."""
    hits = []
    folded = text.casefold()
    if needle_folded not in folded:
        return hits
    for n, (line, low) in enumerate(zip(text.splitlines(), folded.splitlines(), strict=False), start=1):
        if needle_folded in low:
            shown = line if len(line) <= SNIPPET_MAX_CHARS else line[:SNIPPET_MAX_CHARS] + "…"
            hits.append({"line": n, "text": shown})
            if len(hits) >= max_hits:
                break
    return hits


def overlay_items(ws: Any) -> list[tuple[str, str, Any]]:
    """(key, display path, value) of the workspace overlay, sorted by key."""
    return sorted(((k, ws.name(k), v) for k, v in ws.overlay.items()), key=lambda t: t[0])


def in_scope(key: str, scope: str) -> bool:
    return not scope or key == scope or key.startswith(scope + "/")


__all__ = [
    "DELETED",
    "ContentIndex",
    "PathList",
    "in_scope",
    "matching_lines",
    "overlay_items",
]
