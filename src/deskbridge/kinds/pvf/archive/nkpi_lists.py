"""nkpi registries and string references: `.lst` id → path tables, `<table::key>` lookups, `_indexhash.etc`.

nkpi `.lst` = 10-byte record pairs `(type 0 id)(type 6 path)`; 90US paths are relative to the list's
directory, 110US moved the lists to `list/*.lst` with archive-root-relative paths (research/pvf.md §2B,
PF §2.12) — which one a list uses is decided by which reading finds more of its files. `<table::key>`
(type-8 tokens on 110US): `table` is an id in `n_string.lst` naming a UTF-16 `.str` file; lists are tried in
pvfine's priority `list/n_string.lst` → `n_string.lst` → `*_translate.lst` → `*_kor.lst`, first non-empty
value wins (PF §2.11, §2.14). `list/*_indexhash.etc` (110US) holds `(type 0 id)(type 6 decimal uint32)`
pairs; its value function is unknown, so it is read and preserved, never regenerated (PF §2.16).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from deskbridge.kinds.pvf.lists import Registry
from deskbridge.kinds.pvf.strings.strfile import StrFile

from .base import corrupt, norm_path

if TYPE_CHECKING:
    from .nkpi import NkpiArchive

T_INT, T_STRING = 0, 6
_REF_RE = re.compile(r"<(\d{1,10})::([^<>\r\n]*)>")
_PROBE = 24


def _pairs(ar: NkpiArchive, path: str, limit: int | None = None) -> list[tuple[int, str]]:
    """The list's (id, path) records, or its first `limit` ones."""
    from deskbridge.kinds.pvf.script.nkpi_codec import records

    recs = records(ar.read(path))
    if limit is not None:
        recs = recs[: 2 * limit]
    types, values = recs["t"].tolist(), recs["v"].tolist()
    if len(types) % 2:
        raise corrupt(5 * (len(types) - 1), "an (int id, string) record pair", what=path)
    out = []
    for k in range(0, len(types), 2):
        if types[k] != T_INT or types[k + 1] not in (T_STRING, 3, 5, 7):
            raise corrupt(5 * k, "record types 0 (id) then 6 (string)", what=path)
        off = values[k + 1] & 0xFFFFFFFF
        if not ar.pools.is_valid(off):
            raise corrupt(5 * k + 5, f"a string offset inside the pools (got {off})", what=path)
        out.append((values[k], ar.string(off)))
    return out


def read_list(ar: NkpiArchive, path: str) -> Registry:
    """A `.lst` registry; `root_relative` is chosen by which reading finds more of the listed files."""
    entries = _pairs(ar, path)
    return _rooted(ar, Registry(path, entries, root_relative=False))


def list_base(ar: NkpiArchive, path: str) -> str:
    """The folder a `.lst`'s paths are relative to (`""` for a root-relative 110US list), from its first
    records only (what `read_list` decides it by)."""
    return _rooted(ar, Registry(path, _pairs(ar, path, _PROBE))).base_dir()


def _rooted(ar: NkpiArchive, reg: Registry) -> Registry:
    probe = reg.entries[:_PROBE]
    rooted = sum(ar.exists(p) for _, p in probe)
    relative = sum(ar.exists(reg.to_archive_path(p)) for _, p in probe)
    if rooted > relative or (rooted == relative and norm_path(reg.list_path).startswith("list/")):
        reg.root_relative = True
    return reg


def build_list(ar: NkpiArchive, reg: Registry) -> bytes:
    """Registry → nkpi `.lst` payload (new paths are added to the pools by the usual rule)."""
    from deskbridge.kinds.pvf.script.nkpi_codec import pack_records

    recs: list[tuple[int, int]] = []
    for item_id, rel in reg.entries:
        off = ar.pools.add(rel)
        recs += [(T_INT, item_id), (T_STRING, off - (1 << 32) if off >= 1 << 31 else off)]
    return pack_records(recs)


def read_indexhash(ar: NkpiArchive, path: str) -> dict[int, int]:
    """`_indexhash.etc`: id → uint32 value (kept verbatim on save; pvfine could not regenerate it either)."""
    out: dict[int, int] = {}
    for item_id, text in _pairs(ar, path):
        try:
            out.setdefault(item_id, int(text) & 0xFFFFFFFF)
        except ValueError:
            raise corrupt(0, f"decimal uint32 strings, got {text!r}", what=path) from None
    return out


class StringRefs:
    """Resolves `<table::key>` references through `n_string.lst` and the UTF-16 `.str` tables."""

    def __init__(self, ar: NkpiArchive) -> None:
        self._ar = ar
        self._tables: dict[str, StrFile] = {}
        lists = [p for p in ("list/n_string.lst", "n_string.lst") if ar.exists(p)]
        others = (
            [p for p in ar.paths() if p.lower().endswith(("_translate.lst", "_kor.lst"))]
            if len(lists) < 3
            else []
        )
        others.sort(key=lambda p: (not p.lower().endswith("_translate.lst"), p))
        self._lists: list[dict[int, str]] = []
        for p in lists + others:
            self._lists.append(dict(reversed(_pairs(ar, p))))  # first entry for an id wins

    def str_file(self, path: str) -> StrFile | None:
        key = norm_path(path)
        if key not in self._tables:
            if not self._ar.exists(key):
                return None
            from deskbridge.kinds.pvf.script.nkpi_codec import decode_utf16_text

            self._tables[key] = StrFile.from_text(decode_utf16_text(self._ar.read(key))[0])
        return self._tables[key]

    def lookup(self, table: int, key: str) -> str | None:
        """The first non-empty value for `key` in table `table` over the lists in priority order."""
        for lst in self._lists:
            path = lst.get(table)
            if path is None:
                continue
            f = self.str_file(path)
            value = f.get(key) if f is not None else None
            if value:
                return value
        return None

    def resolve(self, text: str) -> str:
        """`text` with every `<table::key>` replaced by its value (unknown references stay as they are)."""

        def sub(m: re.Match[str]) -> str:
            value = self.lookup(int(m.group(1)), m.group(2))
            return value if value is not None else m.group(0)

        return _REF_RE.sub(sub, text)


__all__ = ["StringRefs", "build_list", "read_indexhash", "read_list"]
