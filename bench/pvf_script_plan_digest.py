"""A byte-exact digest of the plan the PVF-SCRIPT price-raise run builds, to compare two versions of the code.

    python bench/pvf_script_plan_digest.py [--archive classic-200k] OUT.json [--frames FRAMES.pickle]

Runs `bench/pvf_scripts.py`'s script as an MCP client would (a core write task, the sandboxed worker, the
plan) and writes, per change in plan order: key, action, sha256 of the payload, requires, meta, binary, the
sha256 of `Change.diff`, and every preview page (default limit and byte budget) as the tool returns it; plus
the plan's warnings, counts and summary without its timings. Two runs of the same code give the same file;
`cmp` (or `diff`) of the files of two versions says whether the plan changed. `--frames` also keeps the
worker's frames (to replay the parent's side while profiling it).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pvf_format import ensure
from pvf_scripts import PRESETS, PRICE_RAISE

_TIMINGS = {"runSeconds", "workerSeconds", "compileSeconds", "afterDoneSeconds"}


def _sha(data: Any) -> str:
    raw = data if isinstance(data, bytes) else repr(data).encode()
    return hashlib.sha256(raw).hexdigest()


async def digest(path: Path, floor: int, pattern: str, frames_out: Path | None) -> dict[str, Any]:
    from deskbridge.core.events import EventBus
    from deskbridge.core.plans import PlanKind
    from deskbridge.core.workspace import DELETED
    from deskbridge.kinds.pvf.scripting import runner
    from deskbridge.kinds.pvf.service import PvfService

    frames: list[Any] = []
    if frames_out is not None:

        class Recording(runner.Worker):
            def __init__(self, *a: Any, **kw: Any) -> None:
                super().__init__(*a, **kw)
                put = self.frames.put

                def record(msg: Any, *pa: Any, **pkw: Any) -> None:
                    frames.append(msg)
                    put(msg, *pa, **pkw)

                self.frames.put = record  # type: ignore[method-assign]

        runner.Worker = Recording  # type: ignore[misc]

    with tempfile.TemporaryDirectory() as cache:
        svc = PvfService(EventBus(), Path(cache))
        info = await svc.open_archive(path, caller="cli", options={}, epoch=0)
        if svc.index is not None and svc.index.task_id:
            svc.engine.tasks.cancel(svc.index.task_id, "ui")
        runs = runner.runs_for(svc)
        runs.limits = runner.ScriptLimits(wall_s=3600)
        source = PRICE_RAISE.replace("GLOB", repr(pattern)).replace("FLOOR", str(floor))
        task = runs.start("mcp:bench", info["workspaceId"], info["revision"], source, "bench")
        while not task.state.finished:
            await asyncio.sleep(0.2)
        st = svc.engine.tasks.status(task.id)
        assert st["state"] == "succeeded", st
        result = {k: v for k, v in st["result"].items() if k not in _TIMINGS and k != "planId"}
        result["summary"] = {k: v for k, v in result["summary"].items() if k not in _TIMINGS}
        out: dict[str, Any] = {"result": result, "changes": [], "pages": []}
        plan_id = st["result"]["planId"]
        if plan_id:
            eng = svc.engine
            plan = eng.plans.get(plan_id, PlanKind.SCRIPT)
            info_ = eng.get_plan(plan_id)
            out["plan"] = {
                k: v
                for k, v in info_.items()
                if k not in ("planId", "created", "expiresIn", "workspaceId", "summary")
            }
            out["plan"]["summary"] = {k: v for k, v in info_["summary"].items() if k not in _TIMINGS}
            for c in plan.changes.values():
                out["changes"].append(
                    {
                        "key": c.key,
                        "action": c.action,
                        "new": "DELETED" if c.new is DELETED else _sha(c.new),
                        "requires": list(c.requires),
                        "meta": c.meta,
                        "binary": c.binary,
                        "diff": None if c.diff is None else _sha(c.diff.encode()),
                    }
                )
            cursor = None
            while True:
                page = eng.preview_plan(plan_id, cursor, kind=PlanKind.SCRIPT)
                page.pop("planId")
                page.pop("workspaceId")
                cursor = page.pop("nextCursor")
                out["pages"].append(_sha(json.dumps(page, sort_keys=True, ensure_ascii=False).encode()))
                if cursor is None:
                    break
        await svc.engine.shutdown(timeout_s=30)
        if svc.index is not None:
            svc.index.close()
    if frames_out is not None:
        frames_out.write_bytes(pickle.dumps(frames, protocol=pickle.HIGHEST_PROTOCOL))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out", type=Path)
    ap.add_argument("--archive", default="classic-200k", choices=sorted(PRESETS))
    ap.add_argument("--floor", type=int, default=10)
    ap.add_argument("--glob", default="equipment/**/*.equ")
    ap.add_argument("--frames", type=Path)
    args = ap.parse_args()
    family, files = PRESETS[args.archive]
    path = ensure(args.archive, family, files)
    data = asyncio.run(digest(path, args.floor, args.glob, args.frames))
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False, sort_keys=True) + "\n")
    print(f"{args.out}: {len(data['changes'])} changes, {len(data['pages'])} preview pages")


if __name__ == "__main__":
    main()
