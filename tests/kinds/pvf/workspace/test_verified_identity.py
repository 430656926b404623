"""A reopen reuses the verified identity of an unchanged archive instead of hashing it; any change of the
file's stat (content rewritten with its mtime restored, a replaced file) falls back to hashing, and a file
changed moments before it was hashed is not recorded at all (store.py `VerifiedIdentities`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.store import PvfStore, VerifiedIdentities

pytestmark = pytest.mark.skipif(os.name != "posix", reason="ctime is the creation time elsewhere")


def _no_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(path: object) -> files.FileIdentity:
        raise AssertionError("hashed although the identity was recorded")

    monkeypatch.setattr(files, "file_identity", refuse)


def test_an_unchanged_file_is_not_hashed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(os.urandom(300_000))
    ids = VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0)
    first = ids.identity(target)
    assert first == files.file_identity(target)
    _no_hash(monkeypatch)
    assert ids.identity(target) == first
    assert VerifiedIdentities(tmp_path / "ids.json").identity(target) == first  # persisted


def test_rewritten_content_with_the_old_mtime_is_hashed(tmp_path: Path) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(b"x" * 200_000)
    ids = VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0)
    first = ids.identity(target)
    st = target.stat()
    with target.open("r+b") as f:
        f.write(b"y")  # same size…
    os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))  # …same mtime: only ctime tells
    again = ids.identity(target)
    assert again.sha256 != first.sha256
    assert again == files.file_identity(target)


def test_a_replaced_file_is_hashed(tmp_path: Path) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(b"a" * 100_000)
    ids = VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0)
    first = ids.identity(target)
    other = tmp_path / "b.pvf"
    other.write_bytes(b"b" * 100_000)
    os.utime(other, ns=(first.mtime_ns, first.mtime_ns))
    os.replace(other, target)
    assert ids.identity(target).sha256 == files.file_identity(target).sha256 != first.sha256


def test_a_file_changed_just_before_the_hash_is_not_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(b"z" * 100_000)  # ctime is now: within the quiet window
    ids = VerifiedIdentities(tmp_path / "ids.json")
    assert ids.identity(target) == files.file_identity(target)
    assert not (tmp_path / "ids.json").exists()


def test_a_record_of_another_scheme_or_garbage_is_ignored(tmp_path: Path) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(b"q" * 1000)
    st = target.stat()
    key = f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"
    (tmp_path / "ids.json").write_text(f'{{"scheme": "sha256-1m", "files": {{"{key}": "{"0" * 64}"}}}}')
    ids = VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0)
    assert ids.identity(target) == files.file_identity(target)
    (tmp_path / "ids.json").write_text("not json")
    assert ids.identity(target) == files.file_identity(target)


def test_the_store_answers_the_lifecycle_with_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.pvf"
    target.write_bytes(b"s" * 70_000)
    store = PvfStore(VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0))
    with pytest.raises(BridgeError) as missing:
        store.file_identity(tmp_path / "missing.pvf")
    assert missing.value.code is ErrorCode.NOT_FOUND
    first = store.file_identity(target)
    _no_hash(monkeypatch)
    assert store.file_identity(target) == first


def test_a_reopened_classic_archive_takes_its_earlier_encoding_detection(
    archives: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Detection reads only the archive's bytes, so its answer is kept by content digest: a reopen of the
    same bytes skips it, and other bytes (or an unrecorded file) detect again."""
    from deskbridge.kinds.pvf.archive import classic

    target = tmp_path / "Script.pvf"
    target.write_bytes(archives["classic"].read_bytes())
    store = PvfStore(VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0))
    store.file_identity(target)
    first = store.load(target)
    detected = first.archive.encoding
    first.archive.close()
    calls: list[int] = []
    real = classic.detect_encoding
    monkeypatch.setattr(classic, "detect_encoding", lambda entries: calls.append(1) or real(entries))
    store.file_identity(target)
    again = store.load(target)
    assert again.archive.encoding == detected and calls == []
    again.archive.close()
    other = tmp_path / "Other.pvf"  # not recorded (never identified): detected, nothing remembered
    other.write_bytes(target.read_bytes())
    fresh = store.load(other)
    assert fresh.archive.encoding == detected and calls == [1]
    fresh.archive.close()


def test_a_damaged_encoding_record_is_ignored_not_an_open_error(
    archives: dict[str, Path], tmp_path: Path
) -> None:
    import json

    target = tmp_path / "Script.pvf"
    target.write_bytes(archives["classic"].read_bytes())
    record = tmp_path / "ids.json"
    store = PvfStore(VerifiedIdentities(record, quiet_ns=0))
    store.file_identity(target)
    first = store.load(target)
    detected = first.archive.encoding
    first.archive.close()
    data = json.loads(record.read_text("utf-8"))
    assert data["encodings"]  # the detection was kept
    data["encodings"] = {digest: "no-such-codec" for digest in data["encodings"]}
    record.write_text(json.dumps(data), "utf-8")
    again = store.load(target)  # opens, detecting again
    assert again.archive.encoding == detected
    again.archive.close()


def test_a_reused_identity_brings_its_chunk_digests_back_and_a_damaged_record_is_ignored(
    tmp_path: Path,
) -> None:
    """The first save after a reopen reuses the chunk digests of what it copies (PVF-SAVE) only if they were
    kept with the identity: a later process adopts them, unless the record no longer reproduces the digest."""
    target = tmp_path / "a.pvf"
    target.write_bytes(os.urandom(3 << 20))
    ids = VerifiedIdentities(tmp_path / "ids.json", quiet_ns=0)
    first = ids.identity(target)
    st = os.stat(target)
    kept = files.chunk_record(st)
    assert kept is not None and len(kept) > 40  # several chunks
    files._CHUNKS._items.clear()  # a new process
    assert VerifiedIdentities(tmp_path / "ids.json").identity(target) == first
    assert files.chunk_record(st) == kept

    record = tmp_path / "chunks" / first.sha256
    damaged = bytearray(record.read_bytes())
    damaged[45] ^= 1
    record.write_bytes(bytes(damaged))
    files._CHUNKS._items.clear()
    assert VerifiedIdentities(tmp_path / "ids.json").identity(target) == first  # the identity still holds
    assert files.chunk_record(st) is None  # but chunks that do not reproduce it are not taken
    assert not files.adopt_chunk_record(st, first.sha256, kept[:-1])  # nor a cut-off record
