"""Shared helpers of the benchmark scripts: timing statistics, result files, a served workspace in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def summary_ms(samples_s: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in samples_s]
    return {
        "n": len(ms),
        "median_ms": round(statistics.median(ms), 3),
        "p99_ms": round(percentile(ms, 99), 3),
        "min_ms": round(min(ms), 3),
    }


def write_result(name: str, data: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


@contextlib.contextmanager
def served(
    path: Path, *args: str, home: Path | None = None
) -> Iterator[tuple[int, str, subprocess.Popen[bytes]]]:
    """`deskbridge serve PATH ARGS` in a subprocess on a free port; yields (port, token, process)."""
    home = home or Path(tempfile.mkdtemp(prefix="deskbridge-bench-home-"))
    env = {**os.environ, "DESKBRIDGE_HOME": str(home)}
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "deskbridge", "serve", str(path), *args, "--no-browser", "--port", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
                break
            time.sleep(0.05)
        else:
            raise RuntimeError("the server did not start within 60 s")
        token = (home / "config" / "token").read_text().strip()
        yield port, token, proc
    finally:
        proc.terminate()
        proc.wait(10)
