"""extract → pack → extract through the shared tree tools leaves every nkpi payload unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.tree import extract_tree, pack_tree


def _payloads(path: Path, keys=None) -> dict[str, bytes]:
    with open_archive(path, keys=keys) as ar:
        return {p: ar.read(p) for p in ar.paths()}


@pytest.mark.parametrize("which", ["vs_jp_shared.pvf", "vs_cn_shared.pvf", "synth-legacy", "synth-paged"])
def test_extract_pack_extract_keeps_payloads(nkpi_vectors, small_archives, tmp_path, which):
    if which.startswith("synth-"):
        src = small_archives[which.removeprefix("synth-")]
    else:
        src = next(p for p, _ in nkpi_vectors if p.name == which)
    keys = str(src) + ".keys.json" if which == "synth-paged" else None
    with open_archive(src, keys=keys) as ar:
        extract_tree(ar, tmp_path / "tree")
    pack_tree(tmp_path / "tree", tmp_path / "packed.pvf", like=src, keys=keys)
    assert _payloads(tmp_path / "packed.pvf", keys) == _payloads(src, keys)
