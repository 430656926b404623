"""PVF-EXPLAIN: the first page of `pvf_explain_file` on a large `.lst` (in process, no transport).

A synthetic classic (or `--family nkpi`) archive whose `equipment/equipment.lst` has ~24k entries
(`pvf synth --files 60000`, written once under --work); each sample explains the first page and the page
after it on a fresh resolver, as the tool does per call. Prints median/p99/min in ms and writes
bench/results/pvf_annotations[_nkpi].json. Run on a quiet machine; compare side by side with the code before a
change (e.g. its `git archive` on PYTHONPATH).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import summary_ms, write_result

LST = "equipment/equipment.lst"


def ensure_archive(work: Path, files: int, family: str) -> Path:
    archive = work / f"explain-{files}.pvf" if family == "classic" else work / f"explain-{family}-{files}.pvf"
    if not archive.exists():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "deskbridge",
                "pvf",
                "synth",
                "-o",
                str(archive),
                "--files",
                str(files),
                "-q",
            ],
            check=True,
        )
    return archive


async def measure(archive: Path, cache: Path, runs: int) -> dict[str, Any]:
    from deskbridge.core.events import EventBus
    from deskbridge.kinds.pvf.annotation_tools import AnnotationService
    from deskbridge.kinds.pvf.annotations import RuleStore
    from deskbridge.kinds.pvf.service import PvfService

    svc = PvfService(EventBus(), cache)
    info = await svc.open_archive(archive, caller="ui", options={}, epoch=0)
    ann = AnnotationService(svc, RuleStore(None))
    ws = info["workspaceId"]
    first: list[float] = []
    second: list[float] = []
    page = ann.explain(ws, LST, None, None, "en", None, 100)  # warm: imports, the archive's caches
    entries = page["sections"][0].get("tokenCount", len(page["sections"][0]["tokens"])) // 2
    for _ in range(runs):
        t0 = time.perf_counter()
        page = ann.explain(ws, LST, None, None, "en", None, 100)
        first.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        ann.explain(ws, LST, None, None, "en", page["nextCursor"], 100)
        second.append(time.perf_counter() - t0)
    await svc.engine.shutdown(timeout_s=10)
    if svc.index is not None:
        with contextlib.suppress(Exception):
            await asyncio.to_thread(svc.index.close)
    return {"entries": entries, "first_page": summary_ms(first), "next_page": summary_ms(second)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--work", type=Path, default=Path(".bench-data"))
    ap.add_argument("--files", type=int, default=60000)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--family", default="classic", choices=["classic", "nkpi"])
    args = ap.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    archive = ensure_archive(args.work.resolve(), args.files, args.family)
    out = asyncio.run(measure(archive, args.work.resolve() / "cache", args.runs))
    out["family"] = args.family
    out["load_average"] = os.getloadavg()
    print(out)
    write_result("pvf_annotations" if args.family == "classic" else f"pvf_annotations_{args.family}", out)


if __name__ == "__main__":
    main()
