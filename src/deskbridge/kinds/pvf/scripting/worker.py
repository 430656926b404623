"""The sandboxed worker process of a `.pvf.js` run: QuickJS (quickjs-ng) over the archive, read-only.

Started by `runner.py` as `python -I -c <bootstrap>` with an empty environment, stdin/stdout as its only pipe
and stderr for a crash report. It reads one job (pickled: it comes from the trusted parent), opens the
archive read-only through the format library, stages the workspace's unsaved overlay so the script sees
what the person sees, then locks itself down before any script code runs:

* `prctl(PR_SET_NO_NEW_PRIVS)` (Linux) — no privilege gain through exec;
* `setrlimit`: address space (`RLIMIT_AS`), CPU seconds, no new processes (`RLIMIT_NPROC` 0; root ignores
  it, the script has no way to fork anyway), and `RLIMIT_NOFILE` at the descriptors already open, so the
  worker cannot open another file even if the engine were subverted;
* QuickJS with its own memory limit and stack limit. The engine has no `std`/`os` modules, no `require`, no
  module loader (`import()` rejects), no timers and no network; the only way out is the host function
  installed by `prelude.js`, which takes and returns JSON strings.

Messages to the parent are frames on stdout (4-byte big-endian length + UTF-8 JSON; never pickle in this
direction, the parent treats them as untrusted data): `log`, `progress`, `change`, `done`, `error`.
The wall-clock limit and cancellation are the parent's: it kills the process. (Both QuickJS bindings refuse
host calls while an in-engine time limit is set, so no in-engine limit is used.)
"""

from __future__ import annotations

import json
import os
import pickle
import re
import struct
import sys
from typing import Any

_FRAME = struct.Struct(">I")
LOG_MAX_BYTES = 4 << 20
"""Log text one run may write; past it the run is stopped (LIMIT_EXCEEDED): a flood is a bug or an attack."""
LOG_MAX_LINES = 100_000
CHANGE_FRAME_MAX = 32 << 20


class ScriptError(Exception):
    def __init__(self, code: str, message: str, **data: Any) -> None:
        super().__init__(message)
        self.code = code
        self.data = data


# --------------------------------------------------------------------------------------------- pipe


class Pipe:
    def __init__(self, out: Any) -> None:
        self.out = out

    def send(self, msg: dict[str, Any]) -> None:
        raw = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.out.write(_FRAME.pack(len(raw)) + raw)
        self.out.flush()


def read_job(inp: Any) -> dict[str, Any]:
    head = inp.read(_FRAME.size)
    (n,) = _FRAME.unpack(head)
    return pickle.loads(inp.read(n))  # the parent's job: trusted (never sent in the other direction)


# --------------------------------------------------------------------------------------------- sandbox


def lock_down(job: dict[str, Any]) -> None:
    import resource

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_no_new_privs = 38
        if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    limits = [
        (resource.RLIMIT_CPU, int(job["cpu_s"])),
        (resource.RLIMIT_NPROC, 0),
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_FSIZE, 0),
    ]
    if job.get("as_bytes"):
        limits.append((resource.RLIMIT_AS, int(job["as_bytes"])))
    for which, value in limits:
        _soft, hard = resource.getrlimit(which)
        cap = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (cap, cap))
    highest = max(int(fd) for fd in os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 64
    resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, highest + 1))


# --------------------------------------------------------------------------------------------- glob


def glob_regex(pattern: str) -> re.Pattern[str]:
    """pvfine's glob: case-insensitive, `*` and `?` stay within one folder, `**` crosses folders
    (`a/**/b` also matches `a/b`)."""
    pat = pattern.replace("\\", "/").lstrip("/")
    out = []
    i = 0
    while i < len(pat):
        c = pat[i]
        if pat.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pat.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out), re.IGNORECASE | re.DOTALL)


# --------------------------------------------------------------------------------------------- main


def main() -> int:
    out = os.fdopen(os.dup(1), "wb")
    # Nothing but frames on the protocol descriptor: stray prints (a library's) go to stderr.
    os.dup2(2, 1)
    pipe = Pipe(out)
    try:
        job = read_job(sys.stdin.buffer)
    except Exception as exc:
        pipe.send({"t": "error", "code": "INTERNAL", "message": f"bad job: {exc}"})
        return 2
    try:
        if job.get("mode") == "validate":
            lock_down(job)
            pipe.send({"t": "done", "diagnostics": validate(job["source"], job)})
            return 0
        from deskbridge.kinds.pvf.scripting.host import Host

        host = Host(job, pipe)
        lock_down(job)
        host.run()
    except ScriptError as exc:
        pipe.send({"t": "error", "code": exc.code, "message": str(exc), **exc.data})
        return 1
    except MemoryError:
        pipe.send({"t": "error", "code": "LIMIT_EXCEEDED", "message": "the worker ran out of memory"})
        return 1
    except Exception as exc:  # a host bug, reported (the parent keeps the workspace untouched)
        code = getattr(exc, "code", None)
        name = getattr(code, "value", None) or "INTERNAL"
        pipe.send({"t": "error", "code": str(name), "message": f"{type(exc).__name__}: {exc}"})
        return 1
    return 0


_POS = re.compile(r"at <input>:(\d+):(\d+)")
_FRAME_POS = re.compile(r"at anonymous \(<input>:(\d+):(\d+)\)")


def js_error(exc: Exception, line_offset: int = 0) -> dict[str, Any]:
    """A QuickJS exception → {message, line, column, stack} (line/column in the script's source)."""
    text = str(exc)
    first = text.splitlines()[0] if text else type(exc).__name__
    # A runtime error: the script's own frame is the function built from its source ("anonymous");
    # a syntax error: "at <input>:line:column".
    m = _FRAME_POS.search(text) or _POS.search(text)
    out: dict[str, Any] = {"message": first}
    if m:
        out["line"] = max(1, int(m.group(1)) - line_offset)
        out["column"] = int(m.group(2))
    return out


def validate(source: str, job: dict[str, Any]) -> list[dict[str, Any]]:
    """Syntax diagnostics: the source is compiled as a function body (`new Function`), never run."""
    import quickjs

    ctx = quickjs.Context()
    ctx.set_memory_limit(int(job["js_mem_bytes"]))
    ctx.set_max_stack_size(1 << 20)
    ctx.set("__src", source)
    try:
        ctx.eval("new Function(__src); undefined")
    except Exception as exc:
        d = js_error(exc, line_offset=2)  # QuickJS puts the body 2 lines down: "(function anonymous(\n) {\n"
        return [{"severity": "error", **d}]
    return []


if __name__ == "__main__":
    sys.exit(main())
