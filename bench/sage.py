"""SAGE index benchmarks (TARGETS.md): SAGE-COLD, SAGE-WARM, SAGE-INCR, SAGE-QUERY, SAGE-SNAP, SAGE-SCALE.

Data: RA3Afterdash indexed against EA's Red Alert 3 XML + schemas (`../shared/data/sage`). COLD and WARM
time whole processes (interpreter start to exit) in fresh subprocesses: COLD with an empty deskbridge home
(no schema cache, no records cache; it parses every file, compiles the XSDs and writes both caches, and
ends with the index ready to answer — the reference rows' columns are found per file when a query first
reads them, which the bench reports apart: the first find_references after a cold and after a warm start),
WARM with the caches COLD left. INCR edits one file of a copy of the mod and re-indexes it in process;
QUERY times find_asset / find_references in process; SNAP writes the public snapshot.
SCALE generates a Corona-sized project (see `make_scale_project`) and times a cold and a warm whole process,
a one-file re-index and the peak RSS on it.
Prints a table and writes `bench/results/sage.json`. Run with `nice`: the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, summary_ms, write_result

DATA = (ROOT / ".." / "shared" / "data" / "sage").resolve()
SDK = DATA / "ra3-sdk"
KW = DATA / "kw-sdk"
MOD = DATA / "mods" / "RA3Afterdash"
TARGETS_MS = {"SAGE-COLD": 500, "SAGE-WARM": 120, "SAGE-INCR": 100, "SAGE-QUERY": 1, "SAGE-SNAP": 1000}
SCALE_TARGETS = {"coldMs": 5000, "warmMs": 1000, "reindexMs": 100, "rssBytes": 600 * 2**20}
SCALE_MIN = {"assets": 38_000, "references": 98_000, "streams": 12}
KW_STREAMS = 12
ANCHORS = {
    "SAGE-COLD": "extension 3.80 s",
    "SAGE-WARM": "extension 1.38 s",
    "SAGE-INCR": "extension 568 ms",
    "SAGE-QUERY": "code-index MCP 10–42 ms",
    "SAGE-SNAP": "—",
    "SAGE-SCALE": "extension on Corona: cold 118 s, warm 10.9 s, re-index 2.0 s",
}

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
from deskbridge.kinds.sage.indexer import ProjectIndexer
service = ProjectIndexer(sys.argv[1], sys.argv[2])
index = service.open_sync()
service.save_cache()
in_process = round((time.perf_counter() - t0) * 1000, 1)
first = None
if len(sys.argv) > 3:  # after the measured process: what the first answer about references costs then
    from deskbridge.kinds.sage import queries
    t1 = time.perf_counter()
    queries.find_references(index, next(iter(index.by_id)))
    first = round((time.perf_counter() - t1) * 1000, 1)
def hwm():
    for line in open('/proc/self/status'):
        if line.startswith('VmHWM:'):
            return int(line.split()[1]) * 1024
print(json.dumps({"inProcessMs": in_process, "files": len(index.files),
                  "parsed": index.stats["parsedFiles"], "assets": index.stats["assetCount"],
                  "references": index.stats["referenceCount"], "maxRssBytes": hwm(), "firstRefsMs": first}))
"""


def bytecode_state() -> tuple[int, int]:
    """(deskbridge modules with a current compiled `.pyc`, modules): the cold and warm processes import
    from source, and compiling the modules a cold build imports costs ~30 ms of its serial start. Whether
    they are compiled depends on what last ran with bytecode writing on (a test's subprocess with a bare
    environment, an install): the figures are only comparable in the same state, so it is printed."""
    import importlib.util

    src = ROOT / "src" / "deskbridge"
    total = cached = 0
    for py in src.rglob("*.py"):
        total += 1
        try:
            pyc = Path(importlib.util.cache_from_source(str(py)))
            cached += pyc.stat().st_mtime >= py.stat().st_mtime
        except (OSError, NotImplementedError, ValueError):
            pass
    return cached, total


def run_child(home: Path, mod: Path = MOD, first_query: bool = False) -> tuple[float, dict[str, Any]]:
    env = {**os.environ, "DESKBRIDGE_HOME": str(home)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(mod), str(SDK), *(["first-query"] if first_query else [])],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    info = json.loads(out.stdout.strip().splitlines()[-1])
    # CPU time of the child: on a shared 2-core machine it says what the wall time would be unloaded.
    info["cpuMs"] = round((after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000, 1)
    return wall, info


def timeline(runs: int) -> None:
    """`--timeline`: cold processes with `DESKBRIDGE_SAGE_TRACE=1`; prints each process's events in ms from
    the spawn (all processes read one clock, CLOCK_MONOTONIC), then the median of every event over the runs."""
    per_event: dict[str, list[float]] = {}
    for run in range(runs):
        home = Path(tempfile.mkdtemp(prefix="sage-bench-home-"))
        try:
            env = {**os.environ, "DESKBRIDGE_HOME": str(home), "DESKBRIDGE_SAGE_TRACE": "1"}
            t0 = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-c", _CHILD, str(MOD), str(SDK)],
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            t_end = time.monotonic()
        finally:
            shutil.rmtree(home, ignore_errors=True)
        rows: list[tuple[float, str, str]] = []
        roles: dict[str, str] = {}
        firsts: dict[tuple[str, str], float] = {}
        for line in out.stderr.splitlines():
            if not line.startswith("sage-trace "):
                continue
            _tag, pid, who, clock, cpu, event = line.split(" ", 5)
            ms = (float(clock) - t0) * 1000
            if who != "parent":
                roles.setdefault(pid, f"{who}{sum(1 for r in roles.values() if r.startswith(who))}")
                who = roles[pid]
            rows.append((ms, who, event))
            word = event.split(" ")[0]
            firsts.setdefault((who, word), ms)
            firsts[(who, word + " (last)")] = ms
            # CPU the process had used by its last event (a forked child's count starts at the fork).
            firsts[(who, "CPU ms")] = float(cpu) * 1000
        rows.append(((t_end - t0) * 1000, "parent", "exit seen"))
        busy: dict[str, float] = {}
        began: dict[str, float] = {}
        for ms, who, event in rows:
            word = event.split(" ")[0]
            if word in ("batch-start", "finish-start"):
                began[who] = ms
            elif word in ("batch-end", "finish-end") and who in began:
                busy[who] = busy.get(who, 0.0) + ms - began.pop(who)
        for who, ms in busy.items():
            per_event.setdefault(f"{who} busy (sum of batches and finish chunks)", []).append(ms)
        print(
            f"run {run + 1}: {', '.join(f'{ms:.0f} {who} {ev}' for ms, who, ev in rows if 'batch' not in ev)}"
        )
        for (who, word), ms in firsts.items():
            per_event.setdefault(f"{who} {word}", []).append(ms)
        per_event.setdefault("parent exit seen", []).append((t_end - t0) * 1000)
    print(f"median over {runs} runs (ms from spawn; load {os.getloadavg()[0]:.2f}):")
    for key, values in sorted(per_event.items(), key=lambda kv: statistics.median(kv[1])):
        print(f"  {statistics.median(values):7.1f}  {key}")


def bench_cold_warm(runs: int, warm_per_cold: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    """`runs` cold processes, each followed by `warm_per_cold` warm ones on the caches it left.

    One warm sample per cold build gave few, noisy samples, and the first warm process right after a
    cold one was once measured slower (80 vs 55 ms in process, load 4.7); a person's warm start comes
    later, so WARM takes every warm run, and `firstWarmMs` reports the first ones apart."""
    cold, warm, cold_info, warm_info = [], [], {}, {}
    cold_cpu, warm_cpu, first_warm = [], [], []
    for _ in range(runs):
        home = Path(tempfile.mkdtemp(prefix="sage-bench-home-"))
        try:
            wall, cold_info = run_child(home)
            assert cold_info["parsed"] == cold_info["files"], cold_info
            cold.append(wall)
            cold_cpu.append(cold_info["cpuMs"])
            for n in range(max(1, warm_per_cold)):
                wall, warm_info = run_child(home)
                if n == 0:
                    first_warm.append(wall * 1000)
                assert warm_info["parsed"] == 0, warm_info
                warm.append(wall)
                warm_cpu.append(warm_info["cpuMs"])
        finally:
            shutil.rmtree(home, ignore_errors=True)
    # Not in the figures: one more cold process that then answers a first `find_references`, which builds the
    # definition tables and locates every reference row the cold build's workers left unlocated.
    home = Path(tempfile.mkdtemp(prefix="sage-bench-home-"))
    try:
        cold_info["firstRefsAfterColdMs"] = run_child(home, first_query=True)[1]["firstRefsMs"]
        run_child(home)  # warm: reads the cache that process saved
        cold_info["firstRefsAfterWarmMs"] = run_child(home, first_query=True)[1]["firstRefsMs"]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    cold_info["cpuMs"] = statistics.median(cold_cpu)
    warm_info["cpuMs"] = statistics.median(warm_cpu)
    warm_info["cpuMinMs"] = min(warm_cpu)
    warm_info["firstWarmMs"] = round(statistics.median(first_warm), 1)
    return ({**summary_ms(cold), **cold_info}, {**summary_ms(warm), **warm_info})


def _copy_tree(src: Path, dst: Path, rewrite: Any = None) -> None:
    """Copy a data tree (hard links when the filesystem allows), rewriting XML text with `rewrite`."""
    for dirpath, _dirs, files in os.walk(src):
        rel = Path(dirpath).relative_to(src)
        (dst / rel).mkdir(parents=True, exist_ok=True)
        for f in files:
            s, d = Path(dirpath) / f, dst / rel / f
            if rewrite is not None and f.casefold().endswith(".xml"):
                d.write_bytes(rewrite(s.read_bytes()))
                continue
            try:
                os.link(s, d)
            except OSError:
                shutil.copy2(s, d)


def make_scale_project(work: Path) -> Path:
    """A Corona-sized mod (≥ 38 k assets, ≥ 98 k references, ≥ 12 streams) made of the real data.

    `Mods/Corona/Data/RA3/` is a copy of EA's Red Alert 3 XML and `Data/KW/` one of the Kane's Wrath XML, each
    with its `DATA:` includes renamed into its folder (`DATA:RA3/…`, `DATA:KW/…`). `Data/Mod.xml` compiles the
    RA3 copy's static, global and audio streams and references the SDK's own `DATA:static.xml` (walked as
    visible-only, as for a mod without compiled manifests); the KW copy is split over twelve map-metadata
    (global) streams by its Static.xml and global.xml include lists."""
    mod = work / "Mods" / "Corona"
    data = mod / "Data"
    for game, src in (("RA3", SDK), ("KW", KW)):
        prefix = f"DATA:{game}/".encode()
        _copy_tree(
            src / "SageXml",
            data / game,
            lambda b, p=prefix: b.replace(b'source="DATA:', b'source="' + p).replace(
                b'href="DATA:', b'href="' + p
            ),
        )
    head = '<?xml version="1.0" encoding="utf-8"?>\n<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n<Includes>\n'
    tail = "</Includes>\n</AssetDeclaration>\n"
    (data / "Mod.xml").write_text(
        head
        + '<Include type="reference" source="DATA:static.xml" />\n'
        + '<Include type="all" source="RA3/Static.xml" />\n<Include type="all" source="RA3/global.xml" />\n'
        + '<Include type="all" source="RA3/Audio.xml" />\n'
        + tail,
        encoding="utf-8",
    )
    import re

    includes: list[str] = []
    for entry in ("Static.xml", "global.xml"):
        text = (KW / "SageXml" / entry).read_text(encoding="utf-8-sig")
        for kind, source in re.findall(r'<Include\s+type="(\w+)"\s+source="([^"]+)"', text):
            if source.casefold().startswith("art:") or source.casefold() in ("data:global.xml", "global.xml"):
                continue
            if source.casefold().startswith("data:"):
                source = "DATA:KW/" + source[5:]
            else:
                source = "../KW/" + source.replace("\\", "/")
            includes.append(f'<Include type="{kind}" source="{source}" />\n')
    maps = data / "additionalmaps"
    maps.mkdir(exist_ok=True)
    for n in range(KW_STREAMS):
        part = includes[n::KW_STREAMS]
        (maps / f"mapmetadata_KW{n + 1:02d}.xml").write_text(head + "".join(part) + tail, encoding="utf-8")
    # Like a real mod (Corona's phase A walks nearly all of its 7,540 files), keep only the copied files some
    # stream reaches: the rest of EA's trees (maps, test data, leftovers) would be 6,000 inactive files.
    from deskbridge.kinds.sage.indexer import ProjectIndexer

    saved = os.environ.get("DESKBRIDGE_HOME")
    os.environ["DESKBRIDGE_HOME"] = str(work / "prune-home")
    try:
        reached = set(ProjectIndexer(mod, SDK, use_cache=False).open_sync().files)
    finally:
        if saved is None:
            os.environ.pop("DESKBRIDGE_HOME", None)
        else:
            os.environ["DESKBRIDGE_HOME"] = saved
    for game in ("RA3", "KW"):
        for path in (data / game).rglob("*"):
            if path.is_file() and str(path) not in reached:
                path.unlink()
    return mod


def bench_scale(runs: int, samples: int) -> dict[str, Any]:
    """SAGE-SCALE: cold and warm whole processes, one-file re-index and peak RSS on the generated project."""
    from deskbridge.kinds.sage.indexer import ProjectIndexer

    work = Path(tempfile.mkdtemp(prefix="sage-bench-scale-"))
    try:
        mod = make_scale_project(work)
        cold, warm, cold_cpu, warm_cpu, rss = [], [], [], [], []
        for _ in range(runs):
            home = Path(tempfile.mkdtemp(prefix="sage-bench-home-"))
            try:
                wall, info = run_child(home, mod)
                assert info["parsed"] == info["files"], info
                cold.append(wall)
                cold_cpu.append(info["cpuMs"])
                rss.append(info["maxRssBytes"])
                wall, winfo = run_child(home, mod)
                assert winfo["parsed"] == 0, winfo
                warm.append(wall)
                warm_cpu.append(winfo["cpuMs"])
                rss.append(winfo["maxRssBytes"])
            finally:
                shutil.rmtree(home, ignore_errors=True)
        os.environ["DESKBRIDGE_HOME"] = str(work / "home")
        service = ProjectIndexer(mod, SDK)
        index = service.open_sync()
        streams = len(index.streams)
        target = mod / "Data" / "RA3" / "Allied" / "Units" / "AlliedScoutInfantry.xml"
        original = target.read_text(encoding="utf-8-sig")
        times = []
        for i in range(samples):
            target.write_text(original.replace('BuildCost="', f'BuildCost="{i}', 1), encoding="utf-8")
            t = time.perf_counter()
            index = service.reindex_sync([str(target)])
            times.append(time.perf_counter() - t)
            assert index.stats.get("patchedFiles") == 1
        # `--scale-runs 0` times no whole process: the counts come from this process's own build.
        return {
            "files": len(index.files),
            "assets": index.stats["assetCount"],
            "references": index.stats["referenceCount"],
            "streams": streams,
            "cold": {**summary_ms(cold), "cpuMs": statistics.median(cold_cpu)} if cold else None,
            "warm": {**summary_ms(warm), "cpuMs": statistics.median(warm_cpu)} if warm else None,
            "reindex": summary_ms(times) if times else None,
            "maxRssBytes": max(rss) if rss else None,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_incr(samples: int) -> dict[str, Any]:
    from deskbridge.kinds.sage.indexer import ProjectIndexer

    work = Path(tempfile.mkdtemp(prefix="sage-bench-mod-"))
    try:
        mod = work / "RA3Afterdash"
        shutil.copytree(MOD, mod)
        service = ProjectIndexer(mod, SDK, use_cache=False)
        service.open_sync()
        target = mod / "Data/Mod/Units/Tanya/WeaponTemplate.xml"
        original = target.read_text(encoding="utf-8")
        times, full = [], []
        for i in range(samples):
            target.write_text(
                original.replace('AttackRange="140.0"', f'AttackRange="{141 + i}.0"'), encoding="utf-8"
            )
            t = time.perf_counter()
            index = service.reindex_sync([str(target)])
            times.append(time.perf_counter() - t)
            assert index.stats.get("patchedFiles") == 1
        for _ in range(3):  # for comparison: a full re-walk from cached records (what a new include costs)
            t = time.perf_counter()
            service.build_sync()
            full.append(time.perf_counter() - t)
        return {**summary_ms(times), "fullRebuildFromRecords": summary_ms(full)}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def bench_query_and_snap(samples: int) -> tuple[dict[str, Any], dict[str, Any]]:
    from deskbridge.kinds.sage import queries
    from deskbridge.kinds.sage.indexer import ProjectIndexer
    from deskbridge.kinds.sage.snapshot import snapshot_json

    home = Path(tempfile.mkdtemp(prefix="sage-bench-home-"))
    os.environ["DESKBRIDGE_HOME"] = str(home)
    try:
        service = ProjectIndexer(MOD, SDK, use_cache=False)
        index = service.open_sync()
        rng = random.Random(1)
        ids = rng.sample(sorted({d.id for defs in index.by_id.values() for d in defs}), samples)
        fa, fr = [], []
        for ident in ids:
            t = time.perf_counter()
            queries.find_asset(index, ident)
            fa.append(time.perf_counter() - t)
            t = time.perf_counter()
            queries.find_references(index, ident)
            fr.append(time.perf_counter() - t)
        query = {
            "find_asset": summary_ms(fa),
            "find_references": summary_ms(fr),
            "median_ms": round(statistics.median([s * 1000 for s in fa + fr]), 4),
        }
        snaps = []
        path = None
        for _ in range(3):
            t = time.perf_counter()
            path = service.write_snapshot_sync()
            snaps.append(time.perf_counter() - t)
        assert path is not None
        leftovers = [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]
        raw = path.read_bytes()
        snap = {
            **summary_ms(snaps),
            "bytes": len(raw),
            "gzip": raw[:2] == b"\x1f\x8b",
            "atomic": not leftovers,
            "previousKept": (path.parent / "previous.json.gz").exists(),
            "jsonBytes": len(json.dumps(snapshot_json(index)).encode()),
        }
        return query, snap
    finally:
        shutil.rmtree(home, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5, help="cold process runs (default 5)")
    parser.add_argument(
        "--warm-per-cold", type=int, default=3, help="warm processes after each cold one (default 3)"
    )
    parser.add_argument("--incr", type=int, default=30, help="incremental re-index samples (default 30)")
    parser.add_argument("--queries", type=int, default=2000, help="query samples (default 2000)")
    parser.add_argument("--scale-runs", type=int, default=3, help="SAGE-SCALE cold/warm runs (default 3)")
    parser.add_argument("--only-scale", action="store_true", help="run SAGE-SCALE alone")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="print a cold build's per-process timeline (--runs runs) alone",
    )
    args = parser.parse_args()
    if args.timeline:
        timeline(args.runs)
        return
    if args.only_scale:
        scale = bench_scale(args.scale_runs, args.incr)
        print_scale(scale)
        return
    if not MOD.is_dir() or not SDK.is_dir():
        sys.exit(f"SAGE data not found under {DATA}")
    cold, warm = bench_cold_warm(args.runs, args.warm_per_cold)
    incr = bench_incr(args.incr)
    query, snap = bench_query_and_snap(args.queries)
    results = {
        "SAGE-COLD": cold,
        "SAGE-WARM": warm,
        "SAGE-INCR": incr,
        "SAGE-QUERY": query,
        "SAGE-SNAP": snap,
    }
    load = os.getloadavg()
    compiled, modules = bytecode_state()
    print(f"load average {load[0]:.2f} on {os.cpu_count()} cores (wall times stretch with the load)")
    print(
        f"bytecode: {compiled} of {modules} deskbridge modules compiled"
        f"{' (PYTHONDONTWRITEBYTECODE set)' if os.environ.get('PYTHONDONTWRITEBYTECODE') else ''}"
        " — cold figures taken with and without it differ by the compile (~30 ms)"
    )
    print(f"{'id':<11} {'median':>10} {'min':>10} {'target':>9}  verdict  anchor")
    for key, res in results.items():
        if key == "SAGE-SCALE":
            continue
        med = res["median_ms"]
        target = TARGETS_MS[key]
        mn = res.get("min_ms", res.get("find_asset", {}).get("min_ms", med))
        verdict = "PASS" if med <= target else "MISS"
        print(f"{key:<11} {med:>8.3f}ms {mn:>8.3f}ms {target:>7}ms  {verdict:<7}  {ANCHORS[key]}")
    print(
        f"CPU time of one process: cold {cold['cpuMs']:.0f} ms, warm {warm['cpuMs']:.0f} ms "
        f"(min {warm['cpuMinMs']:.0f}); first warm process after each cold one: {warm['firstWarmMs']:.0f} ms"
    )
    print(
        f"not in COLD (index ready to answer): the first find_references after a cold build "
        f"{cold['firstRefsAfterColdMs']:.0f} ms in process (locates every reference, builds the tables), "
        f"after a warm start {cold['firstRefsAfterWarmMs']:.0f} ms"
    )
    print(
        f"cold: {cold['files']} files, {cold['assets']} assets, {cold['references']} references, "
        f"max RSS {cold['maxRssBytes'] / 2**20:.0f} MiB; snapshot {snap['bytes'] / 2**20:.2f} MiB gzip"
    )
    scale = bench_scale(args.scale_runs, args.incr)
    results["SAGE-SCALE"] = scale
    print_scale(scale)
    out = write_result(
        "sage",
        {
            "machine": {
                "cpus": os.cpu_count(),
                "python": sys.version.split()[0],
                "loadAverage1m": round(load[0], 2),
                "bytecodeCompiledModules": [compiled, modules],
            },
            "targetsMs": TARGETS_MS,
            "results": results,
        },
    )
    print(f"wrote {out}")


def print_scale(scale: dict[str, Any]) -> None:
    load = os.getloadavg()
    print(
        f"SAGE-SCALE  {scale['files']} files, {scale['assets']} assets, {scale['references']} references, "
        f"{scale['streams']} streams (need ≥ {SCALE_MIN['assets']}, ≥ {SCALE_MIN['references']}, "
        f"≥ {SCALE_MIN['streams']}); load average {load[0]:.2f}"
    )
    cold, warm, reindex, rss = scale["cold"], scale["warm"], scale["reindex"], scale["maxRssBytes"]
    rows = [
        ("cold", cold and cold["median_ms"], SCALE_TARGETS["coldMs"], cold and f"cpu {cold['cpuMs']:.0f} ms"),
        ("warm", warm and warm["median_ms"], SCALE_TARGETS["warmMs"], warm and f"cpu {warm['cpuMs']:.0f} ms"),
        ("re-index", reindex and reindex["median_ms"], SCALE_TARGETS["reindexMs"], "one file, in process"),
        ("max RSS", rss and rss / 2**20, SCALE_TARGETS["rssBytes"] / 2**20, "MiB"),
    ]
    for name, value, target, note in rows:
        if value is None:
            print(f"  {name:<9} {'not run':>14} target {target:>7.0f}  (--scale-runs 0 / --incr 0)")
            continue
        verdict = "PASS" if value <= target else "MISS"
        print(
            f"  {name:<9} {value:>10.1f} {'ms' if name != 'max RSS' else 'MiB':<3} target {target:>7.0f}  {verdict}  {note}"
        )
    print(f"  anchor: {ANCHORS['SAGE-SCALE']}")


if __name__ == "__main__":
    main()
