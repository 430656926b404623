"""The library's public save steps — `write`, `verify_written`, `rebind` — as a caller that writes through
`core.files` itself (the PVF workspace's Store) uses them, on both families."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import atomic_write, publish_new
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.synth.classic import synth_classic
from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi


@pytest.fixture(scope="module", params=["classic", "nkpi"])
def source(request, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("wvr") / f"{request.param}.pvf"
    if request.param == "classic":
        synth_classic(path, 200, seed=5)
    else:
        synth_nkpi(path, 200, 5, "legacy")
    return path


@pytest.fixture
def archive_copy(source, tmp_path) -> Path:
    target = tmp_path / "Script.pvf"
    target.write_bytes(source.read_bytes())
    return target


def _edit(ar) -> str:
    path = next(p for p in ar.paths() if p.endswith(".equ"))
    ar.stage_text(path, ar.read_text(path).replace("[name2]", "[name2]\n\t`rebound`", 1))
    return path


def test_write_verify_rebind_through_core_files_in_place(archive_copy):
    ar = open_archive(archive_copy)
    path = _edit(ar)
    staged = dict(ar.staged())
    checked = []

    def verify(tmp: Path) -> None:
        checked.append(ar.verify_written(tmp))

    result = atomic_write(archive_copy, lambda out: ar.write(out, None, None), verify=verify)
    assert checked == [len(staged)] and checked[0] >= 1
    ar.rebind(archive_copy, result.identity)
    assert not ar.dirty and ar.source == archive_copy
    assert "`rebound`" in ar.read_text(path)
    fresh = open_archive(archive_copy)
    assert fresh.read(path) == staged[path] == ar.read(path)
    # bound to the written file: a second edit saves again through the library's own save
    _edit(ar)
    assert ar.save().verified >= 1
    assert open_archive(archive_copy).read_text(path).count("`rebound`") == 2


def test_verify_written_refuses_a_file_that_does_not_hold_the_staged_change(archive_copy, tmp_path):
    ar = open_archive(archive_copy)
    _edit(ar)
    before = archive_copy.read_bytes()

    def write_the_original(out) -> None:  # what a writer bug would produce: the change is missing
        out.write(before)

    with pytest.raises(BridgeError) as err:
        publish_new(tmp_path / "copy.pvf", write_the_original, verify=ar.verify_written)
    assert err.value.code is ErrorCode.INTERNAL and "verify failed" in err.value.message
    assert not (tmp_path / "copy.pvf").exists() and archive_copy.read_bytes() == before
    assert ar.dirty  # nothing was re-bound


def test_verify_written_of_a_copy_leaves_the_archive_on_its_source(archive_copy, tmp_path):
    ar = open_archive(archive_copy)
    path = _edit(ar)
    out = tmp_path / "copy.pvf"
    publish_new(out, lambda f: ar.write(f, None, None), verify=ar.verify_written)
    assert ar.dirty and ar.source == archive_copy  # a copy: no rebind
    assert open_archive(out).read(path) == ar.read(path)
    assert ar.verify_written(out) >= 1  # the same check again, on the published copy
    with pytest.raises(BridgeError):
        ar.verify_written(archive_copy)  # the source does not hold the staged change


def test_nothing_staged_verifies_nothing_and_writes_the_source_bytes(archive_copy, tmp_path):
    ar = open_archive(archive_copy)
    out = tmp_path / "same.pvf"
    publish_new(out, lambda f: ar.write(f, None, None), verify=ar.verify_written)
    assert out.read_bytes() == archive_copy.read_bytes()
    assert ar.verify_written(out) == 0
