"""PVF-SCRIPT (TARGETS.md): the seed's price-raise script over every equipment file, time to plan and to apply.

    python bench/pvf_scripts.py [--archive classic-200k|classic-20k|small|nkpi-1m] [--floor N] [--glob PATTERN]

The script runs as it does for an MCP client: a core write task, the sandboxed QuickJS worker, the plan
compiled by the workspace. Reported: files scanned and changed, run → plan seconds (and ms per scanned file),
apply seconds, the worker's peak RSS (VmHWM, sampled from /proc while it runs), the worker's CPU seconds
(user + system of the reaped child: less sensitive to the machine's load than wall time) and the load.

    python bench/pvf_scripts.py --in-process [--dump-changes FILE] [--profile FILE]

runs the worker's host in this process instead (no sandbox, no plan): its phase timings and the change
frames it would send — their digest, or all of them in FILE to compare two versions byte for byte.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result
from pvf_format import ensure

PRESETS = {
    "classic-200k": ("classic", 200_000),
    "classic-20k": ("classic", 20_000),
    "small": ("classic", 2_000),
    "nkpi-1m": ("nkpi", 1_000_000),
}

PRICE_RAISE = """
let n = 0, scanned = 0;
const files = pvf.glob(GLOB);
for (const f of files) {
  const doc = f.parse();
  scanned++;
  let changed = false;
  for (const s of doc.sections("price")) {
    const v = s.getValue(0);
    if (typeof v === "number" && v < FLOOR) { s.set(FLOOR, 0); changed = true; }
  }
  if (changed) { f.write(doc); n++; }
  if (scanned % 1000 === 0) pvf.progress(scanned, files.length, "raising prices");
}
pvf.log(JSON.stringify({scanned, changed: n}));
"""


def _hwm(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


async def bench(path: Path, floor: int, pattern: str) -> dict[str, Any]:
    from deskbridge.core.events import EventBus
    from deskbridge.core.plans import PlanKind
    from deskbridge.kinds.pvf.scripting.runner import ScriptLimits, runs_for
    from deskbridge.kinds.pvf.service import PvfService

    with tempfile.TemporaryDirectory() as cache:
        svc = PvfService(EventBus(), Path(cache))
        t0 = time.perf_counter()
        info = await svc.open_archive(path, caller="cli", options={}, epoch=0)
        opened_s = time.perf_counter() - t0
        if svc.index is not None and svc.index.task_id:
            svc.engine.tasks.cancel(svc.index.task_id, "ui")  # the content index is not part of this figure
        runs = runs_for(svc)
        runs.limits = ScriptLimits(wall_s=3600)
        source = PRICE_RAISE.replace("GLOB", repr(pattern)).replace("FLOOR", str(floor))
        ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t1 = time.perf_counter()
        task = runs.start("mcp:bench", info["workspaceId"], info["revision"], source, "bench")
        peak = 0
        while not task.state.finished:
            w = runs.workers.get(task.id)
            if w is not None:
                peak = max(peak, _hwm(w.proc.pid))
            await asyncio.sleep(0.2)
        plan_s = time.perf_counter() - t1
        ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)  # the worker, reaped when the run ended
        worker_cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
        st = svc.engine.tasks.status(task.id)
        assert st["state"] == "succeeded", st
        import json

        logged = json.loads(st["log"]["entries"][-1]["text"])
        plan_id = st["result"]["planId"]
        out: dict[str, Any] = {
            "openSeconds": round(opened_s, 3),
            "scanned": logged["scanned"],
            "changedFiles": logged["changed"],
            "planSeconds": round(plan_s, 3),
            "planMsPerScannedFile": round(plan_s * 1000 / max(1, logged["scanned"]), 4),
            "workerPeakRssMiB": round(peak / (1 << 20), 1),
            "workerCpuSeconds": round(worker_cpu, 3),
            "workerCpuMsPerScannedFile": round(worker_cpu * 1000 / max(1, logged["scanned"]), 4),
            # where the wall time goes: the worker's phases (as it measured them) and the parent's compile
            "workerPhaseSeconds": st["result"]["summary"].get("workerSeconds"),
            "workerWallSeconds": st["result"]["summary"].get("runSeconds"),
            "parentCompileSeconds": st["result"].get("compileSeconds"),
            "parentAfterDoneSeconds": st["result"]["summary"].get("afterDoneSeconds"),
            "loadAverage": os.getloadavg(),
        }
        phases = out["workerPhaseSeconds"] or {}
        if out["workerWallSeconds"] is not None and "script" in phases:
            # from the end of the script to the plan: the worker's finish (sending the changes while the parent
            # compiles them) and its exit, then what the parent did after `done` (worker start-up counts too)
            out["afterScriptSeconds"] = round(
                out["workerWallSeconds"]
                - phases.get("open", 0)
                - phases["script"]
                + (out["parentAfterDoneSeconds"] or out["parentCompileSeconds"] or 0),
                3,
            )
        if plan_id:
            keys = list(svc.engine.plans.get(plan_id, PlanKind.SCRIPT).changes)
            t2 = time.perf_counter()
            svc.engine.apply_plan(
                plan_id, caller="mcp:bench", change_keys=keys, expected_revision=info["revision"]
            )
            out["applySeconds"] = round(time.perf_counter() - t2, 3)
            out["appliedChanges"] = len(keys)
        await svc.engine.shutdown(timeout_s=30)
        if svc.index is not None:
            svc.index.close()
        return out


_DETECT = "import sys; from deskbridge.kinds.pvf.archive import open_archive; print(open_archive(sys.argv[1]).encoding)"


def in_process(path: Path, floor: int, pattern: str, dump: str | None, profile: str | None) -> dict[str, Any]:
    """The worker's `Host` run in this process (no sandbox, no parent): its phase timings, the change frames
    it would send (their sha256, and all of them one a line in `dump` to compare two versions byte for
    byte) and, with `profile`, a cProfile of the run written to that file."""
    import cProfile
    import hashlib
    import json

    from deskbridge.kinds.pvf.scripting.host import Host

    class Frames:
        def __init__(self) -> None:
            self.frames: list[str] = []

        def send(self, msg: dict[str, Any]) -> None:  # what `worker.Pipe` writes, without the length prefix
            self.frames.append(json.dumps(msg, ensure_ascii=False, separators=(",", ":")))

    # What the workspace detected, as `runner` passes it; found in a child process, so a profile or an
    # instruction count of this process (callgrind without --trace-children) is the worker's work alone.
    detected = subprocess.run(
        [sys.executable, "-c", _DETECT, str(path)], check=True, capture_output=True, text=True
    ).stdout.strip()
    job = {
        "path": str(path),
        "detected_encoding": detected,
        "options": {},
        "overlay": {},
        "pool_tail": None,
        "source": PRICE_RAISE.replace("GLOB", repr(pattern)).replace("FLOOR", str(floor)),
        "filesets": {},
        "fileset_writes": False,
        "js_mem_bytes": 512 << 20,
        "cpu_s": 3600,
        "as_bytes": None,
        "max_changes": 1_000_000,
        "log_max_lines": 100_000,
        "docs_live": 4096,
        "log_max_bytes": 4 << 20,
    }
    pipe = Frames()
    t0, c0 = time.perf_counter(), time.process_time()
    host = Host(job, pipe)  # type: ignore[arg-type]
    prof = cProfile.Profile() if profile else None
    if prof is not None:
        prof.enable()
    host.run()
    if prof is not None:
        prof.disable()
        prof.dump_stats(profile)
    changes = [f for f in pipe.frames if f.startswith('{"t":"change"')]
    if dump:
        Path(dump).write_text("\n".join(changes) + "\n", encoding="utf-8")
    return {
        "inProcessSeconds": round(time.perf_counter() - t0, 3),
        "inProcessCpuSeconds": round(time.process_time() - c0, 3),
        "workerPhaseSeconds": json.loads(pipe.frames[-1])["timings"],
        "changeFrames": len(changes),
        "changeFramesSha256": hashlib.sha256("\n".join(changes).encode()).hexdigest(),
        "loadAverage": os.getloadavg(),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--archive", default="classic-200k", choices=sorted(PRESETS))
    ap.add_argument("--floor", type=int, default=10)
    ap.add_argument("--glob", default="equipment/**/*.equ")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="run the worker's host in this process (phase timings, change-frame digest); not the target figure",
    )
    ap.add_argument(
        "--dump-changes", metavar="FILE", help="with --in-process: write every change frame to FILE"
    )
    ap.add_argument(
        "--profile", metavar="FILE", help="with --in-process: write a cProfile of the run to FILE"
    )
    args = ap.parse_args()
    family, files = PRESETS[args.archive]
    path = ensure(args.archive, family, files)
    if args.in_process:
        print(in_process(path, args.floor, args.glob, args.dump_changes, args.profile))
        return
    result = asyncio.run(bench(path, args.floor, args.glob))
    data = {"archive": args.archive, "files": files, "floor": args.floor, "glob": args.glob, **result}
    target = (
        "PVF-SCRIPT: plan <= 0.05 ms per scanned file + 1 s; apply <= 1 s; worker memory <= 512 MiB "
        "(TARGETS.md)"
    )
    data["target"] = target
    print(data)
    write_result(f"pvf_scripts_{args.archive}", data)


if __name__ == "__main__":
    main()
