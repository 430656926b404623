"""`core.guarded_save`: a save goes through only while the file is still the version the saver read."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.guarded_save import ABSENT_SHA256, save_if_unchanged

LIMITS = {
    "max_bytes": 1024,
    "shown_as": "notes.txt",
    "changed": "notes.txt changed",
    "hint": "Read it again.",
}


def sha(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


def test_create_then_save_over_the_version_read(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "notes.txt"
    first = save_if_unchanged(path, b"one", ABSENT_SHA256, **LIMITS)
    assert first.created and first.sha256 == sha(b"one") and path.read_bytes() == b"one"
    second = save_if_unchanged(path, b"two", first.sha256, **LIMITS)
    assert not second.created and second.sha256 == sha(b"two") and path.read_bytes() == b"two"


def test_a_file_saved_elsewhere_meanwhile_is_refused_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    read = save_if_unchanged(path, b"mine", None, **LIMITS)
    path.write_bytes(b"theirs")  # another tab saved it
    with pytest.raises(BridgeError) as err:
        save_if_unchanged(path, b"mine again", read.sha256, **LIMITS)
    assert err.value.code == ErrorCode.TARGET_CHANGED and err.value.message == "notes.txt changed"
    assert err.value.hint == "Read it again." and err.value.data == {"currentSha256": sha(b"theirs")}
    assert path.read_bytes() == b"theirs"


def test_creating_a_name_that_exists_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"there")
    with pytest.raises(BridgeError) as err:
        save_if_unchanged(path, b"new", ABSENT_SHA256, **LIMITS)
    assert err.value.code == ErrorCode.TARGET_CHANGED
    assert path.read_bytes() == b"there"


def test_a_deleted_file_is_refused_when_its_old_version_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    read = save_if_unchanged(path, b"one", None, **LIMITS)
    path.unlink()
    with pytest.raises(BridgeError) as err:
        save_if_unchanged(path, b"two", read.sha256, **LIMITS)
    assert err.value.data == {"currentSha256": ABSENT_SHA256}
    assert not path.exists()


def test_backup_keeps_the_previous_version(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    save_if_unchanged(path, b"one", None, backup=True, **LIMITS)
    assert not (tmp_path / "notes.txt.bak").exists()  # nothing to keep on create
    save_if_unchanged(path, b"two", sha(b"one"), backup=True, **LIMITS)
    assert (tmp_path / "notes.txt.bak").read_bytes() == b"one" and path.read_bytes() == b"two"
