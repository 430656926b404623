"""`python -m deskbridge.fuzz --inputs N [--target SUBSTRING] [--seed S]`: run every registered fuzz target."""

from __future__ import annotations

import argparse
import resource
import sys
from pathlib import Path

from deskbridge.fuzz import discover, run_target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deskbridge.fuzz", description=__doc__)
    parser.add_argument("--inputs", type=int, default=10_000, help="inputs per target (make fuzz: 1,000,000)")
    parser.add_argument("--target", default="", help="only targets whose name contains this")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-len", type=int, default=1 << 16, help="longest input in bytes")
    parser.add_argument(
        "--time-limit", type=float, default=2.0, help="seconds per input before it counts as a hang"
    )
    parser.add_argument(
        "--memory-mb", type=int, default=2048, help="address-space cap (unbounded memory = finding)"
    )
    parser.add_argument("--findings", type=Path, default=Path(".fuzz-findings"))
    args = parser.parse_args(argv)
    if args.memory_mb > 0:
        limit = args.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    targets, seeds = discover()
    chosen = {k: v for k, v in targets.items() if args.target in k}
    if not chosen:
        print(f"no fuzz target matches '{args.target}'; known: {', '.join(sorted(targets))}", file=sys.stderr)
        return 2
    failed = False
    for name in sorted(chosen):
        res = run_target(
            name,
            chosen[name],
            seeds[name],
            args.inputs,
            seed=args.seed,
            max_len=args.max_len,
            time_limit_s=args.time_limit,
            findings_dir=args.findings,
        )
        rate = res.inputs / res.seconds if res.seconds else 0.0
        print(
            f"{name}: {res.inputs} inputs, {res.typed_errors} typed errors, {len(res.findings)} findings, "
            f"{res.seconds:.1f}s ({rate:.0f}/s)",
            flush=True,
        )
        for f in res.findings[:10]:
            print(f"  finding {f}", flush=True)
        failed |= bool(res.findings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
