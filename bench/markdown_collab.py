"""REL-COLLAB (issue 10): ≥ 200 randomized trials of a person typing in Chromium at 30–120 ms per key (CJK
included) while an agent edits over MCP before, after and at the person's cursor and replaces the whole
document. Target: 0 lost keystrokes, 0 lost AI edits. Writes bench/results/markdown_collab.json.

    python bench/markdown_collab.py [--trials 200] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DESKBRIDGE_HOME", tempfile.mkdtemp(prefix="deskbridge-bench-home-"))
from _collab_trials import run_trials
from _common import write_result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.monotonic()
    trials, errors = run_trials(args.trials, args.seed)
    failed = [t for t in trials if not t.passed]
    result = {
        "trials": len(trials),
        "passed": len(trials) - len(failed),
        "lost_or_misplaced": len(failed),
        "ai_edits_applied": sum(len(t.ai_ok) for t in trials),
        "ai_edits_refused_stale": sum(t.ai_refused for t in trials),
        "keystrokes": sum(len(t.typed) for t in trials),
        "delay_ms_range": [min(t.delay_ms for t in trials), max(t.delay_ms for t in trials)],
        "edit_kinds": dict(Counter(w for t in trials for w in t.wheres)),
        "page_errors": errors[:5],
        "failures": [{"trial": t.index, "delay_ms": t.delay_ms, "problem": t.problem} for t in failed[:10]],
        "seconds": round(time.monotonic() - started, 1),
        "seed": args.seed,
    }
    path = write_result("markdown_collab", result)
    print(
        f"REL-COLLAB: {result['passed']}/{result['trials']} trials without loss, "
        f"{result['keystrokes']} keystrokes, {result['ai_edits_applied']} AI edits "
        f"({result['ai_edits_refused_stale']} refused as stale) → {path}"
    )
    return 0 if not failed and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
