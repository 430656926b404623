"""`NkpiArchive.paths()` without staged changes is a `PathList`: decoded on demand, and in every way a
caller uses it (length, indexing, slices, iteration, membership, equality) the list it replaces."""

from __future__ import annotations

import pytest

from deskbridge.kinds.pvf.archive import nkpi_index
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
