"""`NkpiArchive.paths()` without staged changes is a `PathList`: decoded on demand, and in every way a
caller uses it (length, indexing, slices, iteration, membership, equality) the list it replaces."""

from __future__ import annotations

import pytest

from deskbridge.kinds.pvf.archive import nkpi_index
from deskbridge.kinds.pvf.archive.base import norm_path
from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
from deskbridge.kinds.pvf.archive.nkpi_index import PathIndex, PathList


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(nkpi_index, "_BLOCK", 7)  # many blocks on a 300-file archive, a short last one


def test_paths_is_lazy_and_equals_the_full_listing(small_archives, small_blocks):
    with open_nkpi(small_archives["legacy"]) as ar:
        listed = ar.paths()
        assert isinstance(listed, PathList)
        full = ar._path_index().display_paths()
        assert len(listed) == len(full) == 300
        assert listed == full and list(listed) == full
        assert listed[0] == full[0] and listed[-1] == full[-1] and listed[123] == full[123]
        assert listed[5:30:3] == full[5:30:3] and listed[-4:] == full[-4:]
        assert full[77] in listed and full[77].upper() not in listed and "no/such.equ" not in listed
        with pytest.raises(IndexError):
            listed[300]
        assert ar.read(listed[200]) == ar.read(full[200])
        ar.stage(full[3], None)  # staged changes: a plain list without the deleted path
        changed = ar.paths()
        assert isinstance(changed, list) and len(changed) == 299 and full[3] not in changed


def test_shadowed_duplicates_are_left_out_as_before(small_archives, small_blocks):
    with open_nkpi(small_archives["legacy"]) as ar:
        files = ar.files.copy()
        files["name"][40:60] = files["name"][50]
        files["path"][40:60] = files["path"][50]
        index = PathIndex(files, ar.pools)
        shown = index.display_paths()
        expected = [p for i, p in enumerate(shown) if i not in index.shadowed()]
        lazy = PathList(index)
        assert len(lazy) == len(expected) == 281
        assert list(lazy) == expected and lazy[40] == expected[40] and lazy[41] == expected[41]
        assert [lazy[i] for i in range(len(lazy))] == expected


def _index_over(names: list[str], folders: list[str], *, wide: bool = False, raw_tail: bytes = b""):
    """A `PathIndex` over hand-made pools: entry i is `folders[i % len(folders)]` / `names[i]`, the names
    in sTrA (or sTrW when `wide`), every folder in sTrA; `raw_tail` ends sTrA without a terminator."""
    import numpy as np

    from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools
    from deskbridge.kinds.pvf.archive.nkpi_tables import FILE_DTYPE

    a, w = bytearray(b"\0"), bytearray(b"\0\0")
    folder_offs = []
    for f in folders:
        folder_offs.append(len(a) * 2)
        a += f.encode("utf-8", "surrogateescape") + b"\0"
    name_offs = []
    for s in names:
        if wide:
            name_offs.append(len(w) + 1)
            w += s.encode("utf-16-le", "surrogatepass") + b"\0\0"
        else:
            name_offs.append(len(a) * 2)
            a += s.encode("utf-8", "surrogateescape") + b"\0"
    files = np.zeros(len(names) + (1 if raw_tail else 0), dtype=FILE_DTYPE)
    files["name"][: len(names)] = name_offs
    if raw_tail:
        files["name"][-1] = len(a) * 2
        a += raw_tail
    files["path"] = [folder_offs[i % len(folders)] for i in range(len(files))]
    pools = StringPools(bytes(8), bytes(a), bytes(w), PoolKeys(0, 0, 0, 0), "utf-8")
    return PathIndex(files, pools)


NAMES = [
    "a.equ",
    "Upper_Case.EQU",
    "exactly8",
    "sixteen_chars_xx",
    "",
    "x" * 95,
    "y" * 96,
    "z" * 200,
    "back\\slash.equ",
    "in/name.equ",
    "/leading.equ",
    "ünïcode.equ",
    "KELVIN\u212a.equ",
    "[]{}@`^_~.lst",
    "tab\tand space .txt",
]


@pytest.mark.parametrize("wide", [False, True])
def test_every_entry_is_found_by_its_normalised_path(wide):
    """The vectorised hash of the file table (8 bytes a step, SWAR lower-casing) and the query's hash
    (`path_hash` in Python) agree for every kind of name: the fast ones and those that fall back (non-ASCII,
    `/` or `\\` inside the name, names longer than a step allows), in both pools, with and without a folder."""
    folders = ["", "equipment/character", "Mixed/CASE", "/", "end/"]
    names = [n for n in NAMES for _ in range(len(folders))]
    index = _index_over(names, folders, wide=wide)
    listed = index.display_paths()
    assert listed == [index.resolve_path(i) for i in range(len(names))]
    for i, path in enumerate(listed):
        first = index.find(norm_path(path))
        assert first is not None and norm_path(listed[first]) == norm_path(path), path
        assert first <= i
    assert index.find("no/such.equ") is None
    assert index.find(norm_path(listed[7]) + "x") is None


def test_a_pool_ending_without_a_terminator_still_hashes_its_last_name():
    index = _index_over(["first.equ", "second.equ"], ["f"], raw_tail=b"Last.Equ")
    assert index.resolve_path(2) == "f/Last.Equ"
    assert index.find("f/last.equ") == 2 and index.find("f/first.equ") == 0


def test_the_vectorised_hash_is_the_python_hash():
    """`_word_hashes` is `_str_hash` of the lower-cased bytes (the definition a lookup uses)."""
    import numpy as np

    from deskbridge.kinds.pvf.archive.nkpi_index import _str_hash, _word_hashes

    strings = [b"", b"a", b"ABCDEFG", b"ABCDEFGH", b"abcdefghi", b"Equipment_0000017.equ", b"q" * 95]
    buf = b"\0".join(strings) + b"\0"
    starts = np.cumsum([0] + [len(s) + 1 for s in strings[:-1]])
    hashes, lengths, ok = _word_hashes(buf, starts)
    assert ok.all() and lengths.tolist() == [len(s) for s in strings]
    assert hashes.tolist() == [_str_hash(s.lower()) for s in strings]


def test_a_pool_lookup_gives_the_index_answer_for_every_key():
    """`PoolLookup` (a search of the lower-cased name pool) answers exactly what the path index answers:
    present keys (first entry of a repeated key included), case and `\\` variants, names holding `/`,
    absent keys; what it cannot decide is `NOT_SURE`, never a wrong answer."""
    from deskbridge.kinds.pvf.archive.nkpi_index import NOT_SURE, PoolLookup

    names = [n for n in NAMES if n.isascii()] + ["a.equ", "A.EQU", "Equ"]
    folders = ["", "equipment/character", "Mixed/CASE", "/", "end/", "a"]
    names = [n for n in names for _ in range(len(folders))]
    index = _index_over(names, folders)
    lookup = PoolLookup(index._files, index._pools, index.resolve_path)
    assert lookup.usable
    keys = {norm_path(p) for p in index.display_paths()}
    keys |= {k + "x" for k in keys} | {"no/such.equ", "a", "equ", "mixed/case/equ", "ünï/x", ""}
    undecided = []
    for key in sorted(keys):
        got = lookup.find(key)
        if got == NOT_SURE:
            undecided.append(key)
            continue
        assert got == index.find(key), key
    assert all(k == "" or k.endswith("/") for k in undecided)  # empty names: only the index decides


def test_reading_one_file_after_opening_builds_no_path_index(small_archives):
    with open_nkpi(small_archives["legacy"]) as ar:
        want = ar._path_index().display_paths()
    with open_nkpi(small_archives["legacy"]) as ar:
        assert ar.read(want[123].upper()) and ar.exists(want[7]) and not ar.exists("no/such.equ")
        assert ar.file_info(want[200]).path == want[200]
        assert ar._index is None  # answered from the name pool
        for path in want[:20]:  # past POOL_LOOKUPS the index is built and answers the same
            assert ar.read(path) == ar.read_entry(ar._path_index().find(norm_path(path)))
        assert ar._index is not None
