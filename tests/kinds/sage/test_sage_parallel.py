"""A cold build on every core (`parallel.prefetch`: the model compiles in its own process while forked workers
parse) gives exactly the records, statistics and diagnostics of a build on one core."""

from __future__ import annotations

import json
import marshal
import multiprocessing
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from deskbridge.kinds.sage import parallel, schema
from deskbridge.kinds.sage.schema import SchemaModel

# Run in a fresh interpreter: forking is only done from a single-threaded process, which a test process
# with a server thread somewhere may not be.
_CHILD = r"""
import hashlib, json, marshal, sys
from deskbridge.kinds.sage import parallel
from deskbridge.kinds.sage.indexer import ProjectIndexer
from deskbridge.kinds.sage.records import FileRecords
parallel.HELD_TREES_MAX_BYTES = int(sys.argv[3])
calls = []
real = parallel.prefetch
def counted(*args, **kwargs):
    got = real(*args, **kwargs)
    calls.append(len(got))
    return got
parallel.prefetch = counted
service = ProjectIndexer(sys.argv[1], sys.argv[2])
index = service.open_sync()
import os
try:  # every child the build forked has been waited for (the workers after the walk: `parallel.reap`)
    os.waitpid(-1, os.WNOHANG)
    children = True
except ChildProcessError:
    children = False
saved = service.save_cache()  # before any row is located: the cache keeps what the build made
counted = index.unresolved_count()[1]  # from the rows' ids alone: locates nothing
unlocated = 0
rows = {}
for path, entry in sorted(service.store._entries.items()):
    rec = service.store._records(entry, path)
    unlocated += not rec.located
    rec.refs  # locates the rows of a record the workers left unlocated (from the file's bytes)
    head, blob = rec.to_cache()
    head[1] = marshal.loads(head[1])  # the assets, marshalled as the references are
    rows[path] = [entry[0], entry[3], head, marshal.loads(blob)]
stats = {k: v for k, v in index.stats.items() if not k.endswith("Ms") and k != "resolveCalls"}
diags = [(d.file, d.line, d.code, d.severity, d.message) for d in index.diagnostics]
print(json.dumps({
    # JSON, not marshal: marshal's bytes depend on which equal strings happen to be one object.
    "records": hashlib.sha256(json.dumps(rows).encode()).hexdigest(),
    "diagnostics": hashlib.sha256(json.dumps(diags).encode()).hexdigest(),
    "model": hashlib.sha256(json.dumps(service.model().to_json(), sort_keys=True).encode()).hexdigest(),
    "stats": stats,
    "prefetched": calls,
    "saved": saved,
    "unlocated": unlocated,
    "unresolved": [counted, len(index.unresolved())],
    "children": children,
}))
"""


def _cold(data: Any, home: Path, workers: int, held_max: int = parallel.HELD_TREES_MAX_BYTES) -> dict:
    env = {**os.environ, "DESKBRIDGE_HOME": str(home), parallel.WORKERS_ENV: str(workers)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(data.mod), str(data.sdk), str(held_max)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_cold_build_on_every_core_equals_one_core(sage_data: Any, tmp_path: Path) -> None:
    one = _cold(sage_data, tmp_path / "one", 0)
    many = _cold(sage_data, tmp_path / "many", 2)
    # Workers that cannot keep every tree until the model arrives parse those files again: same answer.
    tight = _cold(sage_data, tmp_path / "tight", 2, held_max=0)
    assert one["prefetched"] == []
    assert many["prefetched"] and many["prefetched"][0] >= 1000, many["prefetched"]
    assert tight["prefetched"] == many["prefetched"]
    assert one["unlocated"] == 0
    assert one["unresolved"][0] == one["unresolved"][1] > 20_000
    for other in (many, tight):
        assert other["records"] == one["records"]
        assert other["diagnostics"] == one["diagnostics"]
        assert other["model"] == one["model"]
        assert other["stats"] == one["stats"]
        assert other["saved"] is True
        # The workers leave the reference rows unlocated; located on first read they equal one core's.
        assert other["unlocated"] > 500, other["unlocated"]
        assert other["unresolved"] == one["unresolved"]
        assert other["children"] is False
    # The schema process wrote the compiled model to the schema cache, as a build on one core does.
    assert list((tmp_path / "many").rglob("schema/*.json.gz"))
    # A warm start from the cache the workers' build wrote (rows still unlocated) locates them the same.
    warm = _cold(sage_data, tmp_path / "many", 2)
    assert warm["prefetched"] == [] and warm["unlocated"] == many["unlocated"]
    assert warm["records"] == one["records"]
    assert warm["diagnostics"] == one["diagnostics"]


def test_model_is_compiled_here_when_the_schema_process_gives_nothing() -> None:
    r, w = os.pipe()
    os.close(w)  # the schema process died before answering
    ours = parallel.Channel(r, -1)
    model = SchemaModel(asset_types={"Weapon": "WeaponTemplate"}, digest="d")
    adopted: list[SchemaModel | None] = []
    blob, got = parallel._take_model(ours, lambda: model, adopted.append)
    assert adopted == [model] and got is model
    # What the workers receive is the same model.
    assert SchemaModel.from_json(marshal.loads(blob)).asset_types == {"Weapon": "WeaponTemplate"}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("digest_arrives", [True, False])
def test_a_model_sent_before_its_digest_gets_the_digest_when_it_follows(
    digest_arrives: bool, tmp_path: Path
) -> None:
    """With no schema cache the schema process sends the model as soon as it is compiled
    (`schema.EARLY_MODEL`) and its digest after hashing the XSDs, with the schema cache's bytes, which the
    parent writes; the parent adopts the digest when it comes, and leaves it unknown (the store hashes the
    XSDs itself) when the process fails after the model."""
    cache = tmp_path / "schema" / "abc.json.gz"

    def loader() -> SchemaModel:
        model = SchemaModel(asset_types={"Weapon": "WeaponTemplate"})
        assert schema.EARLY_MODEL is not None  # set in the schema process only
        assert schema.DEFERRED_CACHE_WRITES is not None
        schema.EARLY_MODEL(model)
        if not digest_arrives:
            raise OSError("the XSDs vanished")
        model.digest = "abc"
        schema.DEFERRED_CACHE_WRITES.append((cache, lambda: b"compiled"))
        return model

    def never() -> SchemaModel:
        raise AssertionError("the model came from the schema process")

    pid, conn = parallel._fork(parallel._compile_main, loader)
    adopted: list[SchemaModel | None] = []
    blob, got = parallel._take_model(conn, never, adopted.append)
    assert got is not None and got.digest == "" and adopted == [got]
    assert SchemaModel.from_json(marshal.loads(blob)).asset_types == {"Weapon": "WeaponTemplate"}
    parallel._take_digest(conn, got, adopted.append)
    parallel._join(pid)
    if digest_arrives:
        assert got.digest == "abc" and adopted == [got, got]
        assert cache.read_bytes() == b"compiled"
    else:
        assert got.digest == "" and adopted == [got]
        assert not cache.exists()
    assert schema.EARLY_MODEL is None and schema.DEFERRED_CACHE_WRITES is None  # the parent's, unchanged


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_that_fails_or_dies_is_seen_as_gone_and_never_returns_here() -> None:
    """`_fork`'s child leaves with `os._exit` even when its target raises, so the parent's channel reads EOF
    (the parent then parses that worker's files itself) and the child never runs the parent's code."""

    def fails(conn: parallel.Channel) -> None:
        conn.send_bytes(marshal.dumps(("hello", 1)))
        raise RuntimeError("boom")

    pid, conn = parallel._fork(fails)
    assert marshal.loads(conn.recv_bytes()) == ("hello", 1)
    with pytest.raises(EOFError):
        conn.recv_bytes()
    assert os.waitpid(pid, 0)[1] >> 8 == 1
    conn.close()
    big = bytes(range(256)) * 4096  # 1 MiB: more than a pipe holds, in several writes and reads

    def echo(conn: parallel.Channel) -> None:
        conn.send_bytes(conn.recv_bytes())

    pid, conn = parallel._fork(echo)
    conn.send_bytes(big)
    assert conn.recv_bytes() == big
    parallel._join(pid)
    assert conn.poll()  # the child is gone: EOF is waiting
    with pytest.raises(EOFError):
        conn.recv_bytes()
    conn.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_large_model_and_a_large_answer_crossing_in_the_pipes_do_not_deadlock(tmp_path: Path) -> None:
    """The parent writes the model (more than a pipe holds) while a worker writes a large answer: each
    would wait for the other to read. The worker reads its inbox in a thread of its own, so the parent's
    write completes (this test hung before it did)."""
    import signal

    many = "".join(
        f'<Include type="all" source="DATA:some/long/folder/name_{i:05d}.xml"/>' for i in range(6000)
    )
    doc = tmp_path / "many.xml"
    doc.write_text(
        f'<AssetDeclaration xmlns="uri:ea.com:eala:asset"><Includes>{many}</Includes></AssetDeclaration>'
    )
    model = SchemaModel(asset_types={f"Type{i:06d}": f"Key{i:06d}" for i in range(20000)}, digest="d")
    blob = marshal.dumps(model.to_json())
    assert len(blob) > 256 * 1024
    pid, conn = parallel._fork(parallel._worker_main)
    previous = signal.signal(signal.SIGALRM, signal.default_int_handler)
    signal.alarm(60)
    try:
        conn.send_bytes(marshal.dumps(("parse", [(str(doc), False)])))
        conn.send_bytes(marshal.dumps(("model", blob)))  # while the worker writes its ~300 KB answer
        kind, items, _pending = marshal.loads(conn.recv_bytes())
        assert kind == "parsed" and items[0][1] == "links" and len(items[0][2][0]) == 6000
        kind, done, pending = marshal.loads(conn.recv_bytes())
        assert kind == "finished" and [p for p, _r in done] == [str(doc)] and pending == 0
        conn.send_bytes(marshal.dumps(("stop",)))
        parallel._join(pid)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        conn.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_model_goes_to_a_busy_worker_in_one_write() -> None:
    """The pipes to a child hold `PIPE_BYTES` (a model of ~250 KB, a large answer): the parent's write
    returns while the child is still busy, instead of waiting for it to read each 64 KiB (this test timed
    out before the pipes were widened)."""
    import signal

    gate_r, gate_w = os.pipe()

    def busy(conn: parallel.Channel) -> None:
        os.read(gate_r, 1)  # busy until the parent has written
        conn.send_bytes(len(conn.recv_bytes()).to_bytes(8, "little"))

    def too_long(*_args: Any) -> None:
        raise TimeoutError("the write waited for the busy child to read")

    pid, conn = parallel._fork(busy)
    previous = signal.signal(signal.SIGALRM, too_long)
    signal.alarm(10)
    try:
        conn.send_bytes(b"m" * (parallel.PIPE_BYTES - 4096))
        signal.alarm(0)
        os.write(gate_w, b"x")
        assert int.from_bytes(conn.recv_bytes(), "little") == parallel.PIPE_BYTES - 4096
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        conn.close()  # a child left reading half a message sees EOF and leaves
        os.write(gate_w, b"x")
        parallel._join(pid)
        os.close(gate_r)
        os.close(gate_w)


_DEAD = r"""
import json, os, sys
from deskbridge.kinds.sage import parallel
if sys.argv[3] == "dead":
    parallel._worker_main = lambda conn: os._exit(1)  # every worker dies before it answers anything
from deskbridge.kinds.sage.indexer import ProjectIndexer
service = ProjectIndexer(sys.argv[1], sys.argv[2])
index = service.open_sync()
stats = {k: v for k, v in index.stats.items() if not k.endswith("Ms") and k != "resolveCalls"}
print(json.dumps({"stats": stats, "diagnostics": len(index.diagnostics), "saved": service.save_cache()}))
"""


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_cold_build_whose_workers_all_die_is_parsed_by_the_walk(sage_data: Any, tmp_path: Path) -> None:
    """With every worker gone and files still queued, `prefetch` waited on no pipe at all, forever (this
    test timed out before); the walk now parses those files itself, as one core does."""

    def cold(mode: str, workers: int) -> dict:
        env = {**os.environ, "DESKBRIDGE_HOME": str(tmp_path / mode), parallel.WORKERS_ENV: str(workers)}
        out = subprocess.run(
            [sys.executable, "-c", _DEAD, str(sage_data.mod), str(sage_data.sdk), mode],
            env=env,
            check=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return json.loads(out.stdout.strip().splitlines()[-1])

    one, dead = cold("one", 0), cold("dead", 2)
    assert dead == one and one["stats"]["parsedFiles"] > 1000


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_the_second_worker_is_forked_once_the_model_is_here_and_parses_its_share(
    sage_data: Any, tmp_path: Path
) -> None:
    """While the model compiles, its process and one worker have the two cores; the second worker is
    forked with the model in hand and extracts files as it parses them (the records are the same:
    `test_cold_build_on_every_core_equals_one_core` builds this way)."""
    env = {
        **os.environ,
        "DESKBRIDGE_HOME": str(tmp_path),
        parallel.WORKERS_ENV: "2",
        "DESKBRIDGE_SAGE_TRACE": "1",
    }
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(sage_data.mod),
            str(sage_data.sdk),
            str(parallel.HELD_TREES_MAX_BYTES),
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    events: list[tuple[float, str, str, str]] = []  # (clock, pid, role, event)
    for line in out.stderr.splitlines():
        if line.startswith("sage-trace "):
            _tag, pid, who, clock, _cpu, event = line.split(" ", 5)
            events.append((float(clock), pid, who, event))
    received = next(t for t, _p, who, ev in events if who == "parent" and ev == "model-received")
    starts = {pid: t for t, pid, who, ev in events if who == "worker" and ev == "start"}
    assert len(starts) == 2
    first, second = sorted(starts, key=starts.__getitem__)
    assert starts[first] < received <= starts[second]
    batches = [pid for _t, pid, _w, ev in events if ev.startswith("batch-start")]
    assert batches.count(second) >= 10, batches.count(second)
    adopted = {pid for _t, pid, _w, ev in events if ev == "model-adopted"}
    assert adopted == {first}  # the second one never waited for the model
    assert json.loads(out.stdout.strip().splitlines()[-1])["stats"]["parsedFiles"] > 1000
