"""Issue 14's done-when: the seed's example end to end over the real stdio transport on a large archive.

    python bench/pvf_script_mcp.py [--archive nkpi-1m|classic-200k|...] [--floor N] [--glob PATTERN]
                                   [--select N]

The official `mcp` client launches `deskbridge mcp --kind pvf` (as an agent's client does) with its own
`DESKBRIDGE_HOME`, and runs open → pvf_script_validate → pvf_script_run → pvf_script_status (polled) →
pvf_plan_preview → pvf_plan_apply (the first `--select` changes the preview pages list: a partial
selection) → pvf_archive_save → `deskbridge pvf verify`, on a copy of the archive (the save writes it).
Each step's wall seconds go to `bench/results/pvf_script_mcp_<archive>.json` with the load average; the
run's own figures (scanned, changes, the worker's phases) come from its status.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import write_result
from pvf_format import ensure
from pvf_scripts import PRESETS, PRICE_RAISE


async def flow(archive: Path, home: Path, source: str, select: int) -> dict[str, Any]:
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "DESKBRIDGE_HOME": str(home)}
    subprocess.run(
        [sys.executable, "-m", "deskbridge", "config", "set", "require_approval", "false"],
        env=env,
        check=True,
        capture_output=True,
    )
    steps: dict[str, float] = {}
    out: dict[str, Any] = {"steps": steps}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deskbridge", "mcp", "--kind", "pvf"], env=env
    )
    async with Client(params) as client:

        async def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
            result = await client.call_tool(name, args)
            if result.is_error:
                raise RuntimeError(f"{name}: {result.structured_content or result.content}")
            return result.structured_content

        async def settle(first: dict[str, Any], poll: str = "pvf_task_status") -> dict[str, Any]:
            st = first
            while st["state"] not in ("succeeded", "failed", "cancelled"):
                await asyncio.sleep(0.2)
                st = await call(poll, {"taskId": st["taskId"]})
            return st

        info = await call("pvf_workspace_info", {})
        t = time.perf_counter()
        st = await settle(
            await call(
                "pvf_archive_open", {"path": str(archive), "expectedWorkspaceEpoch": info["workspaceEpoch"]}
            )
        )
        steps["open"] = time.perf_counter() - t
        assert st["state"] == "succeeded", st
        info = await call("pvf_workspace_info", {})
        ws, rev = info["workspaceId"], info["revision"]

        t = time.perf_counter()
        ok = await call("pvf_script_validate", {"source": source})
        steps["validate"] = time.perf_counter() - t
        assert ok["ok"] is True, ok

        t = time.perf_counter()
        task = (await call("pvf_script_run", {"workspaceId": ws, "expectedRevision": rev, "source": source}))[
            "taskId"
        ]
        steps["run"] = time.perf_counter() - t
        polls, cursor, logs = 0, None, []
        while True:
            st = await call(
                "pvf_script_status", {"taskId": task, **({"logCursor": cursor} if cursor else {})}
            )
            polls += 1
            logs += [e["text"] for e in st["log"]["entries"]]
            cursor = st["log"]["nextCursor"] or cursor
            if st["state"] in ("succeeded", "failed", "cancelled"):
                break
            await asyncio.sleep(0.5)
        steps["runToPlan"] = time.perf_counter() - t
        out["statusPolls"] = polls
        out["runState"] = st["state"]
        out["log"] = logs[-3:]
        if st["state"] != "succeeded":
            out["error"] = st.get("error")
            return out
        result = st["result"]
        out["changes"] = result["changes"]
        out["scanned"] = result["summary"].get("scanned")
        out["workerSeconds"] = result["summary"].get("workerSeconds")
        out["compileSeconds"] = result.get("compileSeconds")
        plan_id = st["planId"]

        t = time.perf_counter()
        keys, cursor, pages = [], None, 0
        while len(keys) < select:
            page = await call(
                "pvf_plan_preview",
                {"planId": plan_id, "limit": 200, **({"cursor": cursor} if cursor else {})},
            )
            pages += 1
            if pages == 1:
                steps["previewFirstPage"] = time.perf_counter() - t
            keys += [i["changeKey"] for i in page["items"]]
            cursor = page["nextCursor"]
            if not cursor:
                break
        steps["preview"] = time.perf_counter() - t
        out["previewPages"] = pages
        chosen = keys[:select]

        t = time.perf_counter()
        done = await call(
            "pvf_plan_apply", {"planId": plan_id, "expectedRevision": rev, "changeKeys": chosen}
        )
        steps["apply"] = time.perf_counter() - t
        out["applied"] = done["applied"]

        t = time.perf_counter()
        st = await settle(
            await call("pvf_archive_save", {"workspaceId": ws, "expectedRevision": done["revision"]})
        )
        steps["save"] = time.perf_counter() - t
        assert st["state"] == "succeeded", st

    t = time.perf_counter()
    verified = subprocess.run(
        [sys.executable, "-m", "deskbridge", "pvf", "verify", str(archive), "-q"],
        env=env,
        capture_output=True,
        text=True,
    )
    steps["verify"] = time.perf_counter() - t
    out["verifyExit"] = verified.returncode
    out["verifyOutput"] = (verified.stdout + verified.stderr)[-400:]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--archive", default="nkpi-1m", choices=sorted(PRESETS))
    ap.add_argument("--floor", type=int, default=10)
    ap.add_argument("--glob", default="equipment/**/*.equ")
    ap.add_argument(
        "--select", type=int, default=1000, help="how many changes to apply (a partial selection)"
    )
    args = ap.parse_args()
    family, files = PRESETS[args.archive]
    src = ensure(args.archive, family, files)
    source = PRICE_RAISE.replace("GLOB", repr(args.glob)).replace("FLOOR", str(args.floor))
    with tempfile.TemporaryDirectory(dir=src.parent) as tmp:
        archive = Path(tmp) / src.name
        shutil.copyfile(src, archive)  # the save writes it
        home = Path(tmp) / "home"
        home.mkdir()
        load = os.getloadavg()
        t = time.perf_counter()
        result = asyncio.run(flow(archive, home, source, args.select))
        result["totalSeconds"] = round(time.perf_counter() - t, 3)
    result["steps"] = {k: round(v, 3) for k, v in result["steps"].items()}
    data = {
        "archive": args.archive,
        "glob": args.glob,
        "floor": args.floor,
        "loadAverageBefore": load,
        "loadAverageAfter": os.getloadavg(),
        **result,
    }
    print(data)
    write_result(f"pvf_script_mcp_{args.archive}", data)


if __name__ == "__main__":
    main()
