"""Deterministic synthetic nkpi archives (`deskbridge pvf synth --family nkpi`), from a few files to `nkpi-1m`.

Content is DNF-like: folders `equipment/ skill/ stackable/ monster/ dungeon/ npc/ etc/`, one `.lst`
registry per folder (directory-relative paths; for the paged variant root-relative under `list/`, as in
110US — research/pvf.md §2B), `n_string.lst` + UTF-16LE `.str` tables (with NUL padding and CJK), section
trees with ints, floats, tags, inline/block strings and `{8=`<id::key>`}` references. Scripts are built
from per-folder token templates filled with numpy in batches, so a million files take seconds per 100k,
not minutes; the same (files, seed, variant) always gives the same bytes.
"""

from __future__ import annotations

import json
import os
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from deskbridge.core.files import atomic_write
from deskbridge.kinds.pvf.archive import nkpi_header as hdr
from deskbridge.kinds.pvf.archive.nkpi_cipher import MAGIC_DATA, SCHEMES, KeyScheme, crypt
from deskbridge.kinds.pvf.archive.nkpi_paged import NkpiKeys, page_count
from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools
from deskbridge.kinds.pvf.archive.nkpi_tables import FILE_DTYPE, build_grpi, build_hash_table
from deskbridge.kinds.pvf.archive.nkpi_writer import ZLIB_LEVEL, _PageGuardWriter

VARIANTS = ("legacy", "guard", "protected", "paged")
CHUNK_TARGET = 72 * 1024
"""Decompressed bytes per chunk; the 90US sample averages 583.6 MB / 8,019 chunks ≈ 73 KB (FORMAT.md)."""
_REC = np.dtype([("t", "u1"), ("v", "<i4")])
_FOLDERS = {
    # folder: (extension, sub-folders, section vocabulary)
    "equipment": (
        "equ",
        [
            "character/swordman/weapon",
            "character/mage/coat",
            "character/fighter/shoes",
            "character/gunner/pants",
            "character/priest/belt",
            "character/common/amulet",
        ],
        [
            "[grade]",
            "[minimum level]",
            "[price]",
            "[physical attack]",
            "[magical attack]",
            "[durability]",
            "[weight]",
            "[rarity]",
            "[hp max]",
            "[mp max]",
            "[stuck resistance]",
        ],
    ),
    "skill": (
        "skl",
        ["swordman", "mage", "fighter", "gunner", "priest", "thief"],
        [
            "[maximum level]",
            "[required level]",
            "[skill class]",
            "[consume mp]",
            "[cool time]",
            "[casting time]",
            "[level property]",
            "[static data]",
        ],
    ),
    "stackable": (
        "stk",
        ["potion", "material", "cash", "quest", "recipe"],
        ["[stack limit]", "[price]", "[value]", "[minimum level]", "[cool time]", "[rarity]"],
    ),
    "monster": (
        "mob",
        ["goblin", "tau", "ghost", "lugaru", "mecha", "dragon"],
        [
            "[level]",
            "[hp max]",
            "[physical attack]",
            "[physical defense]",
            "[move speed]",
            "[attack speed]",
            "[sight]",
            "[warlike]",
        ],
    ),
    "dungeon": (
        "dgn",
        ["gbl", "hendon", "westcoast", "skyscraper", "abyss"],
        ["[minimum required level]", "[maximum level]", "[map]", "[background]", "[clear reward]"],
    ),
    "npc": ("npc", ["town", "shop", "quest"], ["[npc type]", "[face image]", "[shop item]", "[voice]"]),
    "etc": ("etc", ["rareitem", "expertjob", "avatar"], ["[item]", "[probability]", "[group]", "[value]"]),
}
_WORDS = [
    "Flame",
    "Frost",
    "Iron",
    "Shadow",
    "Holy",
    "Ancient",
    "Rusty",
    "Grand",
    "Storm",
    "Blood",
    "Crystal",
]
_NOUNS = ["Sword", "Robe", "Boots", "Potion", "Gem", "Goblin", "Knight", "Gate", "Blade", "Ring", "Shard"]
_CJK = ["炎之剑", "冰霜法袍", "骑士の長剣", "回復薬", "古代遺跡", "影の指輪", "暴风之眼", "水晶碎片"]
Progress = Callable[[int, int], None]


def _template(
    rng: np.random.Generator, pools: StringPools, vocab: list[str], length: int
) -> tuple[np.ndarray, list[tuple[str, int]]]:
    """One script template: records with tag offsets filled and (kind, column) slots to fill per file."""
    recs: list[tuple[int, int]] = [(3, pools.add("[name]")), (6, 0)]
    slots: list[tuple[str, int]] = [("name", 1)]
    recs += [(3, pools.add("[name2]")), (8, 0)]
    slots.append(("ref", 3))
    while len(recs) < length:
        tag = vocab[int(rng.integers(len(vocab)))]
        roll = int(rng.integers(10))
        if roll < 2:  # a nested container section with its end tag
            opener, closer = ("[if equip]", "[/if equip]") if roll == 0 else ("[level info]", "[/level info]")
            recs.append((3, pools.add(opener)))
            recs.append((3, pools.add(vocab[int(rng.integers(len(vocab)))])))
            for _ in range(int(rng.integers(1, 8))):
                slots.append(("int", len(recs)))
                recs.append((0, 0))
            recs.append((3, pools.add(closer)))
            continue
        recs.append((3, pools.add(tag)))
        for _ in range(int(rng.integers(1, 6))):
            kind = "float" if rng.random() < 0.25 else "int"
            slots.append((kind, len(recs)))
            recs.append((2 if kind == "float" else 0, 0))
    recs += [(3, pools.add("[explain]")), (5, 0)]
    slots.append(("explain", len(recs) - 1))
    arr = np.array(recs, dtype=_REC)
    return arr, slots


def _fill(
    rng: np.random.Generator,
    tmpl: np.ndarray,
    slots: list[tuple[str, int]],
    names: np.ndarray,
    refs: np.ndarray,
    explains: np.ndarray,
) -> np.ndarray:
    """A (batch, len) record block from a template: random ints/floats, the batch's string offsets."""
    batch = len(names)
    block = np.tile(tmpl, (batch, 1))
    for kind, col in slots:
        if kind == "int":
            block["v"][:, col] = rng.integers(0, 40, batch, dtype=np.int32) * (
                1 + col % 25
            )  # few distinct values, like real stats
        elif kind == "float":
            vals = (rng.integers(0, 40, batch) / 8.0).astype(np.float32)
            block["v"][:, col] = vals.view(np.int32)
        elif kind == "name":
            block["v"][:, col] = names
        elif kind == "ref":
            block["v"][:, col] = refs
        else:
            block["v"][:, col] = explains
    return block


def _str_file(pairs: list[tuple[str, str]], pad: int) -> bytes:
    """A `.str` table: `key>value` CRLF lines in UTF-16LE, with NUL padding at the end (PF §2.15)."""
    text = "// synthetic string table\r\n" + "".join(f"{k}>{v}\r\n" for k, v in pairs)
    return text.encode("utf-16-le") + b"\0\0" * pad


class _Builder:
    """Collects files into chunks, compressing and encrypting them into a temporary body file."""

    def __init__(self, pools: StringPools, body_seed: int, body_file) -> None:  # type: ignore[no-untyped-def]
        self.pools = pools
        self.body_seed = body_seed
        self.body = body_file
        self.entries: list[np.ndarray] = []
        self.comp: list[int] = []
        self.raw: list[int] = []
        self._parts: list[bytes] = []
        self._len = 0
        self._pending: list[tuple[int, int, int, int, int]] = []
        self._types: list[int] = []

    def add(self, path: str, data: bytes, data_type: int) -> None:
        folder, _, name = path.rpartition("/")
        self._pending.append(
            (self.pools.add(name), self.pools.add(folder), len(self.comp), self._len, len(data))
        )
        self._types.append(data_type)
        self._parts.append(data)
        self._len += len(data)
        if self._len >= CHUNK_TARGET:
            self.flush()

    def flush(self) -> None:
        if not self._parts:
            return
        raw = b"".join(self._parts)
        enc = crypt(zlib.compress(raw, ZLIB_LEVEL), self.body_seed, MAGIC_DATA)
        self.body.write(enc)
        self.comp.append(len(enc))
        self.raw.append(len(raw))
        arr = np.zeros(len(self._pending), dtype=FILE_DTYPE)
        if self._pending:
            cols = np.array(self._pending, dtype=np.int64)
            arr["name"], arr["path"], arr["chunk"], arr["offset"], arr["size"] = cols.T
            arr["type"] = self._types
        self.entries.append(arr)
        self._parts, self._len, self._pending, self._types = [], 0, [], []


def synth_keys(seed: int, pages: int) -> NkpiKeys:
    """Deterministic test page keys (never real client keys): 32 bytes per page from the seed."""
    rng = np.random.default_rng([seed, 0x6B6579])
    return NkpiKeys(tuple(rng.bytes(32) for _ in range(pages)))


def synth_nkpi(
    path: str | Path,
    files: int,
    seed: int,
    variant: str = "legacy",
    progress: Progress | None = None,
    *,
    keys: NkpiKeys | None = None,
    scheme: KeyScheme | None = None,
    annotated: bool = False,
) -> dict[str, object]:
    """Write a synthetic nkpi archive with about `files` files to `path`; returns a summary.

    For `variant="paged"` the page keys are `keys` or `synth_keys(seed, …)`; the latter are also written to
    `<path>.keys.json` (test material only) so `open_archive(path, keys=that file)` works. `scheme` overrides
    the variant's seeds (tests use it to stand in for a client build whose keys are unknown). `annotated` adds
    the annotation fixtures of `synth/annotated.py`.
    """
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}")
    if files < 1:
        raise ValueError("files must be at least 1")
    scheme = scheme or SCHEMES[variant]
    rng = np.random.default_rng(seed)
    # 110US keeps sTrA empty and every string in the UTF-16 pool (research §1B); the paged variant mirrors it.
    pools = StringPools(
        bytes(8),
        b"" if variant == "paged" else b"\0",
        b"\0\0",
        PoolKeys(scheme.pool_a, scheme.pool_w, scheme.mask_a, scheme.mask_w),
        "utf-8",
    )
    pools.index_all()  # a million appends need the dictionary, not a scan per string
    path = Path(path)
    body_fd, body_name = tempfile.mkstemp(prefix=".synth-body-", dir=path.parent)
    try:
        with os.fdopen(body_fd, "w+b") as body:
            b = _Builder(pools, scheme.body, body)
            summary = _generate(b, rng, files, variant, progress, annotated)
            b.flush()
            table = np.concatenate(b.entries) if b.entries else np.zeros(0, dtype=FILE_DTYPE)
            pools.freeze()
            hash_plain = build_hash_table(table, pools)
            name_table = pools.serialize()
            grpi_plain = build_grpi(b.comp, b.raw)
            header = hdr.Header(
                bytes(20), len(table), 0, sum(b.comp), len(b.comp), len(hash_plain), len(name_table)
            )
            if variant == "paged" and keys is None:
                keys = synth_keys(seed, page_count(header.total_size))
                note = {"page_keys": [k.hex() for k in keys.page_keys], "note": "synthetic test keys"}
                atomic_write(
                    Path(str(path) + ".keys.json"), json.dumps(note).encode("utf-8"), new_file_mode=0o600
                )

            def fill(raw_out: BinaryIO) -> None:
                out = _PageGuardWriter(raw_out, keys, header.total_size) if variant == "paged" else raw_out  # type: ignore[arg-type]
                out.write(hdr.encrypt(header, scheme))
                out.write(table.tobytes())
                out.write(crypt(hash_plain, scheme.hash, MAGIC_DATA))
                out.write(name_table)
                out.write(crypt(grpi_plain, scheme.grpi, MAGIC_DATA))
                body.seek(0)
                while block := body.read(16 * 1024 * 1024):
                    out.write(block)

            atomic_write(path, fill)
    finally:
        Path(body_name).unlink(missing_ok=True)
    summary.update(
        files=int(header.file_count),
        chunks=len(b.comp),
        size=header.total_size,
        decompressed=int(sum(b.raw)),
        variant=variant,
    )
    return summary


def _generate(
    b: _Builder,
    rng: np.random.Generator,
    files: int,
    variant: str,
    progress: Progress | None,
    annotated: bool = False,
) -> dict[str, object]:
    """Emit every file: tables first, then scripts folder by folder, then the registries."""
    pools = b.pools
    root_lists = variant == "paged"
    n_tables = len(_FOLDERS)
    str_paths = [f"{folder}/{folder}.{'chn' if i % 2 else 'eng'}.str" for i, folder in enumerate(_FOLDERS)]
    nstr = [(0, 6, pools.add(p)) for p in str_paths]
    nstr_payload = b"".join(
        np.array([(0, i), (6, off)], dtype=_REC).tobytes() for i, (_, _, off) in enumerate(nstr)
    )
    b.add("n_string.lst", nstr_payload, 1)
    fixed = 1 + 2 * n_tables  # n_string.lst, a .str and a .lst per folder
    scripts = max(0, files - fixed)
    per_folder = np.full(len(_FOLDERS), scripts // len(_FOLDERS))
    per_folder[: scripts % len(_FOLDERS)] += 1
    done = 0
    total_chars = 0
    for fi, (folder, (ext, subs, vocab)) in enumerate(_FOLDERS.items()):
        count = int(per_folder[fi])
        table_pairs: list[tuple[str, str]] = []
        templates = [_template(rng, pools, vocab, int(length)) for length in rng.integers(20, 200, 12)]
        registry: list[tuple[int, str]] = []
        batch = 4096
        for start in range(0, count, batch):
            n = min(batch, count - start)
            ids = np.arange(start, start + n)
            names_text = [
                f"{_WORDS[(i * 7 + fi) % len(_WORDS)]} {_NOUNS[(i * 3) % len(_NOUNS)]} {i}"
                if i % 5
                else f"{_CJK[i % len(_CJK)]} {i}"
                for i in ids.tolist()
            ]
            name_offs = np.array([pools.add(s) for s in names_text], dtype=np.int64).astype(np.int32)
            ref_offs = np.array(
                [pools.add(f"<{fi}::name_{i % 512}>") for i in ids.tolist()], dtype=np.int64
            ).astype(np.int32)
            exp_offs = np.array(
                [pools.add(f"Explain {folder} {i % 997}.\nUse with care.") for i in ids.tolist()],
                dtype=np.int64,
            ).astype(np.int32)
            choice = rng.integers(0, len(templates), n)
            for t in range(len(templates)):
                sel = np.flatnonzero(choice == t)
                if not len(sel):
                    continue
                tmpl, slots = templates[t]
                block = _fill(rng, tmpl, slots, name_offs[sel], ref_offs[sel], exp_offs[sel])
                raw = block.tobytes()
                width = tmpl.size * 5
                for k, j in enumerate(sel.tolist()):
                    i = start + j
                    sub = subs[i % len(subs)]
                    rel = f"{sub}/{folder}_{i:07d}.{ext}"
                    b.add(f"{folder}/{rel}", raw[k * width : (k + 1) * width], 1)
                    registry.append((i, f"{folder}/{rel}" if root_lists else rel))
            if len(table_pairs) < 512:
                table_pairs += [
                    (f"name_{i}", names_text[k]) for k, i in enumerate(ids.tolist()[: 512 - len(table_pairs)])
                ]
            done += n
            if progress:
                progress(done, scripts)
        strs = _str_file(table_pairs, pad=int(rng.integers(0, 8)))
        total_chars += len(strs)
        b.add(str_paths[fi], strs, 3)
        if annotated:
            registry += _fixtures().registry_entries(folder, root_lists)
        registry.sort()
        lst_recs = np.zeros(2 * len(registry), dtype=_REC)
        lst_recs["t"][1::2] = 6
        lst_recs["v"][0::2] = [r[0] for r in registry]
        lst_recs["v"][1::2] = np.array([pools.add(r[1]) for r in registry], dtype=np.int64).astype(np.int32)
        lst_path = f"list/{folder}.lst" if root_lists else f"{folder}/{folder}.lst"
        b.add(lst_path, lst_recs.tobytes(), 1)
    if annotated:
        from deskbridge.kinds.pvf.script.nkpi_codec import compile_text

        fx = _fixtures()
        for lf in [*fx.fixture_files(traditional=False, bare_tags=True), *fx.new_lists(root_lists)]:
            b.add(lf.path, compile_text(lf.text, pools), 1)
    return {"str_bytes": total_chars}


def _fixtures():  # type: ignore[no-untyped-def]
    from deskbridge.kinds.pvf.synth import annotated

    return annotated
