"""Parse a cold project's files on every core: a breadth-first discovery of the include graph whose parsing
runs in forked worker processes.

A cold build spends two thirds of its time extracting records (lxml plus the schema-typed walk), which is
pure CPU in Python and so bound to one core by the GIL. Before the real walk, `prefetch` follows the same
includes the walk will follow and hands every file to a worker; the walk then finds every record in the
store. The parent compiles (or loads) the XSD model first and the forked workers inherit it, so it is
compiled once. Only used from a single-threaded process (the CLI, a benchmark): forking a
process with other threads running is unsafe; the server's first build simply parses in its thread.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import stat
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from deskbridge.core.errors import BridgeError
from deskbridge.core.files import read_regular_file
from deskbridge.kinds.sage.records import FILE_MAX_BYTES, FileRecords, extract_records, shallow_scan

WORKERS_ENV = "DESKBRIDGE_SAGE_WORKERS"
"""Worker processes for a cold build: unset = one per core (when there are two or more), 0 = none."""
BATCH_MAX = 16
"""Files handed to a worker at once."""

_model: Any = None
"""The XSD model, set in the parent just before the workers are forked (they inherit it)."""


def worker_count() -> int:
    raw = os.environ.get(WORKERS_ENV)
    if raw is not None:
        try:
            return max(int(raw), 0)
        except ValueError:
            return 0
    cores = os.cpu_count() or 1
    return cores if cores >= 2 else 0


def usable() -> bool:
    """Forking is safe only while this process runs one thread."""
    return (
        worker_count() > 0
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


def _parse(path: str, art: bool) -> tuple[int, int, int, str, list[Any], bytes] | None:
    """In a worker: (size, mtime, ctime, sha1, records head, marshalled refs), or None to leave the file to
    the parent (not a regular file, a link, unreadable: the store reports those)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        data = read_regular_file(path, max_bytes=FILE_MAX_BYTES)
    except BridgeError:
        return None
    rec = shallow_scan(data) if art else extract_records(data, _model)
    head, blob = rec.to_cache()
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, hashlib.sha1(data).hexdigest(), head, blob


def _parse_many(batch: list[tuple[str, bool]]) -> list[Any]:
    return [_parse(path, art) for path, art in batch]


def prefetch(
    store: Any,
    loader: Callable[[], Any],
    entries: Iterable[str],
    links: Callable[[str, FileRecords], Iterable[str]],
    later: Callable[[], Iterable[str]],
    is_art: Callable[[str], bool],
    with_art: bool,
) -> set[str]:
    """Parse every file reachable from `entries` (and then the files `later` names) in worker processes,
    putting the records in `store`. `links(path, records)` gives the files a parsed file leads to.
    Returns the files parsed."""
    global _model
    workers = worker_count()
    ctx = multiprocessing.get_context("fork")
    _model = loader()
    seen: set[str] = set()
    queue: list[tuple[str, bool]] = []
    pending: dict[Future[Any], list[str]] = {}
    parsed: set[str] = set()

    def want(path: str) -> None:
        if path in seen or store.has_valid(path):
            return
        art = is_art(path)
        if art and not with_art:
            return
        seen.add(path)
        queue.append((path, art))

    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:

        def flush() -> None:
            # Small batches keep both workers busy without one task per file of queue traffic.
            while queue and len(pending) < 2 * workers:
                size = max(1, min(BATCH_MAX, len(queue) // workers or 1))
                batch, queue[:size] = queue[:size], []
                pending[pool.submit(_parse_many, batch)] = [p for p, _a in batch]

        for e in entries:
            want(e)
        extra_done = False
        while True:
            flush()
            if not pending:
                if extra_done:
                    break
                extra_done = True
                for p in later():
                    want(p)
                continue
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                paths = pending.pop(fut)
                for path, result in zip(paths, fut.result(), strict=True):
                    if result is None:
                        continue
                    rec = store.put_parsed(path, *result)
                    parsed.add(path)
                    for target in links(path, rec):
                        want(target)
    _model = None
    return parsed
