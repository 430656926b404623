"""Archives another tool could have written: file names our own `stage` refuses (control characters), to test
how every reader and the CLI treat them."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive import base as archive_base
from deskbridge.kinds.pvf.archive import open_archive


def with_names(source: Path, target: Path, files: dict[str, bytes]) -> Path:
    """`source` copied to `target` with `files` added under names as given. The library's last-line check on
    new names is lifted while it writes, as a tool without that check would write them."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(archive_base, "_refuse_bad_new_name", lambda path, key: None)
        ar = open_archive(source)
        for name, data in files.items():
            ar.stage(name, data)
        ar.save_copy(target)
        ar.close()
    return target
