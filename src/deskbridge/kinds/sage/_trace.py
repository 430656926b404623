"""A cold build's timeline, for `bench/sage.py --timeline`: with `DESKBRIDGE_SAGE_TRACE=1` every process of
the build (parent, parser workers, schema process) writes `sage-trace pid role clock event` lines to its
standard error, which forked children share, each with the CPU time the process has used so far. The clock is `time.monotonic()` — CLOCK_MONOTONIC on Linux,
one clock for every process of the machine — so the lines of the processes line up. Unset (always, outside
the bench), `mark` costs one global test."""

from __future__ import annotations

import os
import time

_ON = os.environ.get("DESKBRIDGE_SAGE_TRACE") == "1"
_ROLE = "parent"


def role(name: str) -> None:
    """Name this (forked) process in the lines it writes."""
    global _ROLE
    _ROLE = name


def mark(event: str) -> None:
    if _ON:
        # One write per line: a line shorter than PIPE_BUF is written whole, never interleaved with
        # another process's (POSIX write(2) on pipes).
        now, cpu = time.monotonic(), time.process_time()
        line = f"sage-trace {os.getpid()} {_ROLE} {now:.6f} {cpu:.4f} {event}\n"
        os.write(2, line.encode())
