"""`web.launch.running_servers`: the server records of this user whose process still runs, read from the run
folder; a record of a process that has ended, or one without a usable pid, is passed over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from deskbridge.settings import Dirs
from deskbridge.web.launch import RECORD_PREFIX, running_servers


def test_only_records_of_running_processes_are_listed(tmp_path: Path) -> None:
    dirs = Dirs(
        config=tmp_path / "config", data=tmp_path / "data", cache=tmp_path / "cache", runtime=tmp_path
    )
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    records = {
        "older": {"pid": os.getpid(), "started": 1},
        "newer": {"pid": os.getpid(), "started": 2},
        "ended": {"pid": int(ended.stdout), "started": 3},
        "no-pid": {"started": 4},
        "text-pid": {"pid": str(os.getpid()), "started": 5},
        "zero-pid": {"pid": 0, "started": 6},
    }
    for name, data in records.items():
        (tmp_path / f"{RECORD_PREFIX}{name}.json").write_text(json.dumps(data), "utf-8")
    (tmp_path / f"{RECORD_PREFIX}broken.json").write_text("{", "utf-8")
    (tmp_path / f"{RECORD_PREFIX}list.json").write_text("[1]", "utf-8")
    assert [r["started"] for r in running_servers(dirs)] == [2, 1]
