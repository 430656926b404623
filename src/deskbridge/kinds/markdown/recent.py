"""Recently opened Markdown documents, kept between runs in `markdown-recent.json` in the config directory
(owner-only: the paths can name private folders). The editor records a document when it shows one and lists
them under File → Recent files; see file_tools.py for the two tools."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Final

from deskbridge.core import files
from deskbridge.core.errors import BridgeError

RECENT_FILE: Final = "markdown-recent.json"
RECENT_MAX: Final = 20
_FILE_MAX_BYTES: Final = 256 * 1024


class RecentFiles:
    """Newest first, no duplicates, at most `RECENT_MAX`; a damaged file is treated as empty."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def load(self) -> list[str]:
        try:
            data = json.loads(files.read_regular_file(self.path, max_bytes=_FILE_MAX_BYTES).decode("utf-8"))
        except (BridgeError, ValueError, UnicodeDecodeError):
            return []
        items = data.get("files") if isinstance(data, dict) else None
        return [p for p in items if isinstance(p, str)][:RECENT_MAX] if isinstance(items, list) else []

    def add(self, path: Path) -> list[str]:
        entry = str(path)
        with self._lock:
            items = [entry, *(p for p in self.load() if p != entry)][:RECENT_MAX]
            self.path.parent.mkdir(parents=True, exist_ok=True)
            files.atomic_write(
                self.path, json.dumps({"files": items}, ensure_ascii=False).encode(), mode=0o600
            )
        return items
