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


class FolderSource:
    """A folder of `<key>.txt` files, one key each, with the identity of each file as it was read."""

    def __init__(self, folder: Path) -> None:
        from deskbridge.core import files

        self.folder = folder
        self._data: dict[str, str] = {}
        self._identities: dict[str, files.FileIdentity] = {}
        for p in sorted(folder.glob("*.txt")):
            self._identities[p.stem] = files.file_identity(p)
            self._data[p.stem] = p.read_text("utf-8")

    def get(self, key: str) -> str:
        return self._data[key]

    def all_keys(self) -> list[str]:
        return list(self._data)

    def identity_of(self, key: str):
        return self._identities.get(key)


class FolderStore:
    """Saves key by key: each key is its own `<key>.txt` in the folder (the shape of a folder of documents)."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.gate = None
        self.paths: dict[str, Path] = {}

    def load(self, path: Path | None) -> FolderSource:
        assert path is not None and path.is_dir()
        return FolderSource(path)

    def serialize(self, workspace: Workspace, out: BinaryIO) -> None:
        raise AssertionError("a folder is saved key by key")

    def key_path(self, workspace: Workspace, key: str) -> Path:
        assert workspace.source_path is not None
        return self.paths.get(key, workspace.source_path / f"{key}.txt")

    def serialize_key(self, workspace: Workspace, key: str, out: BinaryIO, snapshot: str) -> None:
        self.written.append(key)
        if self.gate is not None:  # tests hold a write here to see what runs beside it
            self.gate(key)
        out.write(snapshot.encode("utf-8"))

    def rebind_key(self, workspace: Workspace, key: str, path: Path) -> None:
        self.paths[key] = path


class SnapshotFolderStore(FolderStore):
    """A folder store whose value to write is taken by the after-barrier hook (like markdown's collab text)."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[tuple[str, int]] = []

    def snapshot_key(self, workspace: Workspace, key: str) -> str:
        self.snapshots.append((key, workspace.revision))
        return workspace.read(key)


class OpeningFolderStore(FolderStore):
    """A folder store that also opens one file at a time as a new key (`Lifecycle.open_key`, like a markdown
    document opened into its folder's workspace); `load_gate(path)` runs in the read, to see what runs beside."""

    def __init__(self) -> None:
        super().__init__()
        self.load_gate = None

    def find_key(self, workspace: Workspace, path: Path) -> str | None:
        return next((k for k in workspace.source.all_keys() if self.key_path(workspace, k) == path), None)

    def load_key(self, workspace: Workspace, path: Path | None) -> tuple[Path | None, str]:
        if self.load_gate is not None:
            self.load_gate(path)
        return path, "" if path is None else path.read_text("utf-8")

    def add_key(self, workspace: Workspace, key: str, value: tuple[Path | None, str], revision: int) -> None:
        path, text = value
        workspace.source._data[key] = text
        if path is not None:
            self.paths[key] = path
