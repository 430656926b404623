"""The folder index behind `pvf_list_dir` and the UI tree: every folder is reachable from the root."""

from __future__ import annotations

from deskbridge.kinds.pvf.store import DirIndex


def test_deep_first_files_link_every_folder_to_its_parent() -> None:
    paths = [
        "n_string.lst",
        "equipment/character/common/amulet/a.equ",
        "equipment/character/fighter/shoes/b.equ",
        "equipment/equipment.lst",
        "skill/swordman/c.skl",
        "Skill/Swordman/D.skl",
    ]
    index = DirIndex(paths)
    assert index.dirs[""] == {"equipment", "skill"}
    assert index.dirs["equipment"] == {"equipment/character"}
    assert index.dirs["equipment/character"] == {"equipment/character/common", "equipment/character/fighter"}
    assert index.dirs["equipment/character/common"] == {"equipment/character/common/amulet"}
    assert index.dirs["skill"] == {"skill/swordman"}
    # every file's folder is reachable from the root, folder by folder
    seen = set()
    todo = [""]
    while todo:
        d = todo.pop()
        seen.add(d)
        todo += index.dirs.get(d, ())
    assert set(index.files) <= seen
