"""Parent side of `.pvf.js` runs: start the sandboxed worker, follow it as a core task, end in a core plan.

A run is a *write* task of the engine (one per workspace: `TASK_BUSY` while one runs, `PLAN_PENDING` while a
write plan waits — the core occupancy rule shared with the UI and every MCP client). The task thread feeds
the worker its job (archive path and options, the workspace's overlay, the script, the limits), reads its
frames, forwards logs and progress to the task, and ends the worker when the wall clock runs out or the
owner cancels (`proc.kill()`: the engine has no in-engine time limit, see `worker.py`).

The changes are compiled by the parent as their frames arrive (a stored file's when the script writes it,
the rest when the script is over; `_PlanBuilder` keeps each file's last) — under `Engine.lock`, against the
workspace's own archive object, with the same `store.Compiler` as `pvf_edit_prepare` — so a classic script
that needs new strings comes with the grown `stringtable.bin` as a change it `requires`, and nkpi pool
strings land in the workspace's pools. A `.lst` entry that registers a file created by the same run
`requires` that file. The plan (`PlanKind.SCRIPT`) is registered with the task as its builder; a run that
changed nothing leaves no plan. Frames from the worker are untrusted data: size-capped, type-checked JSON.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import pickle
import queue
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import atomic_write, read_regular_file
from deskbridge.core.plans import Change, PlanKind, PlanWarning, text_diff
from deskbridge.core.tasks import TaskCancelled, TaskHandle
from deskbridge.core.workspace import DELETED
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.store import STRINGTABLE, Compiler, PvfSource, add_side_changes, mirror_on_apply
from deskbridge.kinds.pvf.transfer import payload_text

SOURCE_MAX_BYTES = 1 << 20
FRAME_MAX = 40 << 20
RESULT_MAX_BYTES = 1 << 30
FILESETS_FILE = "pvf-file-sets.json"
_FRAME = struct.Struct(">I")
_READ_BYTES = 1 << 20
"""Bytes asked of the worker's pipe per read (`Worker._read`)."""
_PIPE_BYTES = 1 << 20
"""The worker's pipe capacity asked for (Linux `F_SETPIPE_SZ`; 1 MiB is the default most a process may set)."""
_QUEUED = 4096
"""Frames read ahead of the run loop (it compiles change frames between reads)."""
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[4])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from deskbridge.kinds.pvf.scripting.worker import main; sys.exit(main())"
)


@dataclass
class ScriptLimits:
    """The sandbox's limits (issue 14: engine memory 512 MiB, wall clock 5 min, source ≤ 1 MiB)."""

    js_mem_bytes: int = 512 << 20
    wall_s: float = 300.0
    address_space_bytes: int = 4 << 30
    """The worker's own `RLIMIT_AS`: Python, the opened archive and its overlay, plus the engine limit."""
    max_changes: int = 250_000
    docs_live: int = 4096
    """Parsed documents a run keeps at once (older handles ask to parse again)."""
    log_max_lines: int = 100_000
    log_max_bytes: int = 4 << 20
    """A run that logs more is stopped (LIMIT_EXCEEDED): a flood is a bug or an attack."""


def check_source(source: str) -> None:
    if len(source.encode("utf-8")) > SOURCE_MAX_BYTES:
        raise BridgeError(
            ErrorCode.LIMIT_EXCEEDED,
            f"the script is larger than {SOURCE_MAX_BYTES >> 20} MiB",
            "Keep scripts small: loop over pvf.glob() instead of inlining data.",
        )


# --------------------------------------------------------------------------------------------- worker


class Worker:
    """One sandboxed worker process and a thread reading its frames into a queue."""

    def __init__(self, job: dict[str, Any], limits: ScriptLimits) -> None:
        job = {
            **job,
            "js_mem_bytes": limits.js_mem_bytes,
            "cpu_s": int(limits.wall_s) + 10,
            "as_bytes": limits.address_space_bytes,
            "max_changes": limits.max_changes,
            "log_max_lines": limits.log_max_lines,
            "docs_live": limits.docs_live,
            "log_max_bytes": limits.log_max_bytes,
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-c", _BOOT, _PACKAGE_ROOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={},
            close_fds=True,
            cwd="/",
            start_new_session=True,
        )
        self.frames: queue.Queue[dict[str, Any] | None] = queue.Queue(maxsize=_QUEUED)
        self.stderr_tail = b""
        self.bad: str | None = None
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._drain_stderr, daemon=True).start()
        raw = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(_FRAME.pack(len(raw)) + raw)
            self.proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the worker died at start; its exit is reported by the reader

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        # Read in large chunks straight from the pipe: each read gives the GIL away, and while the parent
        # compiles frames (pure Python, in another thread) taking it back waits for a switch interval — read
        # a frame at a time (the buffered reader's 8 KiB) and the worker stalls on a full pipe (classic-200k:
        # the worker's sending phase took as long as the parent's compile). A larger pipe lets it write on.
        fd = out.fileno()
        with contextlib.suppress(OSError, AttributeError, ValueError):
            import fcntl

            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)  # type: ignore[attr-defined]
        buf = bytearray()
        at = 0
        try:
            while True:
                have = len(buf) - at
                n = _FRAME.unpack_from(buf, at)[0] if have >= _FRAME.size else -1  # -1: no length yet
                if n > FRAME_MAX:
                    self.bad = f"a frame of {n} bytes"
                    break
                if n < 0 or have - _FRAME.size < n:  # read on: at least the rest of this frame
                    chunk = os.read(fd, max(_READ_BYTES, n + _FRAME.size - have))
                    if not chunk:
                        break
                    del buf[:at]
                    at = 0
                    buf += chunk
                    continue
                raw = bytes(buf[at + _FRAME.size : at + _FRAME.size + n])
                at += _FRAME.size + n
                try:
                    msg = json.loads(raw)
                except ValueError:
                    self.bad = "a frame that is not JSON"
                    break
                if not isinstance(msg, dict) or not isinstance(msg.get("t"), str):
                    self.bad = "a frame without a type"
                    break
                self.frames.put(msg)
        finally:
            self.frames.put(None)

    def _drain_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        while True:
            chunk = err.read(65536)
            if not chunk:
                break
            self.stderr_tail = (self.stderr_tail + chunk)[-4000:]

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            self.proc.kill()
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)

    def exit_note(self) -> str:
        rc = self.proc.poll()
        tail = self.stderr_tail.decode("utf-8", "replace").strip().splitlines()[-3:]
        return f"exit status {rc}" + (f": {' | '.join(tail)}" if tail else "")


def validate_source(source: str, limits: ScriptLimits | None = None) -> list[dict[str, Any]]:
    """Syntax diagnostics of a script (compiled in a sandboxed worker, never run)."""
    check_source(source)
    limits = limits or ScriptLimits()
    w = Worker({"mode": "validate", "source": source}, limits)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                msg = w.frames.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise BridgeError(ErrorCode.LIMIT_EXCEEDED, "validation took longer than 60 s") from None
            if msg is None:
                raise BridgeError(ErrorCode.INTERNAL, f"the validator ended early ({w.exit_note()})")
            if msg["t"] == "done":
                diags = msg.get("diagnostics")
                return diags if isinstance(diags, list) else []
            if msg["t"] == "error":
                raise BridgeError(ErrorCode.INTERNAL, str(msg.get("message"))[:2000])
    finally:
        w.kill()


# --------------------------------------------------------------------------------------------- runs


def _str(msg: dict[str, Any], key: str, limit: int = 1 << 30) -> str | None:
    v = msg.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or len(v) > limit:
        raise BridgeError(ErrorCode.INTERNAL, f"the worker sent a bad {key!r}")
    return v


class ScriptRuns:
    """Script runs of one `PvfService` (one engine): start, follow, plan; see the module docstring."""

    def __init__(self, svc: Any, config_dir: Path | None, limits: ScriptLimits | None = None) -> None:
        self.svc = svc
        self.config_dir = config_dir
        self.limits = limits or ScriptLimits()
        self.workers: dict[str, Worker] = {}

    # -- filesets (the person's own lists, in the user config folder, never in the archive) -------------

    def filesets_path(self) -> Path | None:
        return None if self.config_dir is None else self.config_dir / FILESETS_FILE

    def load_filesets(self) -> dict[str, list[str]]:
        path = self.filesets_path()
        if path is None or not path.exists():
            return {}
        try:
            doc = json.loads(read_regular_file(path, max_bytes=64 << 20, shown_as=FILESETS_FILE))
        except (BridgeError, ValueError):
            return {}
        sets = doc.get("sets") if isinstance(doc, dict) else None
        if not isinstance(sets, dict):
            return {}
        return {
            str(k): [str(p) for p in v] for k, v in sets.items() if isinstance(v, list) and isinstance(k, str)
        }

    def save_filesets(self, changed: dict[str, list[str]]) -> None:
        path = self.filesets_path()
        if path is None:
            raise BridgeError(ErrorCode.UNSUPPORTED_CHANGE, "no config folder to keep filesets in")
        sets = self.load_filesets()
        sets.update(changed)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps({"version": 1, "sets": sets}, ensure_ascii=False, indent=1).encode())

    # -- run ---------------------------------------------------------------------------------------------

    def start(self, caller: str, workspace_id: str, revision: int, source: str, label: str | None) -> Any:
        check_source(source)
        eng = self.svc.engine
        with eng.lock:
            ws = self.svc._ws(workspace_id, revision)
            src: PvfSource = ws.source  # type: ignore[assignment]
            overlay = {ws.name(k): (None if v is DELETED else v) for k, v in ws.overlay.items()}
            # nkpi payloads in the overlay may point at name-pool strings this session added; the worker opens
            # the file afresh, so it gets those strings too (the same bytes appended give the same offsets).
            pools = getattr(src.archive, "pools", None)
            job = {
                "path": str(src.path),
                "options": {k: v for k, v in src.options.items() if v is not None},
                "overlay": overlay,
                "pool_tail": pools.appended_raw() if pools is not None else None,
                "source": source,
                "filesets": self.load_filesets(),
                "fileset_writes": caller == "ui",
            }
            ar = getattr(src, "archive", None)
            strings = ar.strings if ar is not None and ar.family == "classic" else None
            if strings is not None and not job["options"].get("encoding"):
                # what the parent detected on these same bytes: the worker adopts it instead of reading
                # stringtable.bin again at open (`ClassicArchive.adopt_detected_encoding`)
                job["detected_encoding"] = ar.encoding
        runs = self

        def work(handle: TaskHandle) -> dict[str, Any]:
            if strings is not None:  # the parent idles while the script runs: read what its compile needs
                threading.Thread(
                    target=strings.warm, args=(eng.lock,), name="pvf-script-warm", daemon=True
                ).start()
            return runs._follow(handle, caller, workspace_id, revision, job, label)

        return eng.start_task(work, owner=caller, label="pvf_script_run", write=True, cancellable=True)

    def _follow(
        self,
        handle: TaskHandle,
        caller: str,
        workspace_id: str,
        revision: int,
        job: dict[str, Any],
        label: str | None,
    ) -> dict[str, Any]:
        limits = self.limits
        handle.progress(0, None, "starting the sandbox")
        w = Worker(job, limits)
        self.workers[handle.task_id] = w
        started = time.monotonic()
        deadline = started + limits.wall_s
        plan = _PlanBuilder(self, handle, caller, workspace_id, revision)
        pending: list[dict[str, Any]] = []
        count = 0
        received = 0
        done: dict[str, Any] | None = None
        try:
            while done is None:
                # Frames come while the script runs (a file's, when it is written) and after it: compiled while
                # the worker goes on (see `_PlanBuilder`), in batches of at least `_EARLY` while it scans.
                if (
                    pending
                    and plan.streaming
                    and (
                        len(pending) >= _BATCH
                        or (w.frames.empty() and (plan.reporting or len(pending) >= _EARLY))
                    )
                ):
                    plan.add(pending)
                    pending = []
                if handle.cancelled:
                    w.kill()
                    raise TaskCancelled()
                if time.monotonic() > deadline:
                    w.kill()
                    # How far it got tells the caller how to split it (nkpi-1m's equipment at load 6: 125,000
                    # of 142,855 files in 5 min, one folder of them in about one).
                    task = self.svc.engine.tasks.get(handle.task_id)
                    reached = f" at pvf.progress {task.done:g} of {task.total:g}" if task.total else ""
                    raise BridgeError(
                        ErrorCode.LIMIT_EXCEEDED,
                        f"the script ran longer than {limits.wall_s:g} s and was stopped{reached}",
                        "Make it do less per run: narrow the glob (one folder at a time, applying each plan "
                        "before the next run), or check it for an endless loop.",
                        data={"done": task.done, "total": task.total},
                    )
                try:
                    msg = w.frames.get(timeout=0.1)
                except queue.Empty:
                    continue
                if msg is None:
                    w.kill()
                    if w.bad:
                        raise BridgeError(ErrorCode.INTERNAL, f"the worker sent {w.bad}; the run was stopped")
                    rc = w.proc.returncode
                    if rc is not None and rc < 0:
                        raise BridgeError(
                            ErrorCode.LIMIT_EXCEEDED,
                            f"the sandbox was ended by signal {-rc} (a CPU or memory limit)",
                            "Make the script do less, or allocate less.",
                        )
                    raise BridgeError(
                        ErrorCode.INTERNAL, f"the sandbox ended without a result ({w.exit_note()})"
                    )
                kind = msg["t"]
                if kind == "log":
                    for e in msg.get("entries") or []:
                        if isinstance(e, dict):
                            level = e.get("level")
                            prefix = "" if level == "info" else f"[{level}] "
                            handle.log(prefix + str(e.get("text", ""))[:8192])
                elif kind == "progress":
                    d, t, m = msg.get("done"), msg.get("total"), msg.get("message")
                    if isinstance(d, int | float) and not isinstance(d, bool):
                        handle.progress(
                            d, t if isinstance(t, int | float) else None, m if isinstance(m, str) else None
                        )
                elif kind == "change":
                    received += sum(len(str(v)) for v in msg.values())
                    if received > RESULT_MAX_BYTES or count >= limits.max_changes:
                        w.kill()
                        raise BridgeError(ErrorCode.LIMIT_EXCEEDED, "the run changed too much to preview")
                    pending.append(msg)
                    count += 1
                elif kind == "error":
                    w.kill()
                    code = msg.get("code")
                    code = code if isinstance(code, str) and code in ErrorCode.__members__ else None
                    data = {k: msg[k] for k in ("line", "column", "stack") if k in msg}
                    message = str(msg.get("message"))[:4000]
                    if code is None:  # SCRIPT_ERROR, SYNTAX_ERROR in a file, ALREADY_EXISTS…
                        data["scriptError"] = str(msg.get("code"))[:64]
                        code = "INVALID_ARGUMENT"
                    # A sandbox limit (memory, log size) is not a mistake pvf_script_validate could find: the
                    # hint says what to change instead of pointing at a syntax check that passes.
                    hint = (
                        # QuickJS's stack limit (worker.py): memory advice would not help a runaway recursion
                        "The script recursed too deeply for the sandbox's stack: turn the recursion into a "
                        "loop (or give it an end); the workspace is unchanged."
                        if code == "LIMIT_EXCEEDED" and "call stack" in message
                        else "The run hit the sandbox limit named in the message: keep less in memory, log less "
                        "(a summary, not every file), or narrow the glob to one folder at a time; the "
                        "workspace is unchanged."
                        if code == "LIMIT_EXCEEDED"
                        else "Fix the script (pvf_script_validate checks its syntax) and run it again; "
                        "the workspace is unchanged."
                    )
                    raise BridgeError(ErrorCode[code], f"the script failed: {message}", hint, data=data)
                elif kind == "finishing":
                    plan.reporting = True  # the script is over: progress is the compile's from here on
                elif kind == "done":
                    done = msg
        finally:
            self.workers.pop(handle.task_id, None)
            w.kill()
        ran_s = time.monotonic() - started
        fileset_changes = done.get("filesets") if isinstance(done.get("filesets"), dict) else {}
        if fileset_changes:
            if caller != "ui":
                raise BridgeError(ErrorCode.UNSUPPORTED_CHANGE, "filesets cannot be changed over MCP")
            self.save_filesets(fileset_changes)
        timings = done.get("timings") if isinstance(done.get("timings"), dict) else {}
        summary = {
            "label": label,
            "scanned": done.get("scanned"),
            "runSeconds": round(ran_s, 3),
            # the worker's own phases (open the archive, run the script, send the changes), as it measured them
            "workerSeconds": {
                str(k)[:16]: round(v, 3) for k, v in list(timings.items())[:8] if isinstance(v, int | float)
            },
            "filesetsChanged": sorted(fileset_changes),
        }
        if not count:
            handle.progress(1, 1, "done (read-only: no plan)")
            return {"planId": None, "readOnly": True, "changes": 0, "summary": summary}
        t_plan = time.monotonic()
        plan.reporting = True
        if pending:
            plan.add(pending)
        info = plan.create(summary)
        compile_s = plan.compile_s
        # the task's copy (the plan's own summary is read under the engine lock by previews)
        summary = {**info["summary"], "afterDoneSeconds": round(time.monotonic() - t_plan, 3)}
        if info["planId"] is None:
            # every write compiled to the payload it had (a document written back unchanged): the worker no
            # longer compares old and new texts itself, so such a run is read-only here
            handle.progress(1, 1, "done (read-only: no plan)")
            return {
                "planId": None,
                "readOnly": True,
                "changes": 0,
                "summary": summary,
                "compileSeconds": round(compile_s, 3),
            }
        handle.progress(count, count, "plan ready")
        return {
            "planId": info["planId"],
            "readOnly": False,
            "changes": info["changeCount"],
            "counts": info["counts"],
            "warnings": info["warnings"][:20],
            "summary": summary,
            "compileSeconds": round(compile_s, 3),
        }


_BATCH = 256
"""Change frames compiled per hold of the engine lock while the worker still sends."""
_EARLY = 64
"""The fewest frames compiled in one hold of the lock while the script still runs (the queue empty)."""


class _PlanBuilder:
    """The plan of one run, compiled as the worker's change frames arrive (its `finish` sends them while the
    parent compiles the ones before) against the revision the run started on.

    Each batch is compiled under `Engine.lock` and checks first that the workspace is still that revision
    (else "the workspace changed while the script ran", as at the end); between batches the lock is free and
    the archive holds only committed state. A classic compile that adds strings stages the grown
    `stringtable.bin` in the archive; a later batch resumes from that table (`Compiler(resume=)`) — one
    re-read of the table — so after the first growth the rest waits for the worker's `done` and is compiled
    in one batch. The plan is created under the lock with the revision checked once more."""

    def __init__(
        self, runs: ScriptRuns, handle: TaskHandle, caller: str, workspace_id: str, revision: int
    ) -> None:
        self.runs = runs
        self.handle = handle
        self.caller = caller
        self.workspace_id = workspace_id
        self.revision = revision
        self.changes: dict[str, Change] = {}
        """Archive key → the change of the last frame sent for it (the worker sends a file's frame when the
        script writes it, and again at its end if the file changed since: the later replaces the earlier)."""
        self.warned: dict[str, int] = {}
        """Archive key → how many warnings its last frame carried (the summary's `fileWarnings`)."""
        self.grown: dict[str, bytes] | None = None
        """What this plan's compiles staged besides their payloads (`Compiler.extra`: the grown string
        table, `.str` files edited through link texts); None: nothing."""
        self.grew: list[str] = []
        self.compile_s = 0.0
        self.batches = 0
        self.reporting = False
        """Whether the script is over (the worker's `finishing`): only then is progress the compile's."""

    @property
    def streaming(self) -> bool:
        return self.grown is None

    def _ws(self) -> Any:
        try:
            return self.runs.svc._ws(self.workspace_id, self.revision)
        except BridgeError as exc:
            raise BridgeError(
                exc.code,
                "the workspace changed while the script ran",
                "Run the script again on the current revision (pvf_workspace_info).",
                data=exc.data,
            ) from None

    def add(self, msgs: list[dict[str, Any]]) -> None:
        """Compile a batch of change frames (call with the frames in the order the worker sent them)."""
        t0 = time.monotonic()
        with self.runs.svc.engine.lock:
            ws = self._ws()
            archive = ws.source.archive
            # the table's listing as committed, before this batch's compiles grow it (the old side of its diff)
            table_text = (
                _table_listing(archive)
                if any(isinstance(m.get("path"), str) and norm_path(m["path"]) == STRINGTABLE for m in msgs)
                else None
            )
            with Compiler(ws, resume=self.grown) as comp:
                for msg in msgs:
                    self._one(ws, archive, comp, msg, table_text)
            if comp.extra:
                self.grown = comp.extra
            self.grew += comp.grew
        self.compile_s += time.monotonic() - t0
        # the compile is a phase of its own, counted from its first batch after the script (the scan's
        # count is over)
        if self.reporting:
            self.handle.progress(len(self.changes), None, "compiling changes", restart=self.batches == 0)
            self.batches += 1

    def _one(
        self, ws: Any, archive: Any, comp: Compiler, msg: dict[str, Any], table_text: str | None
    ) -> None:
        path = _str(msg, "path", 4096)
        action = msg.get("action")
        if not path or action not in ("add", "modify", "delete"):
            raise BridgeError(ErrorCode.INTERNAL, "the worker sent a change without path or action")
        key = norm_path(path)  # a later frame of the same file replaces the earlier one, in its place
        try:  # one read (an `exists` first read the payload twice)
            old: bytes | None = ws.read(path)
        except BridgeError as exc:
            if exc.code is not ErrorCode.NOT_FOUND:
                raise
            old = None
        warnings = [str(x)[:500] for x in (msg.get("warnings") or [])][:50]
        self.warned[key] = len(warnings)
        meta: dict[str, Any] = {"warnings": warnings} if warnings else {}
        if action == "delete":
            if old is None:
                self.changes.pop(key, None)
                return
            old_text = table_text if norm_path(path) == STRINGTABLE else _old_text(archive, path, old)
            ch = Change(
                path,
                "delete",
                DELETED,
                diff=None if old_text is None else text_diff(path, old_text, None),
                meta=meta,
            )
            if old_text is None:
                ch.binary = {"old": {"size": len(old)}, "new": None}
        else:
            text = _str(msg, "text")
            b64 = _str(msg, "base64")
            if text is not None:
                payload = comp.compile(path, text)
            elif b64 is not None:
                payload = base64.b64decode(b64, validate=True)
            else:
                raise BridgeError(ErrorCode.INTERNAL, "the worker sent a change without content")
            if old is not None and payload == old:
                self.changes.pop(key, None)
                return
            ch = Change(
                path,
                "add" if old is None else "modify",
                payload,
                diff_of=None if text is None else _diff_of(archive, path, old, text, table_text),
                meta={**meta, "size": len(payload)},
            )
            if text is None:
                ch.binary = {
                    "old": None if old is None else {"size": len(old)},
                    "new": {"size": len(payload)},
                }
        req = msg.get("requires")
        if isinstance(req, list):
            ch.requires = tuple(str(r) for r in req[:1000])
        self.changes[key] = ch

    def create(self, summary: dict[str, Any]) -> dict[str, Any]:
        """The plan of every change compiled (with the grown string table as its own change), or no plan."""
        eng = self.runs.svc.engine
        task = eng.tasks.get(self.handle.task_id)
        changes = list(self.changes.values())
        with eng.lock:
            ws = self._ws()
            add_side_changes(ws, self.grown or {}, changes, self.grew)
            known = {c.key for c in changes}
            for ch in changes:  # a registration whose new file is not in the plan needs nothing
                ch.requires = tuple(r for r in ch.requires if r in known)
            if not changes:
                return {"planId": None, "changeCount": 0, "counts": {}, "warnings": [], "summary": summary}
            plan_warnings: list[PlanWarning] = []
            plan = eng.create_plan(
                PlanKind.SCRIPT,
                owner=self.caller,
                workspace_id=ws.id,
                revision=ws.revision,
                changes=changes,
                warnings=plan_warnings,
                on_apply=mirror_on_apply(ws),
                summary={**summary, "files": len(changes), "fileWarnings": sum(self.warned.values())},
                task=task,
            )
            return eng.get_plan(plan.id)


def _old_text(archive: Any, path: str, old: bytes) -> str | None:
    """The editable text of a file's payload before the run (None: it has none), as the worker printed it
    for its diffs before they moved here (`read_text` of that payload; the string table: `_table_listing`)."""
    return payload_text(archive, path, old)


def _table_listing(archive: Any) -> str | None:
    """`stringtable.bin`'s editable text (a listing of the table, not a decompile of its bytes)."""
    try:
        return archive.read_text(STRINGTABLE)
    except BridgeError:
        return None


def _diff_of(
    archive: Any, path: str, old: bytes | None, text: str, table_text: str | None
) -> Callable[[], str]:
    """The diff of a text change, computed when a preview first shows it (`Change.diff_of`, under the
    engine lock): the old side is decompiled from the payload the plan was built on — never the worker's
    word for it — and the new side is the text the parent compiled. `table_text` is the string table's
    listing taken before the plan's compiles (its text is the table's, which they grow)."""
    if old is None:
        return lambda: text_diff(path, None, text)
    if norm_path(path) == STRINGTABLE:
        return lambda: text_diff(path, table_text, text)
    return lambda: text_diff(path, _old_text(archive, path, old), text)


def runs_for(svc: Any, config_dir: Path | None = None) -> ScriptRuns:
    """The `ScriptRuns` of a service (one per engine, so the UI and every MCP client share it)."""
    runs = getattr(svc, "_script_runs", None)
    if runs is None:
        runs = ScriptRuns(svc, config_dir)
        svc._script_runs = runs
    elif config_dir is not None and runs.config_dir is None:
        runs.config_dir = config_dir
    return runs


__all__ = ["ScriptLimits", "ScriptRuns", "runs_for", "validate_source"]
