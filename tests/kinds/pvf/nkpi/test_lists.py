"""nkpi registries, `<table::key>` references and `_indexhash.etc`."""

from __future__ import annotations

import shutil

from deskbridge.kinds.pvf.archive.nkpi import open_nkpi
from deskbridge.kinds.pvf.archive.nkpi_lists import StringRefs, build_list, read_indexhash, read_list
from deskbridge.kinds.pvf.script.nkpi_codec import pack_records


def _vector(nkpi_vectors, name):
    return next(p for p, _ in nkpi_vectors if p.name == name)


def test_directory_relative_list_resolves_to_archive_paths(nkpi_vectors):
    with open_nkpi(_vector(nkpi_vectors, "vs_jp_shared.pvf")) as ar:
        reg = read_list(ar, "equipment/equipment.lst")
        assert not reg.root_relative
        assert reg.entries[0] == (1, "character/swordman/weapon/shortsword.equ")
        assert reg.resolve(101) == "equipment/character/common/coat/clothcoat.equ"
        assert ar.exists(reg.resolve(101))
        assert reg.find_id("EQUIPMENT/character/swordman/weapon/longsword.equ") == 2
        assert build_list(ar, reg) == ar.read("equipment/equipment.lst")  # byte-identical rebuild


def test_string_reference_lookup_through_n_string(nkpi_vectors):
    with open_nkpi(_vector(nkpi_vectors, "vs_jp_shared.pvf")) as ar:
        refs = StringRefs(ar)
        assert refs.lookup(0, "name_2") == "騎士の長剣"
        assert refs.lookup(1, "name_mp") == "MPポーション"
        assert (
            refs.resolve("<0::name_1> / <1::name_hp> / <7::missing>")
            == "Rusty Short Sword / HP Potion / <7::missing>"
        )


def test_root_relative_lists_of_the_110us_layout(small_archives):
    path = small_archives["paged"]
    with open_nkpi(path, keys=str(path) + ".keys.json") as ar:
        reg = read_list(ar, "list/equipment.lst")
        assert reg.root_relative
        first_id, first_path = reg.entries[0]
        assert first_path.startswith("equipment/")
        assert reg.resolve(first_id) == first_path and ar.exists(first_path)


def test_indexhash_is_read_and_preserved(small_archives, tmp_path):
    src = tmp_path / "ih.pvf"
    shutil.copy(small_archives["legacy"], src)
    with open_nkpi(src) as ar:
        recs = []
        for item_id, value in ((10, 4000000000), (11, 17)):
            recs += [(0, item_id), (6, ar.pools.add(str(value)))]
        payload = pack_records(recs)
        ar.stage("list/equipment_indexhash.etc", payload)
        ar.stage_text(ar.paths()[3], ar.read_text(ar.paths()[3]).replace("[name]\n\t`", "[name]\n\t`Z", 1))
        ar.save()
    with open_nkpi(src) as again:
        assert read_indexhash(again, "list/equipment_indexhash.etc") == {10: 4000000000, 11: 17}
        assert again.read("list/equipment_indexhash.etc") == payload


def test_archive_refs_resolve_synthetic_type8_references(small_archives):
    with open_nkpi(small_archives["legacy"]) as ar:
        refs = ar.refs()
        assert refs is ar.refs()
        text = ar.read_text(ar.paths()[1])
        ref = text.split("{8=`", 1)[1].split("`}", 1)[0]  # e.g. <0::name_85>
        assert refs.resolve(ref) != ref
