"""One path rule: names are stored lower case, and two names that differ only in case are refused with both.

Stored names are checked with a minimal classic tree reader written here from the public format facts
(XOR 0x81A79011 + ROR 6 per dword, research/pvf.md §1A), not with our reader."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest
from typer.testing import CliRunner

from deskbridge.cli import app
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import build_classic
from deskbridge.kinds.pvf.paths import case_duplicates, normalize_archive_path
from deskbridge.kinds.pvf.synth.classic import synth_classic

runner = CliRunner()
SCRIPT = b"\xb0\xd0" + bytes([2, 7, 0, 0, 0])


def stored_names(data: bytes) -> list[str]:
    """Tree paths exactly as stored, read without deskbridge's reader."""
    g = int.from_bytes(data[:4], "little")
    _version, tree_len, tree_crc, count = struct.unpack_from("<iiIi", data, 4 + g)
    words = np.frombuffer(data[20 + g : 20 + g + tree_len], "<u4") ^ np.uint32(0x81A79011 ^ tree_crc)
    plain = ((words >> np.uint32(6)) | (words << np.uint32(26))).astype("<u4").tobytes()
    names, pos = [], 0
    for _ in range(count):
        _nh, plen = struct.unpack_from("<II", plain, pos)
        names.append(plain[pos + 8 : pos + 8 + plen].decode("cp949"))
        pos += 8 + plen + 12
    return names


def test_normalize_archive_path_is_the_lookup_and_stored_form():
    assert normalize_archive_path("\\Monster\\WhiteBear.CRE") == "monster/whitebear.cre"
    assert case_duplicates(["a/B.equ", "x.equ", "A/b.equ", "a\\b.EQU"]) == [
        ("a/B.equ", "A/b.equ"),
        ("a/B.equ", "a\\b.EQU"),
    ]


def test_pack_refuses_a_tree_with_case_variant_names_naming_both(tmp_path):
    tree = tmp_path / "tree"
    (tree / "monster").mkdir(parents=True)
    (tree / "monster" / "whitebear.cre").write_bytes(SCRIPT)
    (tree / "monster" / "WhiteBear.cre").write_bytes(SCRIPT)
    out = tmp_path / "out.pvf"
    res = runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)])
    assert res.exit_code == 2, res.output
    assert (
        "'monster/WhiteBear.cre' and 'monster/whitebear.cre'" in res.output
        and "INVALID_ARGUMENT" in res.output
    )
    assert not out.exists()


def test_pack_stores_every_path_in_lower_case(tmp_path):
    tree = tmp_path / "tree"
    (tree / "Monster").mkdir(parents=True)
    (tree / "Monster" / "NewBear.cre").write_bytes(SCRIPT)
    (tree / "etc.bin").write_bytes(b"\x01\x02")
    out = tmp_path / "out.pvf"
    assert runner.invoke(app, ["pvf", "pack", str(tree), "-o", str(out)]).exit_code == 0
    assert sorted(stored_names(out.read_bytes())) == ["etc.bin", "monster/newbear.cre"]


def test_a_new_file_staged_in_the_library_is_stored_lower_case(tmp_path):
    src = tmp_path / "a.pvf"
    synth_classic(src, 30, seed=2)
    ar = open_archive(src)
    ar.stage("Monster/NewBear.cre", SCRIPT)
    assert ar.exists("monster/newbear.cre") and "monster/newbear.cre" in ar.paths()
    ar.save_copy(tmp_path / "b.pvf")
    assert "monster/newbear.cre" in stored_names((tmp_path / "b.pvf").read_bytes())


def test_a_new_nkpi_file_is_stored_lower_case(tmp_path):
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    src = tmp_path / "n.pvf"
    synth_nkpi(src, 40, 3, "legacy")
    ar = open_archive(src)
    ar.stage_text("Monster/NewBear.mob", "[name]\n`bear`\n")
    ar.save_copy(tmp_path / "m.pvf")
    again = open_archive(tmp_path / "m.pvf")
    assert again.entry_path(len(again.files) - 1) == "monster/newbear.mob"


def test_stage_many_refuses_case_variants_and_stages_nothing(tmp_path):
    src = tmp_path / "a.pvf"
    synth_classic(src, 30, seed=2)
    ar = open_archive(src)
    with pytest.raises(BridgeError) as err:
        ar.stage_many({"x/WhiteBear.cre": SCRIPT, "x/whitebear.cre": SCRIPT})
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert err.value.data["paths"] == ["x/WhiteBear.cre", "x/whitebear.cre"]
    assert not ar.staged()


def test_build_classic_refuses_case_variants():
    with pytest.raises(BridgeError) as err:
        build_classic(io.BytesIO(), [("a.equ", SCRIPT), ("A.equ", SCRIPT)])
    assert "'a.equ' and 'A.equ'" in err.value.message


def test_verify_flags_an_archive_that_already_holds_case_variants(tmp_path):
    entries = []
    blocks = b""
    for name in (b"monster/whitebear.cre", b"monster/WhiteBear.cre"):
        crc = cc.file_checksum(SCRIPT, cc.name_hash(name))
        entries.append(struct.pack("<II", cc.name_hash(name), len(name)) + name)
        entries.append(struct.pack("<iIi", len(SCRIPT), crc, len(blocks)))
        blocks += cc.encrypt(SCRIPT, crc)
    tree = cc.padded(b"".join(entries))
    crc = cc.tree_checksum(tree, 2)
    guid = b"00000000-0000-0000-0000-000000000000"
    head = struct.pack("<i", len(guid)) + guid + struct.pack("<iiIi", 66282, len(tree), crc, 2)
    path = tmp_path / "dup.pvf"
    path.write_bytes(head + cc.encrypt(tree, crc) + blocks)
    res = runner.invoke(app, ["pvf", "verify", str(path)])
    assert res.exit_code == 1, res.output
    assert "duplicates: 'monster/whitebear.cre' and 'monster/WhiteBear.cre'" in res.output


@pytest.mark.parametrize(
    "name", ["x/new\nbear.cre", "x/\x1b]0;owned\x07.cre", "x/bear\x7f.cre", "x/bear\x85.cre"]
)
@pytest.mark.parametrize("family", ["classic", "nkpi"])
def test_stage_refuses_a_new_name_with_a_control_character(tmp_path, name, family):
    """The library is the last line: a newline splits `.lst` registries, ESC drives the terminal of whoever
    lists the archive, and DEL / C1 are invisible. The message shows the name escaped, never raw."""
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    src = tmp_path / "a.pvf"
    synth_classic(src, 30, seed=2) if family == "classic" else synth_nkpi(src, 40, 3, "legacy")
    ar = open_archive(src)
    with pytest.raises(BridgeError) as err:
        ar.stage(name, SCRIPT)
    assert err.value.code == ErrorCode.INVALID_ARGUMENT
    assert "control character" in err.value.message
    assert not any(c in err.value.message + err.value.data["path"] for c in "\n\x1b\x07\x7f\x85")
    assert not ar.staged()


def test_check_archive_path_refuses_del_and_c1_as_well_as_c0():
    from deskbridge.kinds.pvf.paths import check_archive_path

    for bad in ("a/b\x01.equ", "a/b\x7f.equ", "a/b\x9b.equ"):
        with pytest.raises(BridgeError):
            check_archive_path(bad)
    assert (
        check_archive_path("a/b\u00a0c.equ") == "a/b\u00a0c.equ"
    )  # NO-BREAK SPACE is a character, not a control
