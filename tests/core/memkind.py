"""A tiny in-memory test kind for the engine tests: a JSON object of key → text, saved as one JSON file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import BinaryIO

from deskbridge.core.workspace import MappingSource, Workspace


class JsonStore:
    """Loads `{key: text}` from a JSON file and writes the workspace's current keys back as JSON."""

    def __init__(self) -> None:
        self.loads = 0
        self.fail_next_load: Exception | None = None
        self.fail_serialize: Exception | None = None
        self.after_save_error: Exception | None = None

    def load(self, path: Path | None) -> MappingSource:
        self.loads += 1
        if self.fail_next_load is not None:
            exc, self.fail_next_load = self.fail_next_load, None
            raise exc
        if path is None:
            return MappingSource({})
        return MappingSource(json.loads(path.read_text("utf-8")))

    def serialize(self, workspace: Workspace, out: BinaryIO) -> None:
        if self.fail_serialize is not None:
            raise self.fail_serialize
        data = {k: workspace.read(k) for k in workspace.all_keys()}
        out.write(json.dumps(data, sort_keys=True).encode("utf-8"))

    def after_save(self, workspace: Workspace, path: Path) -> None:
        if self.after_save_error is not None:
            raise self.after_save_error


def write_json(path: Path, data: dict[str, str]) -> Path:
    path.write_text(json.dumps(data, sort_keys=True), "utf-8")
    return path


def read_json(path: Path) -> dict[str, str]:
    return json.loads(path.read_text("utf-8"))
