"""Atomic replace, no-overwrite publish, file identity and failure reporting of `core.files`."""

from __future__ import annotations

import os
import sys

import pytest

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import (
    FileIdentity,
    atomic_write,
    file_identity,
    publish_directory,
    publish_new,
    remove_stale_temps,
    rename_noreplace,
)


def leftovers(d):
    return [p.name for p in d.iterdir() if p.name.startswith(files.TEMP_PREFIX)]


def test_atomic_write_creates_and_replaces_content(tmp_path):
    target = tmp_path / "a.txt"
    r1 = atomic_write(target, b"one")
    assert target.read_bytes() == b"one" and r1.identity.size == 3
    r2 = atomic_write(target, lambda f: f.write(b"two-streamed"))
    assert target.read_bytes() == b"two-streamed"
    assert r2.identity.sha256 != r1.identity.sha256
    assert leftovers(tmp_path) == []


def test_atomic_write_keeps_permission_bits(tmp_path):
    target = tmp_path / "a.sh"
    target.write_bytes(b"old")
    os.chmod(target, 0o750)
    atomic_write(target, b"new")
    assert (target.stat().st_mode & 0o777) == 0o750


def test_backup_holds_the_previous_content(tmp_path):
    target = tmp_path / "Script.pvf"
    target.write_bytes(b"v1")
    r = atomic_write(target, b"v2", backup=True)
    assert r.backup_path == tmp_path / "Script.pvf.bak"
    assert r.backup_path.read_bytes() == b"v1"
    atomic_write(target, b"v3", backup=True)
    assert r.backup_path.read_bytes() == b"v2" and target.read_bytes() == b"v3"


def test_backup_of_a_new_file_is_not_made(tmp_path):
    r = atomic_write(tmp_path / "new.txt", b"x", backup=True)
    assert r.backup_path is None


def test_write_with_matching_identity_succeeds(tmp_path):
    target = tmp_path / "s.pvf"
    target.write_bytes(b"orig")
    seen = file_identity(target)
    atomic_write(target, b"new", expected_identity=seen)
    assert target.read_bytes() == b"new"


def test_source_changed_on_disk_is_refused_and_nothing_written(tmp_path):
    target = tmp_path / "s.pvf"
    target.write_bytes(b"orig")
    seen = file_identity(target)
    target.write_bytes(b"edited by another program")
    with pytest.raises(BridgeError) as ei:
        atomic_write(target, b"ours", expected_identity=seen)
    assert ei.value.code == ErrorCode.SOURCE_CHANGED
    assert ei.value.data["diskCommitted"] is False
    assert target.read_bytes() == b"edited by another program"
    assert leftovers(tmp_path) == []


def test_same_size_same_mtime_change_is_caught_by_the_content_hash(tmp_path):
    target = tmp_path / "s.bin"
    target.write_bytes(b"aaaa")
    seen = file_identity(target)
    with open(target, "r+b") as f:
        f.write(b"bbbb")
    os.utime(target, ns=(seen.mtime_ns, seen.mtime_ns))
    with pytest.raises(BridgeError) as ei:
        atomic_write(target, b"ours", expected_identity=seen, changed_code=ErrorCode.TARGET_CHANGED)
    assert ei.value.code == ErrorCode.TARGET_CHANGED


def test_change_between_temp_write_and_rename_is_caught(tmp_path):
    target = tmp_path / "s.txt"
    target.write_bytes(b"orig")
    seen = file_identity(target)

    def slow_writer(f):
        f.write(b"ours")
        target.write_bytes(b"theirs, written while we serialised")

    with pytest.raises(BridgeError) as ei:
        atomic_write(target, slow_writer, expected_identity=seen)
    assert ei.value.code == ErrorCode.SOURCE_CHANGED
    assert ei.value.data["diskTouched"] is True and ei.value.data["diskCommitted"] is False
    assert target.read_bytes() == b"theirs, written while we serialised"
    assert leftovers(tmp_path) == []


def test_expected_identity_of_a_missing_file_is_target_changed(tmp_path):
    target = tmp_path / "gone.txt"
    target.write_bytes(b"x")
    seen = file_identity(target)
    target.unlink()
    with pytest.raises(BridgeError) as ei:
        atomic_write(target, b"y", expected_identity=seen, changed_code=ErrorCode.TARGET_CHANGED)
    assert ei.value.code == ErrorCode.TARGET_CHANGED and not target.exists()


def test_failing_serialiser_leaves_original_intact_and_no_temp(tmp_path):
    target = tmp_path / "a.txt"
    target.write_bytes(b"orig")

    def boom(f):
        f.write(b"half")
        raise RuntimeError("serialiser bug")

    with pytest.raises(RuntimeError):
        atomic_write(target, boom)
    assert target.read_bytes() == b"orig" and leftovers(tmp_path) == []


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="needs POSIX permissions, non-root")
def test_unwritable_directory_reports_access_denied_disk_untouched(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    (d / "a.txt").write_bytes(b"orig")
    os.chmod(d, 0o555)
    try:
        with pytest.raises(BridgeError) as ei:
            atomic_write(d / "a.txt", b"new")
    finally:
        os.chmod(d, 0o755)
    assert ei.value.code == ErrorCode.ACCESS_DENIED
    assert ei.value.data["originalIntact"] is True and ei.value.data["diskCommitted"] is False
    assert (d / "a.txt").read_bytes() == b"orig"


def test_writing_onto_a_directory_is_refused(tmp_path):
    with pytest.raises(BridgeError) as ei:
        atomic_write(tmp_path, b"x")
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


def test_publish_new_refuses_an_existing_target_and_leaves_it_alone(tmp_path):
    target = tmp_path / "out.pvf"
    publish_new(target, b"first")
    with pytest.raises(BridgeError) as ei:
        publish_new(target, b"second")
    assert ei.value.code == ErrorCode.TARGET_EXISTS
    assert ei.value.data["identity"]["size"] == 5  # so the caller can retry an explicit overwrite
    assert target.read_bytes() == b"first" and leftovers(tmp_path) == []


def test_publish_new_refuses_an_existing_symlink_even_dangling(tmp_path):
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(BridgeError) as ei:
        publish_new(link, b"x")
    assert ei.value.code == ErrorCode.TARGET_EXISTS
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("native", [True, False], ids=["renameat2", "link-fallback"])
def test_rename_noreplace_never_replaces(tmp_path, monkeypatch, native):
    if not native:
        monkeypatch.setattr(files, "_native_noreplace", lambda s, d, **_: False)
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"new")
    dst.write_bytes(b"old")
    with pytest.raises(FileExistsError):
        rename_noreplace(src, dst)
    assert dst.read_bytes() == b"old" and src.read_bytes() == b"new"
    dst.unlink()
    rename_noreplace(src, dst)
    assert dst.read_bytes() == b"new" and not src.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux-only")
def test_linux_uses_renameat2_natively(tmp_path):
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(b"x")
    assert files._native_noreplace(src, dst) is True
    assert dst.read_bytes() == b"x"


@pytest.mark.parametrize("native", [True, False], ids=["renameat2", "mkdir-fallback"])
def test_publish_directory_is_all_or_nothing_and_never_merges(tmp_path, monkeypatch, native):
    if not native:
        monkeypatch.setattr(files, "_native_noreplace", lambda s, d, **_: False)
    out = tmp_path / "mod-1.0"

    def fill(d):
        (d / "pvf").mkdir()
        (d / "pvf" / "a.equ").write_bytes(b"x")
        (d / "pack.json").write_text("{}")

    assert publish_directory(out, fill) == out
    assert (out / "pvf" / "a.equ").read_bytes() == b"x"
    with pytest.raises(BridgeError) as ei:
        publish_directory(out, fill)
    assert ei.value.code == ErrorCode.TARGET_EXISTS
    assert sorted(p.name for p in out.iterdir()) == ["pack.json", "pvf"]
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("native", [True, False], ids=["renameat2", "mkdir-fallback"])
def test_publish_directory_loses_a_race_cleanly(tmp_path, monkeypatch, native):
    if not native:
        monkeypatch.setattr(files, "_native_noreplace", lambda s, d, **_: False)
    out = tmp_path / "export"

    def fill(d):
        (d / "ours.txt").write_text("ours")
        out.mkdir()  # another program takes the name while we build
        (out / "theirs.txt").write_text("theirs")

    with pytest.raises(BridgeError) as ei:
        publish_directory(out, fill)
    assert ei.value.code == ErrorCode.TARGET_EXISTS
    assert [p.name for p in out.iterdir()] == ["theirs.txt"]
    assert leftovers(tmp_path) == []


def test_publish_directory_failure_in_fill_cleans_up(tmp_path):
    def fill(d):
        (d / "x").write_text("x")
        raise ValueError("bad export")

    with pytest.raises(ValueError):
        publish_directory(tmp_path / "out", fill)
    assert list(tmp_path.iterdir()) == []


def test_identity_round_trips_through_a_dict_and_rejects_garbage(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    ident = file_identity(p)
    assert FileIdentity.from_dict(ident.to_dict()) == ident
    with pytest.raises(BridgeError) as ei:
        FileIdentity.from_dict({"device": 1})
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


def test_identity_of_missing_file_is_not_found(tmp_path):
    with pytest.raises(BridgeError) as ei:
        file_identity(tmp_path / "nope")
    assert ei.value.code == ErrorCode.NOT_FOUND


def test_same_file_sees_through_symlinks_and_hard_links(tmp_path):
    a = tmp_path / "a"
    a.write_bytes(b"x")
    (tmp_path / "l").symlink_to(a)
    os.link(a, tmp_path / "h")
    assert files.same_file(a, tmp_path / "l") and files.same_file(a, tmp_path / "h")
    assert files.same_file(a, tmp_path / "sub" / ".." / "a") is True
    assert not files.same_file(a, tmp_path / "b")


def test_remove_stale_temps_deletes_only_our_temp_files(tmp_path):
    (tmp_path / f"{files.TEMP_PREFIX}x-123").write_bytes(b"partial")
    (tmp_path / f"{files.TEMP_PREFIX}d-1").mkdir()
    (tmp_path / "keep.txt").write_bytes(b"k")
    assert remove_stale_temps(tmp_path) == 0  # too fresh: may belong to a write in progress
    assert remove_stale_temps(tmp_path, older_than_s=0) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_secret_file_mode_is_kept_and_new_files_can_be_private(tmp_path):
    token = tmp_path / "token"
    atomic_write(token, b"secret-1", new_file_mode=0o600)
    assert (token.stat().st_mode & 0o777) == 0o600
    seen_modes = []

    def spy(f):
        seen_modes.append(os.fstat(f.fileno()).st_mode & 0o777)  # the temp file while it holds the bytes
        f.write(b"secret-2")

    atomic_write(token, spy)
    assert seen_modes == [0o600] and (token.stat().st_mode & 0o777) == 0o600
    r = publish_new(tmp_path / "other", b"x", new_file_mode=0o600)
    assert (r.path.stat().st_mode & 0o777) == 0o600


def test_writing_through_a_symlink_keeps_the_link_and_updates_its_file(tmp_path):
    real = tmp_path / "real.md"
    real.write_bytes(b"old")
    link = tmp_path / "link.md"
    link.symlink_to(real)
    atomic_write(link, b"new", expected_identity=file_identity(link))
    assert link.is_symlink() and real.read_bytes() == b"new"


@pytest.mark.parametrize(
    "writer",
    [
        lambda f: f.write(b"streamed content"),
        lambda f: (f.write(b"XXXXXXXX content"), f.seek(0), f.write(b"streamed")),  # patches a header
        lambda f: os.write(f.fileno(), b"streamed content"),  # bypasses write()
    ],
    ids=["plain-writes", "seek-and-patch", "raw-fd"],
)
def test_new_identity_hash_is_right_however_the_writer_writes(tmp_path, writer):
    r = atomic_write(tmp_path / "f.bin", writer)
    assert r.identity == file_identity(tmp_path / "f.bin")


class _FakeFn:
    """Stands in for a libc/kernel32 function: records its arguments and fails with a chosen errno."""

    def __init__(self, result, err=0):
        self.calls = []
        self.result, self.err = result, err

    def __call__(self, *args):
        self.calls.append(args)
        return self.result


@pytest.mark.parametrize(
    "result, err, expect",
    [(0, 0, True), (-1, 17, FileExistsError), (-1, 45, False), (-1, 13, PermissionError)],
    ids=["renamed", "EEXIST", "ENOTSUP-falls-back", "EACCES"],
)
def test_macos_renamex_np_is_called_with_rename_excl(tmp_path, monkeypatch, result, err, expect):
    import ctypes
    import errno as errno_mod

    fn = _FakeFn(result)
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setattr(files, "_libc", lambda: type("Libc", (), {"renamex_np": fn})())
    monkeypatch.setattr(ctypes, "get_errno", lambda: err)
    monkeypatch.setattr(files, "_UNSUPPORTED_ERRNOS", {errno_mod.ENOSYS, errno_mod.EINVAL, 45})
    src, dst = tmp_path / "a", tmp_path / "b"
    if isinstance(expect, type):
        with pytest.raises(expect):
            files._native_noreplace(src, dst)
    else:
        assert files._native_noreplace(src, dst) is expect
    assert fn.calls == [(os.fsencode(src), os.fsencode(dst), 0x4)]


@pytest.mark.parametrize(
    "ok, last_error, expect", [(1, 0, True), (0, 183, FileExistsError), (0, 80, FileExistsError)]
)
def test_windows_movefileexw_never_passes_replace_existing(tmp_path, monkeypatch, ok, last_error, expect):
    import ctypes

    fn = _FakeFn(ok)
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(
        ctypes, "WinDLL", lambda *a, **k: type("K32", (), {"MoveFileExW": fn})(), raising=False
    )
    monkeypatch.setattr(ctypes, "get_last_error", lambda: last_error, raising=False)
    src, dst = tmp_path / "a", tmp_path / "b"
    if isinstance(expect, type):
        with pytest.raises(expect):
            files._native_noreplace(src, dst)
    else:
        assert files._native_noreplace(src, dst) is True
    ((_src, _dst, flags),) = fn.calls
    assert flags & 0x1 == 0  # MOVEFILE_REPLACE_EXISTING is never set
    assert flags & 0x8  # MOVEFILE_WRITE_THROUGH: durable before returning


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux renameat2 errno handling")
def test_linux_without_renameat2_support_falls_back_to_link(tmp_path, monkeypatch):
    import ctypes

    fn = _FakeFn(-1)
    monkeypatch.setattr(files, "_libc", lambda: type("Libc", (), {"renameat2": fn})())
    monkeypatch.setattr(ctypes, "get_errno", lambda: 38)  # ENOSYS: old kernel
    src, dst = tmp_path / "a", tmp_path / "b"
    src.write_bytes(b"x")
    rename_noreplace(src, dst)
    assert dst.read_bytes() == b"x" and not src.exists() and len(fn.calls) == 1


@pytest.mark.parametrize(
    "err, code",
    [
        (PermissionError(13, "Permission denied"), ErrorCode.ACCESS_DENIED),
        (OSError(28, "No space left on device"), ErrorCode.LIMIT_EXCEEDED),
        (OSError(5, "Input/output error"), ErrorCode.INTERNAL),
    ],
    ids=["EACCES", "ENOSPC", "EIO"],
)
def test_disk_errors_keep_the_original_and_say_nothing_was_committed(tmp_path, monkeypatch, err, code):
    target = tmp_path / "a.txt"
    target.write_bytes(b"orig")
    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if files.TEMP_PREFIX in os.fspath(path):
            raise err
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(BridgeError) as ei:
        atomic_write(target, b"new")
    monkeypatch.undo()
    assert ei.value.code == code and ei.value.hint
    assert ei.value.data["diskCommitted"] is False and ei.value.data["originalIntact"] is True
    assert target.read_bytes() == b"orig" and leftovers(tmp_path) == []


def test_failure_after_the_rename_says_the_write_landed(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    target.write_bytes(b"orig")

    def broken_dir_fsync(_d):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files, "fsync_dir", broken_dir_fsync)
    with pytest.raises(BridgeError) as ei:
        atomic_write(target, b"new")
    assert ei.value.data["diskCommitted"] is True and "do not retry" in ei.value.hint
    assert target.read_bytes() == b"new"


def test_a_failing_verify_leaves_the_original_intact(tmp_path):
    target = tmp_path / "Script.pvf"
    target.write_bytes(b"original")
    seen = []

    def verify(tmp):
        seen.append((tmp.resolve().parent, tmp.read_bytes()))
        raise BridgeError(ErrorCode.INTERNAL, "verify failed: reads back different bytes")

    with pytest.raises(BridgeError) as ei:
        atomic_write(target, lambda f: f.write(b"streamed new content"), backup=True, verify=verify)
    assert ei.value.code == ErrorCode.INTERNAL and "reads back different" in ei.value.message
    assert seen == [(tmp_path, b"streamed new content")]  # the complete temp file, next to the target
    assert target.read_bytes() == b"original"
    assert not (tmp_path / "Script.pvf.bak").exists()
    assert leftovers(tmp_path) == []


def test_verify_errors_other_than_bridge_errors_propagate_as_they_are(tmp_path):
    target = tmp_path / "a.txt"
    target.write_bytes(b"old")

    def verify(_tmp):
        raise ValueError("not what I wrote")

    with pytest.raises(ValueError, match="not what I wrote"):
        atomic_write(target, b"new", expected_identity=file_identity(target), verify=verify)
    assert target.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_a_passing_verify_lets_the_write_land(tmp_path):
    target = tmp_path / "a.txt"
    checked = []
    r = atomic_write(target, b"new", verify=lambda tmp: checked.append(tmp.read_bytes()))
    assert checked == [b"new"] and target.read_bytes() == b"new" and r.identity.size == 3


def test_kernel_copied_ranges_keep_the_new_identity_hash_right(tmp_path):
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(9 * 1024 * 1024 + 123))  # more than one kernel-copy piece
    big = bytearray(os.urandom(2 * 1024 * 1024))  # large enough for the hash worker

    def writer(f):
        f.write(b"header")
        with open(source, "rb") as src:
            assert f.copy_range(src.fileno(), 100, 9 * 1024 * 1024) == 9 * 1024 * 1024
            f.write(big)
            big[:4] = b"XXXX"  # the writer reuses its buffer: the hash must be of what was written
            assert f.copy_range(src.fileno(), source.stat().st_size - 10, 50) == 10  # the source ends
        f.write(b"trailer")

    expected = b"header" + source.read_bytes()[100 : 100 + 9 * 1024 * 1024]
    expected_big = bytes(big)  # as it is when written
    r = atomic_write(tmp_path / "out.bin", writer)
    written = (tmp_path / "out.bin").read_bytes()
    assert written[: len(expected)] == expected
    assert written[len(expected) : len(expected) + len(big)] == expected_big
    assert written.endswith(source.read_bytes()[-10:] + b"trailer")
    assert r.identity == file_identity(tmp_path / "out.bin")


def test_a_failing_fsync_beside_verify_keeps_the_original(tmp_path, monkeypatch):
    target = tmp_path / "a.pvf"
    target.write_bytes(b"orig")
    checked = []

    def broken_fsync(_fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(files.os, "fsync", broken_fsync)
    with pytest.raises(BridgeError) as ei:
        atomic_write(
            target, lambda f: f.write(b"new" * 1000), verify=lambda tmp: checked.append(tmp.read_bytes())
        )
    monkeypatch.undo()
    assert checked == [b"new" * 1000]  # verify saw the complete content; the rename never happened
    assert ei.value.data["diskCommitted"] is False and ei.value.data["originalIntact"] is True
    assert target.read_bytes() == b"orig" and leftovers(tmp_path) == []


def test_a_failing_verify_stops_the_hash_worker_and_cleans_up(tmp_path):
    target = tmp_path / "a.pvf"
    target.write_bytes(b"orig")
    source = tmp_path / "src.bin"
    source.write_bytes(os.urandom(5 * 1024 * 1024))

    def writer(f):
        with open(source, "rb") as src:
            f.copy_range(src.fileno(), 0, 5 * 1024 * 1024)

    def verify(tmp):
        assert tmp.read_bytes() == source.read_bytes()
        raise BridgeError(ErrorCode.INTERNAL, "verify failed: test")

    with pytest.raises(BridgeError, match="verify failed"):
        atomic_write(target, writer, verify=verify)
    assert target.read_bytes() == b"orig" and leftovers(tmp_path) == []


def test_a_writer_failing_after_big_writes_leaves_no_temp_and_no_worker(tmp_path):
    import threading

    target = tmp_path / "a.pvf"
    target.write_bytes(b"orig")

    def writer(f):
        for _ in range(80):  # more pieces than the worker's queue holds
            f.write(bytes(1024 * 1024))
        raise ValueError("serialiser broke")

    with pytest.raises(ValueError, match="serialiser broke"):
        atomic_write(target, writer)
    assert target.read_bytes() == b"orig" and leftovers(tmp_path) == []
    assert not [t for t in threading.enumerate() if t.name == "deskbridge-hash"]


class _RecordingSyncRange:
    """Stands in for libc's `sync_file_range`: records each (offset, length, flags), returns `result`."""

    def __init__(self, result=0):
        self.calls = []
        self.result = result

    def __call__(self, fd, offset, length, flags):
        os.fstat(fd)  # a real, open descriptor
        self.calls.append((offset, length, flags))
        return self.result


def _write_in_pieces(f, source, pieces):
    step = 1024 * 1024
    with open(source, "rb") as src:
        for k in range(pieces):
            if k % 2:
                f.write(os.urandom(step))
            else:
                assert f.copy_range(src.fileno(), k * step, step) == step


def test_a_streamed_write_hands_each_step_to_the_disk_as_it_goes(tmp_path, monkeypatch):
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(8 * 1024 * 1024))
    fake = _RecordingSyncRange()
    monkeypatch.setattr(files, "_sync_file_range", lambda: fake)
    r = atomic_write(tmp_path / "out.bin", lambda f: _write_in_pieces(f, source, 8))
    step = 1024 * 1024
    # Every written step once, in order, from where the last one ended: nothing submitted twice or skipped.
    assert fake.calls == [(k * step, step, files._SYNC_FILE_RANGE_WRITE) for k in range(8)]
    assert r.identity == file_identity(tmp_path / "out.bin")


@pytest.mark.parametrize("why", ["stalls", "fails"])
def test_early_writeback_stops_at_the_first_call_that_stalls_or_fails(tmp_path, monkeypatch, why):
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(8 * 1024 * 1024))
    fake = _RecordingSyncRange(result=-1 if why == "fails" else 0)
    monkeypatch.setattr(files, "_sync_file_range", lambda: fake)
    if why == "stalls":
        monkeypatch.setattr(files._EarlyWriteback, "STALL_S", -1.0)  # every call took "too long"
    r = atomic_write(tmp_path / "out.bin", lambda f: _write_in_pieces(f, source, 8))
    assert len(fake.calls) == 1  # the rest was left to the fsync
    assert r.identity == file_identity(tmp_path / "out.bin")
    assert (tmp_path / "out.bin").stat().st_size == 8 * 1024 * 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range(2) is Linux's")
def test_linux_offers_sync_file_range_through_libc(tmp_path):
    fn = files._sync_file_range()
    assert fn is not None
    with open(tmp_path / "a.bin", "wb") as fh:
        fh.write(b"x" * 10000)
        fh.flush()
        assert fn(fh.fileno(), 0, 10000, files._SYNC_FILE_RANGE_WRITE) == 0
        assert fn(-1, 0, 0, files._SYNC_FILE_RANGE_WRITE) == -1  # EBADF: the call reached the kernel


@pytest.mark.parametrize("shift", [1, 8, 2048, 4095])
def test_a_copy_shifted_within_a_page_goes_through_one_buffer_and_copies_exactly(
    tmp_path, monkeypatch, shift
):
    # copy_file_range copies a range shifted by a few bytes within a page at under half its speed (a PVF edit
    # that adds a string shifts every later block so): such a range is read into a buffer and written on.
    source = tmp_path / "source.bin"
    source.write_bytes(os.urandom(3 * 4096 + 777))
    kernel = []
    if hasattr(os, "copy_file_range"):
        real = os.copy_file_range
        monkeypatch.setattr(os, "copy_file_range", lambda *a: kernel.append(a) or real(*a))
    monkeypatch.setattr(files._ShiftedCopy, "STEP", 4096)  # several steps and a short last one

    def writer(f):
        f.write(b"h" * shift)
        with open(source, "rb") as src:
            assert f.copy_range(src.fileno(), 0, 2 * 4096 + 5) == 2 * 4096 + 5
            assert f.copy_range(src.fileno(), 3 * 4096, 10_000) == 777  # the source ends
            f.write(b"-")
            at = shift + 2 * 4096 + 5 + 777 + 1
            assert f.copy_range(src.fileno(), at - 2 * 4096, 500) == 500  # unshifted: in the kernel

    r = atomic_write(tmp_path / "out.bin", writer)
    data = source.read_bytes()
    unshifted = shift + 5 + 777 + 1
    expected = (
        b"h" * shift + data[: 2 * 4096 + 5] + data[3 * 4096 :] + b"-" + data[unshifted : unshifted + 500]
    )
    assert (tmp_path / "out.bin").read_bytes() == expected
    assert r.identity == file_identity(tmp_path / "out.bin")
    if hasattr(os, "copy_file_range"):
        assert len(kernel) == 1  # only the copy that kept its place within a page
