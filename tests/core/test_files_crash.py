"""REL-CRASH: a process killed with SIGKILL at random points while replacing a file never leaves a partial file.

Each trial starts a writer process that replaces the target over and over with two different contents
(via `core.files.atomic_write`, with `.bak`), kills it after a random delay, and checks the target holds
exactly one of the two complete contents. 50 trials by default; set `DESKBRIDGE_CRASH_TRIALS=200` (or
more) for the long run.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from deskbridge.core.files import TEMP_PREFIX, remove_stale_temps

TRIALS = int(os.environ.get("DESKBRIDGE_CRASH_TRIALS", "50"))

OLD = b"old-" + b"A" * 700_000 + b"-end"
NEW = b"new-" + bytes(range(256)) * 4096 + b"-end"  # 1 MiB, different length and bytes

WRITER = r"""
import sys
from pathlib import Path
from deskbridge.core.files import atomic_write
target = Path(sys.argv[1])
old = b"old-" + b"A" * 700_000 + b"-end"
new = b"new-" + bytes(range(256)) * 4096 + b"-end"
sys.stdout.write("ready\n")
sys.stdout.flush()
i = 0
while True:
    data = new if i % 2 == 0 else old
    # stream in 64 KiB pieces so a kill can land in the middle of writing the temp file
    atomic_write(target, lambda f: [f.write(data[o:o + 65536]) for o in range(0, len(data), 65536)], backup=i % 3 == 0)
    i += 1
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_killed_writer_never_leaves_a_partial_target(tmp_path):
    rng = random.Random(int(os.environ.get("DESKBRIDGE_CRASH_SEED", "20261130")))
    target = tmp_path / "Script.pvf"
    target.write_bytes(OLD)
    outcomes = {"old": 0, "new": 0}
    started = time.monotonic()
    for trial in range(TRIALS):
        proc = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE)
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0, 0.04))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        content = target.read_bytes()
        assert content in (OLD, NEW), f"trial {trial}: partial target of {len(content)} bytes"
        outcomes["old" if content == OLD else "new"] += 1
        bak = target.with_name(target.name + ".bak")
        if bak.exists():
            assert bak.read_bytes() in (OLD, NEW), f"trial {trial}: partial backup"
    leftovers = [p for p in tmp_path.iterdir() if p.name.startswith(TEMP_PREFIX)]
    removed = remove_stale_temps(tmp_path, older_than_s=0)
    assert removed == len(leftovers)
    elapsed = time.monotonic() - started
    print(
        f"REL-CRASH: {TRIALS} kills in {elapsed:.1f}s, target old={outcomes['old']} new={outcomes['new']}, "
        f"stale temps cleaned={removed}, partial=0"
    )
    # Both outcomes must occur, or the test is not exercising the race at all.
    if TRIALS >= 20:
        assert outcomes["old"] > 0 and outcomes["new"] > 0
