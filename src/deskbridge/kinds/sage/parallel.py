"""Parse a cold project's files on every core while the XSD model compiles: a breadth-first discovery of the
include graph whose parsing runs in forked worker processes.

A cold build spends most of its time extracting records (lxml plus the schema-typed walk), which is pure CPU
in Python and so bound to one core by the GIL. Before the real walk, `prefetch` follows the same includes the
walk will follow and hands every file to a worker; the walk then finds every record in the store.

Only the typed walk needs the compiled model (`records.finish_records`); parsing and reading includes do not
(`records.begin_records`). So the model compiles in a process of its own while a worker parses: it answers
a file's includes at once (the parent needs nothing else to go on discovering) and keeps the parsed tree
until the model arrives, then extracts its references; the other workers are forked once the model is there
and extract each file as they parse it (`LATE_WORKERS`). Only used from a single-threaded process (the
CLI, a benchmark): forking a process with other threads running is unsafe; the server's first build simply
parses in its thread. Whatever goes wrong in a child (it dies, the model fails to compile there) only means
the parent's walk parses those files itself.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import select
import stat
import sys
import threading
from collections import deque
from collections.abc import Callable, Iterable
from pathlib import Path
from queue import SimpleQueue

from deskbridge.core.errors import BridgeError
from deskbridge.core.limits import env_count
from deskbridge.core.reading import read_regular_file
from deskbridge.kinds.sage import _lxml, schema
from deskbridge.kinds.sage._atomic import atomic_write
from deskbridge.kinds.sage._sha1 import bulk_sha1
from deskbridge.kinds.sage._trace import mark, role
from deskbridge.kinds.sage.records import (
    FILE_MAX_BYTES,
    FileRecords,
    PendingRecords,
    begin_records,
    finish_records,
    shallow_scan,
)
from deskbridge.kinds.sage.schema import SchemaModel

TYPE_CHECKING = False  # `typing` is not loaded before the workers are forked
if TYPE_CHECKING:
    from typing import Any

WORKERS_ENV = "DESKBRIDGE_SAGE_WORKERS"
"""Worker processes for a cold build: unset = one per core (when there are two or more), 0 = none."""
BATCH_MAX = 16
"""Files handed to a worker at once."""
FINISH_CHUNK = 32
"""Held files a worker finishes between looks at its pipe for parse requests."""
LOCATE_IN_WORKERS = False
"""Whether the workers find each reference's line and columns (`finish_records(locate=True)`). False: the
index is ready sooner (the locator is ~15 % of a file's extraction, spread over the workers) and the rows
are located per file when a query first reads them — on one core, from the files read again: on RA3Afterdash
the first `find_references` after a cold build (or after a warm start from the cache such a build saved)
then takes ~0.65 s instead of ~0.19 s (load 5), once: the located rows are saved with the cache."""
LATE_WORKERS = 1
"""Workers forked only once the model has arrived (when it is compiled in a process of its own). Forked
with the others, three processes shared two cores while the model compiled: it arrived later (~270 ms
from the start instead of ~170), both workers held more parsed trees by then, and only the worker holding
a tree can finish it, so one of them went on alone at the end (~70 ms). Forked late, the worker starts
with the model in hand and extracts each file as it parses it, and the parent hands it the files the
other one cannot take while it finishes its trees."""
HELD_SHARE = 0.4
"""What finishing a held tree costs, as a share of parsing and finishing a file of the same size (the typed
walk after the parse: ~185 of ~430 ms of CPU over RA3Afterdash's files): how `prefetch` weighs the bytes a
worker holds against the files sent to it."""
HELD_TREES_MAX_BYTES = 32 * 1024 * 1024
"""Source bytes of the parsed trees one worker keeps while it waits for the model (a tree takes several
times its source); files beyond it keep only their bytes and are parsed again once the model is there."""

if TYPE_CHECKING:
    Result = tuple[int, int, int, str, list[Any], bytes]
"""`Result`: (size, mtime_ns, ctime_ns, sha1, records head, marshalled refs): what `RecordStore.put_parsed` takes.

Messages both ways are marshalled (`send_bytes`), not pickled: they hold only strings, numbers, bytes,
lists and tuples, which marshal writes and reads several times faster."""


def worker_count() -> int:
    chosen = env_count(WORKERS_ENV)
    if chosen is not None:
        return chosen
    cores = os.cpu_count() or 1
    return cores if cores >= 2 else 0


def usable() -> bool:
    """Forking is safe only while this process runs one thread."""
    return worker_count() > 0 and threading.active_count() == 1 and hasattr(os, "fork")


class Channel:
    """One end of a pair of pipes to a forked process: length-prefixed messages. The processes are forked
    with `os.fork` directly: `multiprocessing` (its import alone was ~15 ms of a cold build's critical path,
    before any worker could start) added nothing this needs — messages are marshalled, not pickled, and a
    child that fails only means the parent parses its files itself."""

    __slots__ = ("rfd", "wfd")

    def __init__(self, rfd: int, wfd: int) -> None:
        self.rfd = rfd
        self.wfd = wfd

    def fileno(self) -> int:
        return self.rfd

    def send_bytes(self, data: bytes) -> None:
        """Write one message whole (blocks while the pipe is full); OSError when the other end is gone."""
        if self.wfd < 0:
            raise OSError("channel closed")
        view = memoryview(len(data).to_bytes(8, "little") + data)
        while view:
            view = view[os.write(self.wfd, view) :]

    def recv_bytes(self) -> bytes:
        """One whole message; EOFError when the other end closed (or died) first."""
        return self._read(int.from_bytes(self._read(8), "little"))

    def _read(self, size: int) -> bytes:
        if self.rfd < 0:
            raise EOFError
        chunks = []
        while size:
            got = os.read(self.rfd, min(size, 1 << 20))
            if not got:
                raise EOFError
            chunks.append(got)
            size -= len(got)
        return b"".join(chunks)

    def poll(self) -> bool:
        """True when a message (or EOF) is waiting."""
        return bool(select.select([self.rfd], [], [], 0)[0])

    def close(self) -> None:
        for fd in (self.rfd, self.wfd):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.rfd = self.wfd = -1


def wait(channels: list[Any]) -> list[Any]:
    """The channels with a message (or EOF) waiting; blocks until there is one."""
    return select.select(channels, [], [])[0]


PIPE_BYTES = 1 << 20
"""Buffer asked for each pipe to a child (Linux's default ceiling for an unprivileged process,
`/proc/sys/fs/pipe-max-size`; pipe(7))."""


def _widen(fd: int) -> None:
    """Give the pipe `PIPE_BYTES` of buffer instead of 64 KiB (Linux's `F_SETPIPE_SZ`, pipe(7)): the
    model (~250 KB) then goes to each worker in one write, and a worker's answer in one, instead of the
    writer waiting for the reader to take each 64 KiB — the parent blocked in those writes for 16-40 ms
    of a cold build, handing no files out meanwhile, while a busy worker's inbox thread waited for the
    GIL between reads. Elsewhere (or refused) the pipe keeps its size: only the waits come back."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


def _fork(target: Callable[..., None], *args: Any, close: Iterable[Channel] = ()) -> tuple[int, Channel]:
    """Run `target(channel, *args)` in a forked child; returns its pid and the parent's channel to it.

    The child closes the parent's ends to the other children (`close`), so each child sees EOF when the
    parent goes, and leaves with `os._exit` whatever happens: it never returns into the parent's code."""
    down_r, down_w = os.pipe()
    up_r, up_w = os.pipe()
    _widen(down_w)
    _widen(up_w)
    for stream in (sys.stdout, sys.stderr):  # what is buffered would be written twice
        with contextlib.suppress(Exception):
            stream.flush()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's coverage is not collected
        code = 1
        try:
            for other in close:
                other.close()
            os.close(down_w)
            os.close(up_r)
            target(Channel(down_r, up_w), *args)
            code = 0
        finally:
            os._exit(code)
    os.close(down_r)
    os.close(up_w)
    return pid, Channel(up_r, down_w)


def _join(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


_UNREAPED: list[int] = []
"""Workers a finished `prefetch` told to stop, not waited for yet (`reap`)."""


def reap() -> None:
    """Wait for the workers the last `prefetch` told to stop. A worker leaves holding ~100 MB of parsed trees,
    which the kernel takes several ms to tear down: waiting for that as soon as the last answer was in put
    it on the build's serial tail; the build reaps them once it has walked and assembled the index."""
    while _UNREAPED:
        _join(_UNREAPED.pop())


def _read(path: str) -> tuple[os.stat_result, bytes] | None:
    """The file's stat and bytes, or None to leave it to the parent (not a regular file, a link,
    unreadable: the store reports those)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    try:
        return st, read_regular_file(path, max_bytes=FILE_MAX_BYTES)
    except BridgeError:
        return None


_NO_MODEL: Any = object()
"""A worker forked before the model arrived (it comes by message, `_Worker.adopt`)."""


def _result(st: os.stat_result, sha: str, rec: FileRecords) -> Result:
    head, blob = rec.to_cache()
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, sha, head, blob


class _Worker:
    """One forked parser: the loop behind `_worker_main`."""

    def __init__(self, conn: Channel, model: Any = _NO_MODEL) -> None:
        self.conn = conn
        self.model: SchemaModel | None = None if model is _NO_MODEL else model
        self.has_model = model is not _NO_MODEL
        self.held: deque[tuple[str, os.stat_result, str, PendingRecords | None, bytes, int]] = deque()
        """(path, stat, sha1, parsed tree or None, bytes when no tree is kept, bytes counted in `held_bytes`)."""
        self.held_bytes = 0
        self.kept: list[Any] = []
        """Parsed trees never freed: the worker ends with `os._exit`, so freeing them (0.1 s of a cold
        build's CPU, spent while the parent waits to join) is work nobody needs."""

    def parse(self, batch: list[tuple[str, bool]]) -> list[tuple[str, str, Any]]:
        mark(f"batch-start {len(batch)}")
        out: list[tuple[str, str, Any]] = []
        for path, art in batch:
            got = _read(path)
            if got is None:
                out.append((path, "none", None))
                continue
            st, data = got
            sha = bulk_sha1(data).hexdigest()
            if art:
                out.append((path, "full", _result(st, sha, shallow_scan(data))))
            elif self.has_model and not self.held:
                pending = begin_records(data)
                self.kept.append(pending.root)
                out.append(
                    (
                        path,
                        "full",
                        _result(st, sha, finish_records(pending, self.model, locate=LOCATE_IN_WORKERS)),
                    )
                )
            elif self.held_bytes + len(data) <= HELD_TREES_MAX_BYTES:
                # No model yet, or trees still to finish: answer the includes now (the parent goes on
                # discovering files with them) and extract the references in turn.
                pending = begin_records(data)
                self.held.append((path, st, sha, pending, b"", len(data)))
                self.held_bytes += len(data)
                out.append((path, "links", (pending.rec.includes, pending.rec.xincludes, len(data))))
            else:
                # Too many trees held already: read the includes now, keep only the bytes.
                rec = begin_records(data).rec
                self.held.append((path, st, sha, None, data, 0))
                out.append((path, "links", (rec.includes, rec.xincludes, len(data))))
        mark("batch-end")
        return out

    def adopt(self, raw: bytes) -> None:
        json = marshal.loads(raw)
        self.model = SchemaModel.from_json(json) if json is not None else None
        self.has_model = True
        mark("model-adopted")

    def finish_some(self) -> list[tuple[str, Result]]:
        """References of up to `FINISH_CHUNK` held files, oldest first."""
        mark(f"finish-start {len(self.held)}")
        out = []
        held = self.held
        while held and len(out) < FINISH_CHUNK:
            path, st, sha, pending, data, counted = held.popleft()
            if pending is None:
                pending = begin_records(data)
            self.held_bytes -= counted
            self.kept.append(pending.root)
            out.append(
                (path, _result(st, sha, finish_records(pending, self.model, locate=LOCATE_IN_WORKERS)))
            )
        mark("finish-end")
        return out

    def pending(self) -> int:
        """Held files still to finish once the model is here; -1 before (the parent waits for the model)."""
        return len(self.held) if self.has_model else -1

    def run(self) -> None:
        conn = self.conn
        inbox: SimpleQueue[bytes | None] = SimpleQueue()

        def drain() -> None:
            # Read every message as it comes, whatever the worker is doing: the parent's write of the model
            # (~220 KB, more than a pipe holds) must never wait for a worker that is itself blocked writing
            # a large answer the parent has not read yet — that was a deadlock (both pipes full).
            try:
                while True:
                    inbox.put(conn.recv_bytes())
            except (EOFError, OSError):
                inbox.put(None)

        threading.Thread(target=drain, name="sage-worker-inbox", daemon=True).start()
        while True:
            if self.has_model and self.held and inbox.empty():
                # Finish held trees in chunks, looking at the inbox in between: a parse request is answered
                # within one chunk, so discovery never waits for all held trees (≈ 0.3 s) to be finished.
                done = self.finish_some()
                conn.send_bytes(marshal.dumps(("finished", done, self.pending())))
                continue
            raw = inbox.get()
            if raw is None:
                mark("exit")
                os._exit(0)
            msg = marshal.loads(raw)
            if msg[0] == "parse":
                items = self.parse(msg[1])
                conn.send_bytes(marshal.dumps(("parsed", items, self.pending())))
            elif msg[0] == "model":
                self.adopt(msg[1])
                if not self.held:
                    conn.send_bytes(marshal.dumps(("finished", [], 0)))
            else:
                mark("exit")
                os._exit(0)


def _worker_main(conn: Channel, model: Any = _NO_MODEL) -> None:
    """A worker's answers are all sent (`Channel.send_bytes` returns once its bytes are written), and it has
    no files, buffers or finalisers of its own, so it leaves at once (`_fork`'s `os._exit`): no freeing of
    trees and records, no interpreter teardown. `model`: the parent's, when it forked this worker after
    the model arrived (`prefetch`)."""
    role("worker")
    mark("start")
    _Worker(conn, model).run()


def _compile_main(conn: Channel, loader: Callable[[], SchemaModel | None]) -> None:
    """In the schema process: compile (or load) the model and send it marshalled (a few ms either way;
    pickling the dataclass is no faster).

    With no schema cache at all the model is sent as soon as it is compiled (`schema.EARLY_MODEL`), without
    its digest, which follows in a second message ("digest", digest, cache writes) once the XSDs are hashed:
    the schema cache's (path, bytes), which the parent writes (`_take_digest`). Otherwise this process writes
    the cache itself after sending the model."""
    role("schema")
    mark("start")
    writes: list[tuple[Any, Callable[[], bytes]]] = []
    schema.DEFERRED_CACHE_WRITES = writes  # this process only: it was forked for this
    sent: list[bool] = []

    def send_early(model: SchemaModel) -> None:
        mark("compiled")
        conn.send_bytes(marshal.dumps(model.to_json()))
        sent.append(True)
        mark("model-sent")

    schema.EARLY_MODEL = send_early
    try:
        model = loader()
        if sent:
            files = [(str(path), make()) for path, make in writes]
            writes.clear()
            conn.send_bytes(marshal.dumps(("digest", model.digest if model is not None else "", files)))
            mark("digest-sent")
        else:
            mark("compiled")
            conn.send_bytes(marshal.dumps(model.to_json() if model is not None else None))
            mark("model-sent")
    except BaseException as exc:  # the parent compiles it again and reports the error itself
        with contextlib.suppress(OSError):
            conn.send_bytes(marshal.dumps(("error", repr(exc))))
    finally:
        conn.close()
    for path, make in writes:  # the parent joins this process before it returns, so the cache is there
        with contextlib.suppress(Exception):  # as a cache write in the build itself: best effort
            atomic_write(path, make(), durable=False)
    mark("exit")


def prefetch(
    store: Any,
    loader: Callable[[], SchemaModel | None],
    entries: Iterable[str],
    links: Callable[[str, FileRecords], Iterable[str]],
    later: Callable[[], Iterable[str]],
    is_art: Callable[[str], bool],
    with_art: bool,
    adopt: Callable[[SchemaModel | None], None] | None = None,
    loaded: SchemaModel | None = None,
) -> set[str]:
    """Parse every file reachable from `entries` (and then the files `later` names) in worker processes,
    putting the records in `store`. `links(path, records)` gives the files a parsed file leads to. The model
    is `loaded` when the caller has it already, else `loader()` runs in a process of its own and the parent
    hands the result to `adopt`. Returns the files parsed."""
    mark("prefetch")
    reap()  # a build that failed before reaping its workers
    _lxml.load()
    workers: list[tuple[Channel, int]] = []
    # While the model compiles, its process takes a core: one worker fewer until then (`LATE_WORKERS`).
    late = min(LATE_WORKERS, worker_count() - 1) if loaded is None else 0
    for _ in range(worker_count() - late):
        pid, ours = _fork(_worker_main, close=[c for c, _p in workers])
        workers.append((ours, pid))
    schema_conn: Channel | None = None
    schema_proc = None
    digest_wait: tuple[Channel, SchemaModel] | None = None
    """The schema process's channel and the model it sent before its digest (`_compile_main`)."""
    model_blob: bytes | None = None
    if loaded is not None:
        model_blob = marshal.dumps(loaded.to_json())
    else:
        schema_proc, schema_conn = _fork(_compile_main, loader, close=[c for c, _p in workers])
    mark("forked")

    seen: set[str] = set()
    queue: list[tuple[str, bool]] = []
    parsed: set[str] = set()
    alive = {conn: proc for conn, proc in workers}
    outstanding = dict.fromkeys(alive, 0)
    queued = dict.fromkeys(alive, 0)
    """Files sent to each worker and not answered yet."""
    held = dict.fromkeys(alive, 0)
    """Bytes of the files each worker parsed and has still to finish: only it can, it holds their trees."""
    sizes: list[int] = [0, 0]
    """Bytes and count of the files answered so far: a file not read yet counts as their mean."""
    awaiting_full: set[Channel] = set()

    def want(path: str) -> None:
        if path in seen or store.has_valid(path):
            return
        art = is_art(path)
        if art and not with_art:
            return
        seen.add(path)
        queue.append((path, art))

    def send_model(blob: bytes) -> None:
        for conn in list(alive):
            try:
                conn.send_bytes(marshal.dumps(("model", blob)))
                awaiting_full.add(conn)
            except OSError:
                drop(conn)

    def drop(conn: Channel) -> None:
        # A worker that died: its files are simply parsed by the walk.
        alive.pop(conn, None)
        outstanding.pop(conn, None)
        awaiting_full.discard(conn)

    def ahead(conn: Channel) -> float:
        mean = sizes[0] / sizes[1] if sizes[1] else 0.0
        return held[conn] * HELD_SHARE + queued[conn] * mean

    def dispatch() -> None:
        # Small batches keep every worker busy without one message per file; each goes to the worker with
        # the least work ahead of it — what finishing the trees it holds costs, and the files sent — at
        # most two batches ahead; when that worker has two, the batch waits for it. Given to another one
        # instead (the old rule), it went to the worker still finishing its held trees, which held the
        # new ones too and then finished them alone while the other one idled. Fewer batches waiting (the
        # rule before) let the worker that answered faster hold more trees, with the same end.
        n = max(len(alive), 1)
        while queue and alive:
            conn = min(alive, key=ahead)
            if outstanding[conn] >= 2:
                return
            size = max(1, min(BATCH_MAX, len(queue) // n or 1))
            batch, queue[:size] = queue[:size], []
            try:
                conn.send_bytes(marshal.dumps(("parse", batch)))
                outstanding[conn] += 1
                queued[conn] += size
            except OSError:
                drop(conn)

    def put(path: str, result: Result) -> FileRecords:
        parsed.add(path)
        return store.put_parsed(path, *result)  # type: ignore[no-any-return]

    if model_blob is not None:
        send_model(model_blob)
    try:
        for e in entries:
            want(e)
        extra_done = False
        while True:
            dispatch()
            # With no worker left the queue cannot drain: the walk parses what is still in it.
            if not alive or (not any(outstanding.values()) and not queue):
                if not extra_done:
                    mark("discovered")
                    extra_done = True
                    if not late:  # else once the late workers are forked: nothing loaded before a fork
                        _load_writer()
                    for p in later():
                        want(p)
                    continue
                if (model_blob is not None and not awaiting_full) or not alive:
                    break
            waiting: list[Any] = list(alive)
            if schema_conn is not None:
                waiting.append(schema_conn)
            if digest_wait is not None:
                waiting.append(digest_wait[0])
            for conn in wait(waiting):
                if digest_wait is not None and conn is digest_wait[0]:
                    # Read as soon as it is sent: its cache bytes are more than a pipe holds, so the schema
                    # process would otherwise wait, alive, until the end of the build to hand them over and
                    # exit (and the parent for it to exit, on the build's serial tail).
                    _take_digest(*digest_wait, adopt)
                    digest_wait = None
                    continue
                if conn is schema_conn:
                    mark("model-received")
                    model_blob, got = _take_model(schema_conn, loader, adopt)
                    if got is not None and not got.digest:
                        digest_wait = (schema_conn, got)  # sent early: its digest follows
                    schema_conn = None
                    send_model(model_blob)
                    if alive:  # (with none left, the walk parses the rest: no worker joins them)
                        for _ in range(late):
                            # Forked with the model in hand: it parses and extracts each file at once.
                            others = [c for c, _p in workers]
                            if digest_wait is not None:
                                others.append(digest_wait[0])
                            pid, ours = _fork(_worker_main, got, close=others)
                            workers.append((ours, pid))
                            alive[ours] = pid
                            outstanding[ours] = queued[ours] = held[ours] = 0
                    late = 0
                    if extra_done:
                        _load_writer()
                    continue
                try:
                    kind, items, pending = marshal.loads(conn.recv_bytes())
                except (EOFError, OSError):
                    drop(conn)
                    continue
                # Every answer after the model says how many held files the worker has still to finish.
                if pending > 0:
                    awaiting_full.add(conn)
                elif pending == 0:
                    awaiting_full.discard(conn)
                if kind == "finished":
                    for path, result in items:
                        held[conn] -= result[0]
                        put(path, result)
                    continue
                outstanding[conn] -= 1
                queued[conn] -= len(items)
                for path, what, payload in items:
                    if what == "none":
                        continue
                    if what == "full":
                        sizes[0] += payload[0]
                        sizes[1] += 1
                        rec = put(path, payload)
                    else:
                        sizes[0] += payload[2]
                        sizes[1] += 1
                        held[conn] += payload[2]
                        rec = FileRecords(includes=payload[0], xincludes=payload[1])
                    for target in links(path, rec):
                        want(target)
        if schema_conn is not None:
            # Every worker died: the parent still wants the model.
            _blob, got = _take_model(schema_conn, loader, adopt)
            if got is not None and not got.digest:
                digest_wait = (schema_conn, got)
            schema_conn = None
        mark("all-parsed")
    finally:
        for conn, pid in workers:
            with contextlib.suppress(OSError):
                conn.send_bytes(marshal.dumps(("stop",)))
            conn.close()
            _UNREAPED.append(pid)  # waited for by `reap`, after the walk
        if schema_conn is not None:
            schema_conn.close()
        if digest_wait is not None:
            _take_digest(*digest_wait, adopt)
        if schema_proc is not None:
            _join(schema_proc)
        mark("joined")
    return parsed


def _load_writer() -> None:
    """Import `core.files` (~60 M instructions: dataclasses, ctypes, secrets, shutil, blake3) now, once
    discovery is done and the parent only waits for the workers: the schema and records cache writes
    need it right after, when nothing else runs (the workers read through the lighter `core.reading`, and
    it is not imported before the fork so that they start sooner)."""
    import deskbridge.core.files  # noqa: F401


def _take_model(
    conn: Channel,
    loader: Callable[[], SchemaModel | None],
    adopt: Callable[[SchemaModel | None], None] | None,
) -> tuple[bytes, SchemaModel | None]:
    """The schema process's model (compiled here instead when it failed there), given to `adopt`, with its
    marshalled form. The channel stays open when the model came without its digest (`_take_digest`)."""
    early = False
    try:
        blob = conn.recv_bytes()
        raw = marshal.loads(blob)
    except (EOFError, OSError, ValueError):
        raw = ("error", "no answer")
    if isinstance(raw, tuple):
        conn.close()
        model = loader()  # raises here, in the build, if the schemas really cannot be compiled
        blob = marshal.dumps(model.to_json() if model is not None else None)
    else:
        model = SchemaModel.from_json(raw) if raw is not None else None
        early = model is not None and not model.digest
        if not early:
            conn.close()
    if adopt is not None:
        adopt(model)
    return blob, model


def _take_digest(
    conn: Channel, model: SchemaModel, adopt: Callable[[SchemaModel | None], None] | None
) -> None:
    """The digest the schema process sends after a model it sent early; without it (the process failed
    after the model) the store hashes the XSDs itself when it first needs the digest."""
    try:
        raw = marshal.loads(conn.recv_bytes())
        if isinstance(raw, tuple) and len(raw) >= 2 and raw[0] == "digest" and isinstance(raw[1], str):
            model.digest = raw[1]
            if adopt is not None and raw[1]:
                adopt(model)
            for path, data in raw[2] if len(raw) > 2 else ():
                with contextlib.suppress(Exception):  # a cache write: best effort, as in the schema process
                    atomic_write(Path(path), data, durable=False)
    except (EOFError, OSError, ValueError):
        pass
    finally:
        conn.close()
