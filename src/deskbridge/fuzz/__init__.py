"""Fuzzing of every parser of untrusted bytes (REL-FUZZ): target registry and a dependency-free mutation engine.

A fuzz module in this package exposes `TARGETS: dict[str, Callable[[bytes], None]]` and optionally
`SEEDS: dict[str, list[bytes]]` (starting inputs per target). A target must return normally or raise
`BridgeError` for bad input; any other exception, a hang past the per-input time limit, or a memory blow-up
counts as a finding. `python -m deskbridge.fuzz --inputs N` runs every target of every module N times
(`make fuzz` uses 1,000,000); findings are saved under `.fuzz-findings/` and make the exit status 1.
"""

from __future__ import annotations

import hashlib
import importlib
import pkgutil
import random
import signal
import struct
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from deskbridge.core.errors import BridgeError

Target = Callable[[bytes], None]
INTERESTING = (
    0,
    1,
    2,
    3,
    4,
    5,
    0x24,
    0x7F,
    0x80,
    0xFF,
    0x7FFF,
    0x8000,
    0xFFFF,
    0x7FFFFFFF,
    0x80000000,
    0xFFFFFFFF,
    0xFFFFFFFE,
    0x10000,
    0x100000,
)


def discover() -> tuple[dict[str, Target], dict[str, list[bytes]]]:
    """Every `TARGETS`/`SEEDS` of the modules in this package, names prefixed by the module name."""
    targets: dict[str, Target] = {}
    seeds: dict[str, list[bytes]] = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for name, fn in getattr(mod, "TARGETS", {}).items():
            key = f"{info.name}.{name}"
            targets[key] = fn
            seeds[key] = list(getattr(mod, "SEEDS", {}).get(name, [])) or [b""]
    return targets, seeds


def mutate(rng: random.Random, data: bytes, pool: list[bytes], max_len: int) -> bytes:
    """One random mutation: bit flip, byte set, interesting dword, insert, delete, truncate, splice, duplicate."""
    buf = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 5))):
        op = rng.randrange(9)
        n = len(buf)
        if op == 0 and n:
            i = rng.randrange(n)
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1 and n:
            buf[rng.randrange(n)] = rng.randrange(256)
        elif op == 2 and n >= 4:
            i = rng.randrange(n - 3)
            struct.pack_into("<I", buf, i, rng.choice(INTERESTING))
        elif op == 3:
            i = rng.randrange(n + 1)
            buf[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif op == 4 and n:
            i = rng.randrange(n)
            del buf[i : i + rng.randint(1, 16)]
        elif op == 5 and n:
            del buf[rng.randrange(n) :]
        elif op == 6 and pool:
            other = rng.choice(pool)
            if other:
                i, j = rng.randrange(len(other)), rng.randrange(n + 1)
                buf[j:j] = other[i : i + rng.randint(1, 64)]
        elif op == 7 and n:
            i = rng.randrange(n)
            buf[i:i] = buf[i : i + rng.randint(1, 32)]
        elif op == 8 and n:
            i = rng.randrange(n)
            buf[i] = rng.choice((0, 0xFF, 0x60, 0x5B, 0x5D, 0x7B, 0x3C, 0x0A, 0x09, 0xB0, 0xD0))
    return bytes(buf[:max_len])


@dataclass
class Result:
    target: str
    inputs: int = 0
    typed_errors: int = 0
    findings: list[str] = field(default_factory=list)
    seconds: float = 0.0


class _Hang(Exception):
    pass


def _alarm(_signum: int, _frame: object) -> None:
    raise _Hang


def run_target(
    name: str,
    fn: Target,
    seeds: list[bytes],
    inputs: int,
    *,
    seed: int = 0,
    max_len: int = 1 << 16,
    time_limit_s: float = 2.0,
    findings_dir: Path | None = None,
) -> Result:
    """Feed `inputs` mutated inputs to `fn`; collect non-typed exceptions and hangs as findings."""
    rng = random.Random(f"{seed}:{name}")
    pool = [s for s in seeds if s] or [b""]
    res = Result(name)
    t0 = time.perf_counter()
    use_alarm = hasattr(signal, "setitimer")
    if use_alarm:
        old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for i in range(inputs):
            data = seeds[i] if i < len(seeds) else mutate(rng, rng.choice(pool), pool, max_len)
            if use_alarm:
                signal.setitimer(signal.ITIMER_REAL, time_limit_s)
            try:
                fn(data)
            except BridgeError:
                res.typed_errors += 1
            except _Hang:
                res.findings.append(_save(findings_dir, name, data, f"hang > {time_limit_s}s"))
            except Exception:  # a finding: anything but a typed error
                res.findings.append(_save(findings_dir, name, data, traceback.format_exc(limit=6)))
            finally:
                if use_alarm:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            res.inputs += 1
            if len(pool) < 256 and rng.random() < 0.01:
                pool.append(data)  # keep some mutants as new parents for deeper coverage
    finally:
        if use_alarm:
            signal.signal(signal.SIGALRM, old)
    res.seconds = time.perf_counter() - t0
    return res


def _save(directory: Path | None, name: str, data: bytes, why: str) -> str:
    digest = hashlib.sha256(data).hexdigest()[:16]
    if directory is not None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{name}-{digest}.bin").write_bytes(data)
        (directory / f"{name}-{digest}.txt").write_text(why, encoding="utf-8")
    return f"{digest}: {why.strip().splitlines()[-1] if why.strip() else why}"
