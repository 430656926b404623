"""MCP-LAT and MCP-LOAD (TARGETS.md): one small read over Streamable HTTP, and 32 concurrent clients for 30 s.

MCP-LAT also runs the reference `@modelcontextprotocol/server-filesystem` (Node) side by side: `deskbridge mcp PATH`,
`deskbridge mcp --project PATH` (the bridge, answering in-process) and the peer read the same file over stdio
through the same SDK client, alternating, and the ratio is printed.

    python bench/mcp_latency.py [--calls 500] [--load-seconds 30] [--clients 32]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, rss_bytes, served, summary_ms, write_result

PEER_DIR = ROOT / ".tools" / "peers"
PEER_PKG = "@modelcontextprotocol/server-filesystem"
PROTOCOL = "2026-07-28"


def call_body(request_id: int, path: str) -> dict:
    meta = {
        "io.modelcontextprotocol/protocolVersion": PROTOCOL,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
    }
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "probe_read_file", "arguments": {"path": path}, "_meta": meta},
    }


def headers(port: int, token: str) -> dict[str, str]:
    return {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
        "MCP-Protocol-Version": PROTOCOL,
        "Mcp-Method": "tools/call",
        "Mcp-Name": "probe_read_file",
    }


def ok(response: httpx2.Response) -> bool:
    if response.status_code != 200:
        return False
    text = response.text
    payload = text[text.index("{") :] if text.startswith(("event:", "data:")) else text
    payload = payload.strip().splitlines()[0] if "\n" in payload else payload
    return '"isError":false' in payload.replace(" ", "") or '"isError"' not in payload


async def http_latency(port: int, token: str, calls: int) -> dict:
    url = f"http://127.0.0.1:{port}/mcp"
    samples = []
    async with httpx2.AsyncClient(headers=headers(port, token)) as http:
        for i in range(calls + 50):
            start = time.perf_counter()
            response = await http.post(url, json=call_body(i, "note.txt"))
            elapsed = time.perf_counter() - start
            if not ok(response):
                raise RuntimeError(f"bad response: {response.status_code} {response.text[:200]}")
            if i >= 50:
                samples.append(elapsed)
    return summary_ms(samples)


async def load(port: int, token: str, pid: int, clients: int, seconds: float) -> dict:
    url = f"http://127.0.0.1:{port}/mcp"
    latencies: list[float] = []
    errors = 0
    # Warm up, then take the RSS baseline: growth is measured over the steady run.
    async with httpx2.AsyncClient(headers=headers(port, token)) as http:
        for i in range(200):
            await http.post(url, json=call_body(i, "note.txt"))
    rss_start = rss_bytes(pid)
    stop_at = time.monotonic() + seconds

    async def worker(n: int) -> None:
        nonlocal errors
        async with httpx2.AsyncClient(headers=headers(port, token), timeout=10) as http:
            i = 0
            while time.monotonic() < stop_at:
                i += 1
                start = time.perf_counter()
                try:
                    response = await http.post(url, json=call_body(i, "note.txt"))
                    good = ok(response)
                except httpx2.HTTPError:
                    good = False
                latencies.append(time.perf_counter() - start)
                errors += 0 if good else 1

    await asyncio.gather(*(worker(n) for n in range(clients)))
    rss_end = rss_bytes(pid)
    stats = summary_ms(latencies)
    return {
        **stats,
        "clients": clients,
        "seconds": seconds,
        "requests": len(latencies),
        "errors": errors,
        "throughput_rps": round(len(latencies) / seconds, 1),
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_end_mb": round(rss_end / 2**20, 1),
        "rss_growth_pct": round((rss_end - rss_start) / rss_start * 100, 2) if rss_start else None,
    }


WRK_SCRIPT = """wrk.method = "POST"
wrk.body = '{body}'
{headers}
"""


def _ms(text: str) -> float:
    value, unit = float(text[:-2] if text.endswith("ms") else text[:-1].rstrip("u")), text[-2:]
    return value if unit == "ms" else value / 1000 if text.endswith("us") else value * 1000


def load_with_wrk(port: int, token: str, pid: int, clients: int, seconds: float) -> dict:
    """The same load from `wrk` (C, Debian package): the load generator then costs the server almost no CPU."""
    import re

    body = json.dumps(call_body(1, "note.txt"))
    lines = "\n".join(f'wrk.headers["{k}"] = "{v}"' for k, v in headers(port, token).items())
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT.format(body=body, headers=lines))
    url = f"http://127.0.0.1:{port}/mcp"
    subprocess.run(
        ["wrk", "-t2", "-c", str(clients), "-d", "2s", "-s", script.name, url], capture_output=True
    )
    rss_start = rss_bytes(pid)
    out = subprocess.run(
        ["wrk", "-t2", "-c", str(clients), "-d", f"{int(seconds)}s", "--latency", "-s", script.name, url],
        capture_output=True,
        text=True,
    ).stdout
    rss_end = rss_bytes(pid)
    pct = dict(re.findall(r"^\s+(50|75|90|99)%\s+(\S+)$", out, re.M))
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = (int(bad.group(1)) if bad else 0) + (sum(map(int, sock.groups())) if sock else 0)
    return {
        "generator": "wrk",
        "median_ms": _ms(pct["50"]),
        "p99_ms": _ms(pct["99"]),
        "clients": clients,
        "seconds": seconds,
        "requests": requests,
        "errors": errors,
        "throughput_rps": round(requests / seconds, 1),
        "rss_start_mb": round(rss_start / 2**20, 1),
        "rss_end_mb": round(rss_end / 2**20, 1),
        "rss_growth_pct": round((rss_end - rss_start) / rss_start * 100, 2) if rss_start else None,
    }


def ensure_peer() -> Path | None:
    entry = PEER_DIR / "node_modules" / PEER_PKG / "dist" / "index.js"
    if entry.exists():
        return entry
    if shutil.which("npm") is None:
        return None
    PEER_DIR.mkdir(parents=True, exist_ok=True)
    if not (PEER_DIR / "package.json").exists():
        subprocess.run(["npm", "init", "-y"], cwd=PEER_DIR, check=True, capture_output=True)
    subprocess.run(
        ["npm", "install", "--no-audit", "--no-fund", "--silent", PEER_PKG], cwd=PEER_DIR, check=True
    )
    return entry if entry.exists() else None


def _children() -> set[int]:
    """Process ids of this process's children (Linux /proc; empty elsewhere)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            with contextlib.suppress(OSError):
                found |= {
                    int(pid) for pid in Path(f"/proc/{os.getpid()}/task/{task}/children").read_text().split()
                }
    return found


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc/PID/stat), or None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def stdio_side_by_side(folder: Path, calls: int) -> dict:
    """Same SDK client, same file, alternating calls: deskbridge (stdio) vs server-filesystem (stdio).

    Besides the wall time of each call, each server process's own CPU time per call (from /proc) is reported:
    on a loaded machine the wall time is mostly waiting for a core, while CPU per call is what a server costs.
    """
    from contextlib import AsyncExitStack

    from mcp import Client, StdioServerParameters

    peer = ensure_peer()
    if peer is None or shutil.which("node") is None:
        return {"skipped": "node/npm not available for the peer server"}
    env = dict(os.environ)
    ours = StdioServerParameters(
        command=sys.executable, args=["-m", "deskbridge", "mcp", str(folder), "--kind", "probe"], env=env
    )
    bridge = StdioServerParameters(
        command=sys.executable,
        args=["-m", "deskbridge", "mcp", "--project", str(folder), "--kind", "probe"],
        env=env,
    )
    theirs = StdioServerParameters(command="node", args=[str(peer), str(folder)], env=env)
    target = str(folder / "note.txt")
    servers = (
        ("deskbridge", ours, "probe_read_file", {"path": "note.txt"}),
        ("deskbridge --project", bridge, "probe_read_file", {"path": "note.txt"}),
        ("server-filesystem", theirs, "read_text_file", {"path": target}),
    )
    samples: dict[str, list[float]] = {name: [] for name, *_ in servers}
    cpu_us: dict[str, float | None] = {}
    async with AsyncExitStack() as stack:
        clients, pids = {}, {}
        for name, params, _, _ in servers:
            before = _children()
            clients[name] = await stack.enter_async_context(Client(params))
            started = _children() - before  # the server process this client just started
            pids[name] = started.pop() if len(started) == 1 else None
        start_cpu: dict[str, float | None] = {}
        for i in range(calls + 20):
            if i == 20:  # warmed up: CPU is counted from here, over the measured calls only
                start_cpu = {name: cpu_seconds(pid) if pid else None for name, pid in pids.items()}
            for name, _, tool, args in servers:
                start = time.perf_counter()
                result = await clients[name].call_tool(tool, args)
                elapsed = time.perf_counter() - start
                if result.is_error:
                    raise RuntimeError(f"{name} failed: {result.content}")
                if i >= 20:
                    samples[name].append(elapsed)
        for name, pid in pids.items():
            begin, end = start_cpu.get(name), cpu_seconds(pid) if pid else None
            cpu_us[name] = (
                round((end - begin) / calls * 1e6) if begin is not None and end is not None else None
            )
    ours_s, theirs_s = summary_ms(samples["deskbridge"]), summary_ms(samples["server-filesystem"])
    ours_cpu, theirs_cpu = cpu_us["deskbridge"], cpu_us["server-filesystem"]
    return {
        "deskbridge": {**ours_s, "cpu_us_per_call": ours_cpu},
        "deskbridge --project (in-process, no server running)": {
            **summary_ms(samples["deskbridge --project"]),
            "cpu_us_per_call": cpu_us["deskbridge --project"],
        },
        "server-filesystem": {**theirs_s, "cpu_us_per_call": theirs_cpu},
        "ratio_peer_over_ours": round(theirs_s["median_ms"] / ours_s["median_ms"], 2),
        "cpu_ratio_ours_over_peer": round(ours_cpu / theirs_cpu, 2) if ours_cpu and theirs_cpu else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--load-seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument(
        "--python-load",
        action="store_true",
        help="generate MCP-LOAD with httpx2 clients even when wrk (apt install wrk) is available",
    )
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="deskbridge-bench-"))
    (folder / "note.txt").write_text("A small note the benchmark reads.\n" * 20, "utf-8")
    os.environ["DESKBRIDGE_HOME"] = tempfile.mkdtemp(prefix="deskbridge-bench-home-")
    results: dict = {}
    with served(folder, "--kind", "probe") as (port, token, proc):
        results["MCP-LAT"] = asyncio.run(http_latency(port, token, args.calls))
        if shutil.which("wrk") and not args.python_load:
            results["MCP-LOAD"] = load_with_wrk(port, token, proc.pid, args.clients, args.load_seconds)
        else:
            results["MCP-LOAD"] = asyncio.run(load(port, token, proc.pid, args.clients, args.load_seconds))
            results["MCP-LOAD"]["generator"] = "python (httpx2 in the bench process)"
    results["MCP-LAT-stdio-vs-peer"] = asyncio.run(stdio_side_by_side(folder, args.calls // 2))

    lat, ld, peer = results["MCP-LAT"], results["MCP-LOAD"], results["MCP-LAT-stdio-vs-peer"]
    print(f"{'target':<26}{'figure':>44}   goal")
    print(f"{'MCP-LAT (HTTP, median)':<26}{lat['median_ms']:>40.2f} ms   <= 3 ms")
    print(f"{'MCP-LAT (HTTP, p99)':<26}{lat['p99_ms']:>40.2f} ms")
    if "skipped" not in peer:
        print(f"{'MCP-LAT stdio deskbridge':<26}{peer['deskbridge']['median_ms']:>40.2f} ms")
        print(f"{'MCP-LAT stdio peer (Node)':<26}{peer['server-filesystem']['median_ms']:>40.2f} ms")
        print(f"{'peer / deskbridge':<26}{peer['ratio_peer_over_ours']:>41.2f}x   >= 1.0 (not slower)")
        if peer["cpu_ratio_ours_over_peer"] is not None:
            ours_cpu, theirs_cpu = (
                peer["deskbridge"]["cpu_us_per_call"],
                peer["server-filesystem"]["cpu_us_per_call"],
            )
            print(f"{'stdio CPU/call ours, peer':<26}{f'{ours_cpu} us, {theirs_cpu} us':>44}")
            print(f"{'CPU deskbridge / peer':<26}{peer['cpu_ratio_ours_over_peer']:>41.2f}x   <= 1.0")
        print(f"{'load average':<26}{' '.join(map(str, peer['load_average'])):>44}")
    else:
        print(f"peer: {peer['skipped']}")
    print(
        f"{'MCP-LOAD requests':<26}{ld['requests']:>44}   ({ld['throughput_rps']} req/s, {ld['clients']} clients, "
        f"{ld['generator']})"
    )
    print(f"{'MCP-LOAD errors':<26}{ld['errors']:>44}   0")
    print(f"{'MCP-LOAD p99':<26}{ld['p99_ms']:>40.2f} ms   <= 50 ms")
    print(f"{'MCP-LOAD RSS growth':<26}{ld['rss_growth_pct']:>42.2f} %   <= 10 %")
    print(f"results: {write_result('mcp_latency', results)}")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
