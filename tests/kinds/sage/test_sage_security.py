"""Issue 8, "SAGE scope escape" and FIFOs/devices: a hostile mod must not make the index read outside the mod
and SDK folders, hang on a pipe or run out of memory on a device. The attacks run on a copy of the real
RA3Afterdash mod indexed against EA's RA3 XML; before the fix each of them read the outside file (or hung)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.sage import queries
from deskbridge.kinds.sage.indexer import ProjectIndexer

pytestmark = pytest.mark.security

SECRET_DOC = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<AssetDeclaration xmlns="uri:ea.com:eala:asset">\n'
    '  <GameObject id="{id}" inheritFrom="BaseInfantry"/>\n'
    "</AssetDeclaration>\n"
)
SECRET_FRAGMENT = (
    '<?xml version="1.0" encoding="utf-8"?>\n'
    '<CreateObjectDie xmlns="uri:ea.com:eala:asset" id="StolenModule" CreationList="StolenOCL"/>\n'
)


def hostile_mod(tmp: Path, sage_data) -> tuple[Path, Path]:
    """A copy of RA3Afterdash whose Mod.xml includes files outside every root in each way BAB accepts."""
    outside = tmp / "outside"
    outside.mkdir()
    for name in ("abs", "climb", "data", "link", "dangling-target-never-made"):
        if name != "dangling-target-never-made":
            (outside / f"{name}.xml").write_text(SECRET_DOC.format(id=f"Stolen_{name}"))
    (outside / "frag.xml").write_text(SECRET_FRAGMENT)
    mod = tmp / "mods" / "Hostile"
    shutil.copytree(sage_data.mod, mod)
    data = mod / "Data"
    os.symlink(outside / "link.xml", data / "Link.xml")
    os.symlink("/dev/zero", data / "Zero.xml")
    os.mkfifo(data / "Pipe.xml")
    climb = "../" * (len(data.parts) + 2)  # more `..` than there are folders: stops at `/`
    evil = data / "Evil.xml"
    evil.write_text(
        '<?xml version="1.0" encoding="utf-8"?>\n'
        '<AssetDeclaration xmlns="uri:ea.com:eala:asset" xmlns:xi="http://www.w3.org/2001/XInclude">\n'
        "  <Includes>\n"
        f'    <Include type="all" source="{outside / "abs.xml"}"/>\n'
        f'    <Include type="all" source="{climb}{str(outside / "climb.xml").lstrip("/")}"/>\n'
        f'    <Include type="all" source="DATA:{climb}{str(outside / "data.xml").lstrip("/")}"/>\n'
        '    <Include type="all" source="DATA:../../../etc/no-such-file.xml"/>\n'
        '    <Include type="all" source="Link.xml"/>\n'
        '    <Include type="all" source="Zero.xml"/>\n'
        '    <Include type="all" source="Pipe.xml"/>\n'
        "  </Includes>\n"
        '  <GameObject id="EvilCarrier">\n'
        "    <Behaviors>\n"
        f'      <xi:include href="{outside / "frag.xml"}"/>\n'
        "    </Behaviors>\n"
        "  </GameObject>\n"
        "</AssetDeclaration>\n"
    )
    mod_xml = data / "Mod.xml"
    text = mod_xml.read_text(encoding="utf-8-sig")
    mod_xml.write_text(
        text.replace("</Includes>", '<Include type="all" source="Evil.xml"/></Includes>', 1), encoding="utf-8"
    )
    return mod, outside


@pytest.fixture(scope="module")
def hostile(sage_data, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("sage-hostile")
    mp = pytest.MonkeyPatch()
    mp.setenv("DESKBRIDGE_HOME", str(tmp / "home"))
    mod, outside = hostile_mod(tmp, sage_data)
    indexer = ProjectIndexer(mod, sage_data.sdk, use_cache=False)
    index = indexer.open_sync()  # must finish: a FIFO read used to block here forever
    yield indexer, index, mod, outside
    mp.undo()


def test_includes_outside_the_roots_are_reported_and_never_read(hostile):
    _indexer, index, mod, outside = hostile
    stolen = [k for k in index.by_id if k.startswith("stolen")]
    assert stolen == []
    assert not any(p.startswith(str(outside)) for p in index.files)
    outside_diags = [d for d in index.diagnostics if d.code == "include-outside-roots"]
    evil = str(mod / "Data" / "Evil.xml")
    lines = sorted(d.line for d in outside_diags if d.file == evil)
    # abs, climb, DATA:climb, DATA:../../../etc (absent: the same answer), Link.xml, Zero.xml, xi:include
    assert lines == [4, 5, 6, 7, 8, 9, 14], [(d.line, d.message) for d in outside_diags]
    # Named as written: the links' diagnostics do not say where they lead.
    for d in outside_diags:
        if d.line in (8, 9):
            assert str(outside) not in d.message and "/dev/zero" not in d.message, d.message
    # The fragment's reference never reached the index either.
    assert "stolenocl" not in index.refs_to


def test_a_fifo_include_is_a_diagnostic_and_the_index_finishes(hostile):
    _indexer, index, mod, _outside = hostile
    pipe = [d for d in index.diagnostics if d.code == "unreadable-file"]
    assert [(d.file, "not a regular file" in d.message) for d in pipe] == [
        (str(mod / "Data" / "Pipe.xml"), True)
    ]
    assert index.complete and index.stats["assetCount"] > 17000


def test_tools_refuse_outside_paths_with_one_error_whether_or_not_they_exist(hostile):
    indexer, index, _mod, outside = hostile

    def refusal(fn, given, *args):
        with pytest.raises(BridgeError) as err:
            fn(*args)
        assert err.value.code == "ACCESS_DENIED"
        assert str(outside) not in err.value.message or given.startswith(str(outside))
        return err.value.message.replace(repr(given), "<given>")

    existing, absent = str(outside / "abs.xml"), str(outside / "absent.xml")
    msgs = {
        refusal(queries.is_file_active, p, index, p)
        for p in (existing, absent, "/etc/passwd", "/etc/no-such", "../../../../../../etc/passwd")
    }
    msgs |= {
        refusal(queries.resolve_include, s, index, indexer.resolver, s)
        for s in (existing, absent, "DATA:../../../../../../../etc/passwd", "../../../../../../../etc/nope")
    }
    msgs.add(
        refusal(queries.resolve_include, "/etc/passwd", index, indexer.resolver, "Mod.xml", "/etc/passwd")
    )
    # A link inside the mod that leads outside is refused as it is named, never as where it leads.
    msgs.add(refusal(queries.is_file_active, "Data/Link.xml", index, "Data/Link.xml"))
    msgs.add(refusal(queries.is_file_active, "Data/Zero.xml", index, "Data/Zero.xml"))
    assert len(msgs) == 1, msgs
    # Inside the roots the same tools still answer.
    assert queries.is_file_active(index, "Data/Mod.xml")["active"] is True
    assert queries.resolve_include(index, indexer.resolver, "DATA:static.xml")["resolved"]


def test_get_definition_refuses_a_file_swapped_for_a_link_after_indexing(hostile, tmp_path):
    _indexer, index, mod, outside = hostile
    (tmp_path / "mod").mkdir()
    target = mod / "Data" / "Evil.xml"
    saved = target.read_bytes()
    try:
        target.unlink()
        os.symlink(outside / "abs.xml", target)
        with pytest.raises(BridgeError) as err:
            queries.get_definition(index, "GameObject", "EvilCarrier")
        assert err.value.code == "ACCESS_DENIED" and str(outside) not in err.value.message
        target.unlink()
        os.mkfifo(target)
        with pytest.raises(BridgeError) as err:
            queries.get_definition(index, "GameObject", "EvilCarrier")
        assert "not a regular file" in err.value.message
    finally:
        target.unlink()
        target.write_bytes(saved)
    assert queries.get_definition(index, "GameObject", "EvilCarrier")["excerpt"].startswith("  <GameObject")
