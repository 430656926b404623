"""Per-file records with a validated on-disk cache, so a warm start or a save re-parses only what changed.

A cached entry is trusted when size, mtime_ns and ctime_ns all match; when the file's mtime is within the
filesystem's timestamp granularity of the moment the entry was cached ("racy" — FAT32 has 2 s, and tools
can rewrite files keeping their mtime), its SHA-1 is compared too (research/sage.md §1.5). The cache is one
gzip JSON file per project, written atomically.
"""

from __future__ import annotations

import errno
import marshal
import os
import stat
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from deskbridge.kinds.sage._atomic import atomic_write
from deskbridge.kinds.sage._sha1 import bulk_sha1
from deskbridge.kinds.sage.paths import Scope
from deskbridge.kinds.sage.records import FILE_MAX_BYTES, FileRecords, extract_records, shallow_scan
from deskbridge.kinds.sage.schema import SchemaModel

TYPE_CHECKING = False  # `typing` is not loaded by a warm start
if TYPE_CHECKING:
    from typing import Any

CACHE_VERSION = 8  # 8: columns of files declaring a non-UTF encoding (ebdd06b), clearer parse errors
CACHE_MAGIC = b"deskbridge-sage-records\n"
MARSHAL_TAG = f"{sys.version_info[0]}.{sys.version_info[1]}/{marshal.version}".encode()
"""marshal's format belongs to the Python version: a cache written by another one is ignored."""
"""Bump whenever what the extractor records changes, so caches written by older code are ignored."""
RACY_WINDOW_NS = 2_000_000_000
"""Entries whose file mtime is this close to the caching time are hash-checked (FAT32's 2 s granularity)."""

ART_SUFFIXES = (".w3x",)


def is_art(path: str) -> bool:
    return path.casefold().endswith(ART_SUFFIXES)


class RecordStore:
    """Records of every file the index has read, keyed by real path."""

    def __init__(
        self,
        model: Callable[[], SchemaModel | None],
        cache_file: Path | None,
        model_digest: Callable[[], str] = lambda: "",
        schema_stat: str = "",
        scope: Scope | None = None,
        shown: Callable[[str], str] = str,
    ) -> None:
        self._model = model
        self.scope = scope
        self._shown = shown
        self.errors: dict[str, str] = {}
        """Path → why the last `get` could not read it (not a regular file, too large, outside the scope)."""
        self.cache_file = cache_file
        self._digest_fn = model_digest
        self._digest: str | None = None
        self.schema_stat = schema_stat
        self.extras: dict[str, Any] = {}
        """Small cached facts besides records (the path resolver's answers), saved with them."""
        # path -> [size, mtime_ns, ctime_ns, sha1, cached_at_ns, records (or their cached head), refs blob]
        self._entries: dict[str, list] = {}
        self._trusted: set[str] = set()
        self.dirty = False
        self.parsed = 0
        self.cache_hits = 0
        self.hash_checks = 0

    @property
    def model_digest(self) -> str:
        """Content digest of the schemas the cached records were extracted with."""
        if self._digest is None:
            self._digest = self._digest_fn()
        return self._digest

    def adopt_digest(self, digest: str) -> None:
        """Take `model_digest` from a model compiled elsewhere (`parallel.prefetch`), if not known yet."""
        if self._digest is None:
            self._digest = digest

    # --- disk -------------------------------------------------------------------------------------
    def load(self) -> int:
        """Read the disk cache; returns how many entries it held (0 when absent, stale or unreadable).

        The cache is `marshal` data (4× faster to read than the gzip JSON it replaced), in the user's own
        cache folder; anything unexpected in it makes the whole cache be ignored."""
        if self.cache_file is None:
            return 0
        try:
            raw = self.cache_file.read_bytes()
            head = CACHE_MAGIC + MARSHAL_TAG + b"\n"
            if not raw.startswith(head):
                return 0
            data = marshal.loads(memoryview(raw)[len(head) :])  # a view: no copy of the ~6 MB body
            if data.get("version") != CACHE_VERSION:
                return 0
            if data.get("schemaStat") == self.schema_stat and isinstance(data.get("model"), str):
                self._digest = data["model"]  # the XSD files look untouched: trust the digest they had
            elif data.get("model") != self.model_digest:
                return 0
            entries = data["entries"]
            # marshal gives back the lists `save` wrote: used as they are, after a check of their shape.
            if not all(type(e) is list and len(e) == 7 for e in entries.values()):
                return 0
            self.extras = data.get("extras") or {}
            self._entries = entries
        except (OSError, ValueError, KeyError, TypeError, EOFError, IndexError, AttributeError):
            self._entries = {}
            return 0
        return len(self._entries)

    def save(self) -> bool:
        """Write the cache when something changed; True when written."""
        if self.cache_file is None or not self.dirty:
            return False
        out = {}
        for path, e in self._entries.items():
            rec = e[5]
            head, blob = rec.to_cache() if isinstance(rec, FileRecords) else (rec, e[6])
            out[path] = [e[0], e[1], e[2], e[3], e[4], head, blob]
        body = marshal.dumps(
            {
                "version": CACHE_VERSION,
                "model": self.model_digest,
                "schemaStat": self.schema_stat,
                "extras": self.extras,
                "entries": out,
            }
        )
        # Not durable: a cache lost in a power cut is rebuilt, and `load` ignores a torn or empty one.
        atomic_write(self.cache_file, CACHE_MAGIC + MARSHAL_TAG + b"\n" + body, durable=False)
        self.dirty = False
        return True

    # --- lookups ----------------------------------------------------------------------------------
    def invalidate(self, paths: Iterable[str]) -> None:
        """Stop trusting these files until they are checked against the disk again."""
        for p in paths:
            self._trusted.discard(p)

    def empty(self) -> bool:
        return not self._entries

    def has_valid(self, path: str) -> bool:
        return path in self._trusted and path in self._entries

    def put_parsed(
        self, path: str, size: int, mtime: int, ctime: int, sha: str, head: list, blob: bytes
    ) -> FileRecords:
        """Records a worker process extracted (see `parallel.prefetch`)."""
        rec = FileRecords.from_cache(head, blob)
        if not rec.located:
            rec.source = self._source(path, size, mtime, ctime, sha)
        self._entries[path] = [size, mtime, ctime, sha, time.time_ns(), rec, b""]
        self._trusted.add(path)
        self.parsed += 1
        self.dirty = True
        return rec

    def changed_on_disk(self, paths: Iterable[str]) -> list[str]:
        """The files among `paths` whose size, mtime or ctime differ from what was read (one stat each)."""
        out = []
        for p in paths:
            e = self._entries.get(p)
            try:
                st = os.stat(p)
            except OSError:
                out.append(p)
                continue
            if e is None or (e[0], e[1], e[2]) != (st.st_size, st.st_mtime_ns, st.st_ctime_ns):
                out.append(p)
        return out

    def distrust_all(self) -> None:
        self._trusted.clear()

    def get(self, path: str) -> FileRecords | None:
        """Records of `path` (parsed or from cache), or None when the file cannot be read (`errors` says
        why when it exists but is not something the index may read)."""
        entry = self._entries.get(path)
        if entry is not None and path in self._trusted:
            return self._records(entry, path)
        self.errors.pop(path, None)
        try:
            st = os.lstat(path)
        except OSError:
            self._forget(path)
            return None
        if stat.S_ISLNK(st.st_mode):
            # A link may have been swapped in since the include was resolved: check where it leads.
            if self.scope is not None and not self.scope.contains(path):
                self.errors[path] = "include-outside-roots"
                self._forget(path)
                return None
            try:
                st = os.stat(path)
            except OSError as exc:
                self._forget(path)
                # Said as what the link is, never where it points (the message may reach a client).
                self.errors[path] = (
                    f"{self._shown(path)}: a symbolic link that loops back onto itself; fix or remove the link"
                    if exc.errno == errno.ELOOP
                    else f"{self._shown(path)}: a symbolic link whose target is gone; fix or remove the link"
                )
                return None
        if (
            entry is not None
            and entry[0] == st.st_size
            and entry[1] == st.st_mtime_ns
            and entry[2] == st.st_ctime_ns
            and stat.S_ISREG(st.st_mode)
        ):
            if st.st_mtime_ns < entry[4] - RACY_WINDOW_NS:
                self._trusted.add(path)
                self.cache_hits += 1
                return self._records(entry, path)
            self.hash_checks += 1
            data = self._read(path)
            if data is None:
                return None
            if bulk_sha1(data).hexdigest() == entry[3]:
                self._trusted.add(path)
                self.cache_hits += 1
                return self._records(entry, path)
            return self._parse(path, data, st, entry)
        data = self._read(path)
        if data is None:
            return None
        return self._parse(path, data, st, entry)

    def _forget(self, path: str) -> None:
        self._entries.pop(path, None)
        self._trusted.discard(path)

    def _read(self, path: str) -> bytes | None:
        """The file's bytes through the one bounded read that refuses FIFOs and devices."""
        # Not imported by a warm start that reads nothing (`core.errors` loads `typing`, ~5 ms).
        from deskbridge.core.errors import BridgeError
        from deskbridge.core.reading import read_regular_file

        try:
            return read_regular_file(path, max_bytes=FILE_MAX_BYTES, shown_as=self._shown(path))
        except BridgeError as exc:
            self.errors[path] = exc.message
            self._forget(path)
            return None

    def _records(self, entry: list, path: str = "") -> FileRecords:
        rec = entry[5]
        if not isinstance(rec, FileRecords):
            rec = FileRecords.from_cache(rec, entry[6])
            if not rec.located:
                rec.source = self._source(path, entry[0], entry[1], entry[2], entry[3])
            entry[5] = rec
        return rec

    def _source(self, path: str, size: int, mtime: int, ctime: int, sha: str) -> Callable[[], bytes | None]:
        """What a record with `UNLOCATED` reference rows reads its text from when a query first needs the
        rows' positions: the file's bytes if they are still the ones parsed (same stat, same SHA-1), else
        None (the rows then keep libxml2's lines with columns 0 until the file is indexed again, which its
        change triggers). Located rows make the entry worth saving again."""

        def read() -> bytes | None:
            if not path:
                return None
            try:
                st = os.stat(path)
            except OSError:
                return None
            if (st.st_size, st.st_mtime_ns, st.st_ctime_ns) != (size, mtime, ctime) or not stat.S_ISREG(
                st.st_mode
            ):
                return None
            from deskbridge.core.errors import BridgeError
            from deskbridge.core.reading import read_regular_file

            try:
                data = read_regular_file(path, max_bytes=FILE_MAX_BYTES, shown_as=self._shown(path))
            except BridgeError:
                return None
            if bulk_sha1(data).hexdigest() != sha:
                return None
            self.dirty = True
            return data

        return read

    def _parse(self, path: str, data: bytes, st: os.stat_result, prev: list | None = None) -> FileRecords:
        rec = shallow_scan(data) if is_art(path) else extract_records(data, self._model())
        self.parsed += 1
        if prev is not None and rec.parse_failed():
            good = self._records(prev, path)
            if good.last_good or not good.parse_failed():
                # The seed's rule "build failed but keep last good", per file: a save that broke the XML
                # (emptied, cut in half) keeps the assets of the version that parsed, flagged.
                rec = _kept(good, rec)
        self._entries[path] = [
            st.st_size,
            st.st_mtime_ns,
            st.st_ctime_ns,
            bulk_sha1(data).hexdigest(),
            time.time_ns(),
            rec,
            b"",
        ]
        self._trusted.add(path)
        self.dirty = True
        return rec


KEPT_MESSAGE = (
    "the file does not parse: the index keeps the assets, defines, includes and references of its last "
    "version that did, until it is fixed"
)


def _kept(good: FileRecords, broken: FileRecords) -> FileRecords:
    """The last good records, carrying the current text's parse errors."""
    errors = [d for d in broken.diagnostics if d[0] == "parse-error"]
    own = [d for d in good.diagnostics if d[0] != "parse-error"]
    note = ("parse-error", "error", errors[0][2] if errors else 0, KEPT_MESSAGE)
    return FileRecords(
        root=good.root,
        assets=good.assets,
        defines=good.defines,
        includes=good.includes,
        xincludes=good.xincludes,
        ref_data=good.ref_data,
        ref_total=good.ref_total,
        located=good.located,
        source=good.source,
        joins=good.joins,
        diagnostics=[*own, *errors, note],
        shallow=good.shallow,
        spliceable=good.spliceable,
        root_has_id=good.root_has_id,
        last_good=True,
    )
