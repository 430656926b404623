"""PVF search: path mode over the path list, content mode over a persistent SQLite FTS5 trigram index.

Path mode is a case-insensitive substring search over every current path (original paths joined into one
lower-case string and searched with `str.find`, so a million paths answer in milliseconds), plus the
overlay's added files.

Content mode asks a per-archive index in the platform cache folder (`<cache>/pvf-index/<sha256>.sqlite`,
keyed by the archive file's content hash, so a reopened archive finds its index at once): an FTS5 table
with the trigram tokenizer over the editable text of every file (SQLite 3.34+; https://sqlite.org/fts5.html
"The Trigram Tokenizer"). The index only proposes candidates — every hit is confirmed by reading the file's
current text and finding the matching lines — so it never returns a stale line. Files changed in the
workspace overlay are skipped in the index and searched directly; after a save their rows are replaced
and the index is re-keyed to the saved file's hash (incremental, not a rebuild).

Queries shorter than three characters cannot use trigrams: they scan the text of the files in `scope`,
refused with `LIMIT_EXCEEDED` when the scope holds more than `SHORT_QUERY_SCAN_MAX` files.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import DELETED
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.base import norm_path

INDEX_VERSION = 2
SHORT_QUERY_SCAN_MAX = 20_000
SNIPPET_MAX_CHARS = 200
HITS_PER_FILE_MAX = 20
_BATCH = 2000


# --------------------------------------------------------------------------------------------- cursors


# --------------------------------------------------------------------------------------------- paths


class PathList:
    """Every original path of one source, searchable by case-insensitive substring in one `str.find` loop."""

    def __init__(self, paths: list[str]) -> None:
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


def _connect(path: Path) -> sqlite3.Connection:
    con = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    return con


class ContentIndex:
    """The persistent trigram index of one archive file (see the module docstring). Thread-safe."""

    def __init__(self, root: Path, sha256: str) -> None:
        self.root = root
        self.sha256 = sha256
        self.path = root / f"{sha256}.sqlite"
        self.state = "missing"
        """missing → building → ready (or failed)."""
        self.error: str | None = None
        self.task_id: str | None = None
        self.progress: tuple[int, int] = (0, 0)
        self.seconds: float | None = None
        self.cached = False
        self._lock = threading.RLock()
        self._con: sqlite3.Connection | None = None
        if self.path.exists():
            with contextlib.suppress(sqlite3.Error):
                con = _connect(self.path)
                row = con.execute("SELECT value FROM meta WHERE key='complete'").fetchone()
                ver = con.execute("SELECT value FROM meta WHERE key='version'").fetchone()
                if row and row[0] == "1" and ver and ver[0] == str(INDEX_VERSION):
                    self._con = con
                    self.state = "ready"
                    self.cached = True
                else:
                    con.close()

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

    # -- building ------------------------------------------------------------------------------------

    def build(
        self,
        archive_path: Path,
        options: dict[str, Any],
        *,
        progress: Callable[[int, int], None] | None = None,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Index every file's text from the archive on disk (its own handle: saves never disturb it)."""
        t0 = time.perf_counter()
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f"{self.path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        for leftover in (tmp, Path(f"{tmp}-wal"), Path(f"{tmp}-shm")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        with self._lock:
            self.state = "building"
        ar = open_archive(archive_path, **{k: v for k, v in options.items() if v is not None})
        con = sqlite3.connect(tmp, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=OFF")
            con.execute("PRAGMA synchronous=OFF")
            con.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT)")
            # `z`: the text itself (zlib), so a candidate is confirmed without decompiling the file again.
            con.execute(
                "CREATE TABLE files(id INTEGER PRIMARY KEY, path TEXT NOT NULL, key TEXT NOT NULL, z BLOB)"
            )
            con.execute(
                "CREATE VIRTUAL TABLE body USING fts5(text, content='', tokenize='trigram', detail='none')"
            )
            paths = ar.paths()
            total = len(paths)
            con.execute("BEGIN")
            rows: list[tuple[int, str, str, bytes | None]] = []
            docs: list[tuple[int, str]] = []
            for i, p in enumerate(paths):
                text = _text_or_none(ar, p)
                rows.append((i + 1, p, norm_path(p), _pack(text)))
                if text:
                    docs.append((i + 1, text))
                if len(rows) >= _BATCH:
                    con.executemany("INSERT INTO files VALUES (?,?,?,?)", rows)
                    con.executemany("INSERT INTO body(rowid, text) VALUES (?,?)", docs)
                    rows, docs = [], []
                    self.progress = (i + 1, total)
                    if progress is not None:
                        progress(i + 1, total)
                    if cancelled():
                        raise InterruptedError("index build cancelled")
            con.executemany("INSERT INTO files VALUES (?,?,?,?)", rows)
            con.executemany("INSERT INTO body(rowid, text) VALUES (?,?)", docs)
            con.execute("CREATE INDEX files_key ON files(key)")
            con.executemany(
                "INSERT INTO meta VALUES (?,?)",
                [("version", str(INDEX_VERSION)), ("complete", "1"), ("files", str(total))],
            )
            con.execute("COMMIT")
            con.execute("INSERT INTO body(body) VALUES ('optimize')")
            con.close()
            os.replace(tmp, self.path)
        except BaseException as exc:
            con.close()
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
            with self._lock:
                self.state = "failed"
                self.error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            ar.close()
        with self._lock:
            self._con = _connect(self.path)
            self.state = "ready"
            self.progress = (total, total)
            self.seconds = round(time.perf_counter() - t0, 3)
        if progress is not None:
            progress(total, total)

    # -- querying --------------------------------------------------------------------------------------

    def candidates(self, query: str, after: int, limit: int) -> list[tuple[int, str, str | None]]:
        """(rowid, path, text) of files whose text may contain `query` (≥ 3 characters), rowid > `after`."""
        phrase = trigram_query(query)
        with self._lock:
            con = self._require()
            rows = con.execute(
                "SELECT f.id, f.path, f.z FROM body JOIN files f ON f.id = body.rowid "
                "WHERE body MATCH ? AND body.rowid > ? ORDER BY body.rowid LIMIT ?",
                (phrase, after, limit),
            ).fetchall()
        return [(int(r[0]), str(r[1]), _unpack(r[2])) for r in rows]

    def _require(self) -> sqlite3.Connection:
        if self._con is None or self.state != "ready":
            raise BridgeError(
                ErrorCode.NOT_READY,
                f"the content index is {self.state}",
                "Poll pvf_task_status with data.taskId (or pvf_workspace_info's index) and search again when "
                "it is ready; path search works meanwhile.",
                data=self.status(),
            )
        return self._con

    # -- incremental refresh -----------------------------------------------------------------------------

    def refresh(self, changes: dict[str, tuple[str, str | None]], new_sha256: str) -> None:
        """After a save: replace the rows of changed files (`key → (display path, text | None)`; None text =
        deleted or binary) and re-key the index file to the saved archive's hash."""
        with self._lock:
            con = self._require()
            con.execute("BEGIN")
            try:
                next_id = int(con.execute("SELECT COALESCE(MAX(id), 0) FROM files").fetchone()[0]) + 1
                for key, (display, text) in changes.items():
                    for (old_id,) in con.execute("SELECT id FROM files WHERE key=?", (key,)).fetchall():
                        # A contentless FTS5 table forgets a row only when given its old text (SQLite <
                        # 3.43 has no contentless_delete); dropping the `files` row is enough instead: the
                        # query joins on it, so the old text can no longer be found.
                        con.execute("DELETE FROM files WHERE id=?", (old_id,))
                    if display is None:
                        continue
                    con.execute("INSERT INTO files VALUES (?,?,?,?)", (next_id, display, key, _pack(text)))
                    if text:
                        con.execute("INSERT INTO body(rowid, text) VALUES (?,?)", (next_id, text))
                    next_id += 1
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            con.close()
            self._con = None
            target = self.root / f"{new_sha256}.sqlite"
            for suffix in ("-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{self.path}{suffix}").unlink()
            os.replace(self.path, target)
            self.path = target
            self.sha256 = new_sha256
            self._con = _connect(target)

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None


TRIGRAMS_MAX = 24


def trigram_query(query: str) -> str:
    """An FTS5 query matching every file that contains all trigrams of `query` (a superset of the files that
    contain `query`; hits are confirmed afterwards). `detail=none` keeps the index small but cannot answer
    phrase queries, so each trigram is its own one-token phrase; a long query uses an even spread of them."""
    grams = list(dict.fromkeys(query[i : i + 3] for i in range(len(query) - 2)))
    if len(grams) > TRIGRAMS_MAX:
        step = (len(grams) - 1) / (TRIGRAMS_MAX - 1)
        grams = [grams[round(i * step)] for i in range(TRIGRAMS_MAX)]
    return " ".join('"' + g.replace('"', '""') + '"' for g in grams)


def _pack(text: str | None) -> bytes | None:
    return None if not text else zlib.compress(text.encode("utf-8"), 1)


def _unpack(z: bytes | None) -> str | None:
    return None if z is None else zlib.decompress(z).decode("utf-8")


def _text_or_none(ar: Any, path: str) -> str | None:
    try:
        return ar.read_text(path)
    except BridgeError:
        return None


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
