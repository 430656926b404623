"""Sandbox attacks on `.pvf.js` runs: each is refused or ended, and the workspace (revision, overlay, the file
on disk) is unchanged. The worker's own confinement is read from /proc while it runs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from script_harness import Session, session

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.scripting.runner import ScriptLimits, check_source, validate_source
from deskbridge.kinds.pvf.synth import synth

pytestmark = [pytest.mark.anyio, pytest.mark.security]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def source_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    p = tmp_path_factory.mktemp("pvfjs-sandbox") / "classic.pvf"
    synth(p, family="classic", files=120, seed=9)
    return p


@pytest.fixture
def archive(source_archive: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "Script.pvf"
    shutil.copyfile(source_archive, dest)
    return dest


def unchanged(s: Session, archive: Path, digest: str) -> None:
    with s.svc.engine.lock:
        ws = s.svc.engine.current(s.ws)
        assert ws.revision == s.rev and not ws.overlay
        assert s.svc.engine.plans.pending() is None
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest


async def attack(archive: Path, tmp_path: Path, source: str, limits: ScriptLimits | None = None) -> dict:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    async with session(archive, tmp_path / "cache", limits) as s:
        res = await s.run(source)
        unchanged(s, archive, digest)
        return res


PROBES = r"""
const out = {};
const t = (name, f) => { try { out[name] = String(f()); } catch (e) { out[name] = "threw " + e.name; } };
t("require", () => require("fs"));
t("process", () => process.env);
t("std", () => typeof std + typeof os + typeof Deno + typeof fetch + typeof XMLHttpRequest + typeof WebAssembly);
t("host", () => typeof __host);
t("evalHost", () => eval("typeof __host"));
t("fnHost", () => Function("return typeof globalThis.__host")());
t("ctorHost", () => pvf.find.constructor("return typeof this.__host")());
t("globals", () => Object.getOwnPropertyNames(globalThis).filter((k) => /host|py|quickjs/i.test(k)).join());
t("passwd", () => pvf.find("/etc/passwd"));
t("dotdot", () => pvf.find("../../../../etc/passwd"));
t("copy", () => pvf.copyFile("/etc/passwd", "x.txt"));
t("create", () => pvf.createFile("../../etc/passwd", 3, "x"));
t("lst", () => pvf.lst("/etc/passwd"));
t("setTimeout", () => setTimeout(() => 0, 1));
pvf.log(JSON.stringify(out));
"""


async def test_no_require_process_modules_or_host_objects(archive: Path, tmp_path: Path) -> None:
    res = await attack(archive, tmp_path, PROBES)
    assert res["state"] == "succeeded", res
    out = json.loads(res["logs"][-1])
    assert out["require"] == "threw ReferenceError" and out["process"] == "threw ReferenceError"
    assert out["std"] == "undefined" * 6
    assert out["host"] == out["evalHost"] == out["fnHost"] == out["ctorHost"] == "undefined"
    assert out["globals"] == ""
    assert out["passwd"] == "null"  # an archive path, looked up in the archive only
    assert out["dotdot"] == out["create"] == "threw Error"
    assert out["copy"] == out["lst"] == "threw Error"
    assert out["setTimeout"] == "threw ReferenceError"


async def test_dynamic_and_static_import_are_refused(archive: Path, tmp_path: Path) -> None:
    res = await attack(
        archive,
        tmp_path,
        "let r = 'pending'; import('/etc/passwd').then(() => { r = 'loaded'; }, (e) => { r = String(e); });"
        "Promise.resolve().then(() => Promise.resolve()).then(() => pvf.log(r));",
    )
    assert res["state"] == "succeeded" and "could not load module" in res["logs"][-1], res
    res = await attack(archive, tmp_path, "import fs from 'fs';")
    assert res["state"] == "failed" and res["error"]["code"] == "SCRIPT_SYNTAX"
    assert validate_source("import fs from 'fs';")[0]["line"] == 1


async def test_prototype_pollution_does_not_reach_the_host(archive: Path, tmp_path: Path) -> None:
    source = r"""
    Object.prototype.e = {code: "INTERNAL", message: "polluted"};
    Object.prototype.v = "polluted";
    Object.prototype.toJSON = function () { return {op: "pvf.deleteFile"}; };
    Array.prototype.map = function () { return ["/etc/passwd"]; };
    JSON.parse = () => ({v: "forged"});
    JSON.stringify = () => '["/etc/passwd"]';
    const f = pvf.glob("**/*.equ");
    pvf.log(typeof f.length, f.length > 0 ? "files" : "none");
    try { pvf.deleteFile(f[0]); pvf.log("deleteFile of a non-string: accepted"); }
    catch (e) { pvf.log("refused", e.message.split(":")[0]); }
    """
    res = await attack(archive, tmp_path, source)
    # The polluted toJSON garbles the script's own requests: the host refuses them (they are not argument
    # arrays) and the run fails; nothing forged or polluted was taken as an answer.
    assert res["state"] == "failed" and res["error"]["code"] == "INVALID_ARGUMENT", res
    assert "polluted" not in json.dumps(res) and "forged" not in json.dumps(res)
    # Whatever the script did to its own prototypes, it staged nothing: no plan, workspace as before.
    assert res["plan"] is None


async def test_spinning_without_allocating_is_ended(archive: Path, tmp_path: Path) -> None:
    res = await attack(archive, tmp_path, "for (;;) {}", ScriptLimits(wall_s=2))
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert "longer than 2 s" in res["error"]["message"]


async def test_a_run_out_of_time_says_how_far_it_got(archive: Path, tmp_path: Path) -> None:
    # On a one-million-file archive the seed's example over every equipment file can outrun the 5 minutes:
    # the error says where it stopped and to narrow the glob, so an agent splits the run by folder.
    res = await attack(
        archive, tmp_path, "pvf.progress(3, 7, 'scanning'); for (;;) {}", ScriptLimits(wall_s=2)
    )
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert "at pvf.progress 3 of 7" in res["error"]["message"], res["error"]
    assert "one folder at a time" in res["error"]["hint"]


async def test_memory_bomb_is_ended(archive: Path, tmp_path: Path) -> None:
    res = await attack(
        archive,
        tmp_path,
        "const a = []; for (;;) a.push('x'.repeat(1 << 20) + a.length);",
        ScriptLimits(js_mem_bytes=64 << 20),
    )
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert "memory" in res["error"]["message"]
    assert "keep less in memory" in res["error"]["hint"], res["error"]  # not "checks its syntax"


async def test_a_runaway_recursion_is_told_to_become_a_loop(archive: Path, tmp_path: Path) -> None:
    # Its hint said to keep less in memory and log less, which does nothing for `function f() { f(); }`.
    res = await attack(archive, tmp_path, "function f(n) { return f(n + 1) + 1; } f(0);")
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert "call stack" in res["error"]["message"] and "recursion into a loop" in res["error"]["hint"], res


async def test_log_flood_is_stopped(archive: Path, tmp_path: Path) -> None:
    # Many lines (a lower line cap than the default 100,000, to keep the test short) …
    res = await attack(
        archive,
        tmp_path,
        "for (let i = 0; ; i++) { try { pvf.log('line', i); } catch (e) {} }",
        ScriptLimits(log_max_lines=3000),
    )
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert len(res["logs"]) <= 3000
    # … or a few huge ones (the default 4 MiB cap); the task log keeps a bounded tail either way.
    res = await attack(archive, tmp_path, "const x = 'y'.repeat(1 << 20); for (;;) console.error(x);")
    assert res["state"] == "failed" and res["error"]["code"] == "LIMIT_EXCEEDED", res
    assert sum(len(t) for t in res["logs"]) <= 1 << 20
    assert "4 MiB" in res["error"]["message"] and "log less" in res["error"]["hint"], res["error"]


async def test_oversized_source_is_refused(archive: Path, tmp_path: Path) -> None:
    big = "//" + "x" * (1 << 20)
    with pytest.raises(BridgeError) as err:
        check_source(big)
    assert err.value.code.value == "LIMIT_EXCEEDED"
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    async with session(archive, tmp_path / "cache") as s:
        with pytest.raises(BridgeError):
            s.runs.start("mcp:test", s.ws, s.rev, big, None)
        unchanged(s, archive, digest)


async def test_the_worker_is_confined(archive: Path, tmp_path: Path) -> None:
    """Read the running worker's limits, privileges, environment and descriptors from /proc."""
    if not Path("/proc/self/limits").exists():
        pytest.skip("needs Linux /proc")
    async with session(archive, tmp_path / "cache", ScriptLimits(wall_s=60)) as s:
        task = s.runs.start("mcp:test", s.ws, s.rev, "pvf.log('up'); for (;;) {}", None)
        for _ in range(200):
            w = s.runs.workers.get(task.id)
            if w is not None and s.svc.engine.tasks.status(task.id)["log"]["entries"]:
                break
            await asyncio.sleep(0.05)
        assert w is not None
        pid = w.proc.pid
        limits = Path(f"/proc/{pid}/limits").read_text()
        status = Path(f"/proc/{pid}/status").read_text()
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        fds = sorted(int(x) for x in __import__("os").listdir(f"/proc/{pid}/fd"))
        s.svc.engine.tasks.cancel(task.id, "mcp:test")
        await s.svc.engine.tasks.wait(task.id, timeout=30)
        assert s.svc.engine.tasks.status(task.id)["state"] == "cancelled"
    assert "NoNewPrivs:\t1" in status
    rows = {line[:26].strip(): line[26:].split() for line in limits.splitlines()[1:]}
    assert rows["Max processes"][0] == "0"
    assert rows["Max address space"][0] != "unlimited"
    assert rows["Max cpu time"][0] == "70"
    assert int(rows["Max open files"][0]) <= max(fds) + 2  # listing /proc/self/fd took one
    assert environ == b""
    # stdin (closed after the job), the protocol pipe, stderr, the archive, and the engine's own few
    assert len(fds) < 12


async def test_a_diff_the_worker_sends_is_never_shown(
    archive: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A subverted worker could describe its change as harmless: the preview's diff is the parent's own,
    from the payload it read and the text it compiled, whatever a change frame claims."""
    import queue as real_queue

    from deskbridge.core.plans import text_diff
    from deskbridge.kinds.pvf.scripting import runner

    class Forging(real_queue.Queue):
        def put(self, msg, *args, **kwargs):  # type: ignore[no-untyped-def]
            if isinstance(msg, dict) and msg.get("t") == "change":
                msg = {**msg, "diff": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-harmless\n+harmless\n"}
            super().put(msg, *args, **kwargs)

    class Queues:
        Queue = Forging
        Empty = real_queue.Empty

    monkeypatch.setattr(runner, "queue", Queues)
    source = """
    const f = pvf.glob("equipment/**/*.equ")[0];
    f.setText(f.text() + "\\n[added by a test]\\n\\t1\\n");
    pvf.log(f.path);
    """
    async with session(archive, tmp_path / "cache") as s:
        res = await s.run(source)
        assert res["state"] == "succeeded", res
        path = res["logs"][-1]
        old = s.text(path)
        page = s.svc.engine.preview_plan(res["plan"].id)
        # the new section tag is a new string: the grown stringtable.bin comes with it (binary, no diff)
        (item,) = [i for i in page["items"] if i["changeKey"] == path]
        assert all("diff" not in i for i in page["items"] if i is not item)
        assert item["diff"] == text_diff(path, old, old + "\n[added by a test]\n\t1\n")
        assert "harmless" not in item["diff"] and "+[added by a test]" in item["diff"]
        s.discard(res)


def _frames_read(chunks: list[bytes]) -> tuple[list[dict], str | None]:
    """What the parent's reader makes of these bytes from a worker's pipe, written in these pieces."""
    import os
    import queue
    import threading
    import types

    from deskbridge.kinds.pvf.scripting import runner

    r, w = os.pipe()
    reader = runner.Worker.__new__(runner.Worker)
    reader.proc = types.SimpleNamespace(stdout=os.fdopen(r, "rb"))  # type: ignore[assignment]
    reader.frames = queue.Queue()
    reader.bad = None

    def write() -> None:
        for c in chunks:
            os.write(w, c)
        os.close(w)

    t = threading.Thread(target=write)
    t.start()
    reader._read()
    t.join()
    got = []
    while (msg := reader.frames.get_nowait()) is not None:
        got.append(msg)
    return got, reader.bad


def _frame(raw: bytes) -> bytes:
    return len(raw).to_bytes(4, "big") + raw


@pytest.mark.security
def test_the_parent_reads_frames_cut_anywhere_and_refuses_oversized_or_garbled_ones() -> None:
    msgs = [{"t": "change", "path": f"a/{i}.equ", "text": "x" * (i * 997 % 5000)} for i in range(60)]
    stream = b"".join(_frame(json.dumps(m).encode()) for m in msgs)
    for size in (1, 3, 4096, 1 << 20):
        got, bad = _frames_read([stream[i : i + size] for i in range(0, len(stream), size)])
        assert got == msgs and bad is None
    big = (41 << 20).to_bytes(4, "big") + b"{}"
    assert _frames_read([stream, big]) == (msgs, "a frame of 42991616 bytes")
    assert _frames_read([_frame(b"{not json")]) == ([], "a frame that is not JSON")
    assert _frames_read([_frame(b"[1]")]) == ([], "a frame without a type")
    assert _frames_read([stream[:-3]])[0] == msgs[:-1]  # a frame cut short by the worker's end is dropped
