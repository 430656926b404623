"""`.lst` registries: id → file path tables, and the `<table::key>` string links they anchor.

Classic `.lst` = script of `(2 id)(7 stringtable index of a path)` records; the path is relative to the
list's own directory (`equipment/equipment.lst` → `character/…`), research/pvf.md §2A. `n_string.lst` is
the same shape and maps a string-link table id to a `.str` file (root-relative, mixed case; lookups are
case-insensitive). nkpi lists use other token codes and may be root-relative (110US); they reuse
`Registry` with `root_relative=True`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass, field

from deskbridge.kinds.pvf.archive.base import corrupt, norm_path
from deskbridge.kinds.pvf.script import classic_codec
from deskbridge.kinds.pvf.script.classic_codec import T_INT, T_STRING, StringSource

N_STRING_LST = "n_string.lst"


@dataclass(slots=True)
class Registry:
    """Entries of one `.lst` in file order; `resolve(id)` gives the archive path of an id."""

    list_path: str
    entries: list[tuple[int, str]] = field(default_factory=list)
    root_relative: bool = False

    def base_dir(self) -> str:
        return "" if self.root_relative else posixpath.dirname(self.list_path.replace("\\", "/"))

    def to_archive_path(self, rel: str) -> str:
        rel = rel.replace("\\", "/")
        base = self.base_dir()
        return f"{base}/{rel}" if base else rel

    def get(self, item_id: int) -> str | None:
        """Stored (list-relative) path of the first entry with this id."""
        for i, p in self.entries:
            if i == item_id:
                return p
        return None

    def resolve(self, item_id: int) -> str | None:
        """Archive path of `item_id` (list-relative path joined to the list's directory)."""
        rel = self.get(item_id)
        return None if rel is None else self.to_archive_path(rel)

    def find_id(self, archive_path: str) -> int | None:
        """Id registered for an archive path (case-insensitive)."""
        want = norm_path(archive_path)
        for i, p in self.entries:
            if norm_path(self.to_archive_path(p)) == want:
                return i
        return None

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return iter(self.entries)


def parse_classic_list(list_path: str, data: bytes, strings: StringSource) -> Registry:
    """Classic `.lst` bytes → `Registry`; PVF_CORRUPT when records are not (int, string) pairs."""
    recs = classic_codec.read_tokens(data)
    types = recs["t"].tolist()
    values = recs["v"].tolist()
    reg = Registry(list_path)
    if len(types) % 2:
        raise corrupt(2 + 5 * (len(types) - 1), "an (int id, string path) record pair", what=list_path)
    for k in range(0, len(types), 2):
        if types[k] != T_INT or types[k + 1] != T_STRING:
            raise corrupt(2 + 5 * k, "record types 2 (id) then 7 (path)", what=list_path)
        path = strings.get(values[k + 1])
        if path is None:
            raise corrupt(2 + 5 * k + 5, f"a stringtable index (got {values[k + 1]})", what=list_path)
        vid = values[k]
        reg.entries.append((vid - (1 << 32) if vid & 0x80000000 else vid, path))
    return reg


def build_classic_list(reg: Registry, strings: StringSource) -> bytes:
    """`Registry` → classic `.lst` bytes (new paths are interned in the string table)."""
    from deskbridge.kinds.pvf.script import text as dialect

    tokens = []
    for item_id, path in reg.entries:
        tokens.append(dialect.int_token(item_id))
        tokens.append(dialect.string_token(path))
    return classic_codec.from_tokens(tokens, strings)
