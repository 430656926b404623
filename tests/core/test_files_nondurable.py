"""`atomic_write(durable=False)`: the write for our own caches — still atomic, never fsynced, not hashed."""

from __future__ import annotations

import os

import pytest

from deskbridge.core import files
from deskbridge.core.errors import BridgeError


def _count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.fsync

    def counted(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counted)
    return calls


def test_a_non_durable_write_replaces_the_file_atomically_without_fsync_or_hash(tmp_path, monkeypatch):
    target = tmp_path / "cache.bin"
    target.write_bytes(b"old")
    calls = _count_fsyncs(monkeypatch)
    result = files.atomic_write(target, b"new content", durable=False)
    assert target.read_bytes() == b"new content"
    assert calls == []
    assert result.identity.sha256 == ""  # not hashed: nobody compares a cache's identity
    assert [p.name for p in tmp_path.iterdir()] == ["cache.bin"]  # no temp file left behind


def test_the_default_write_is_still_durable_and_hashed(tmp_path, monkeypatch):
    target = tmp_path / "doc.txt"
    calls = _count_fsyncs(monkeypatch)
    result = files.atomic_write(target, b"text")
    assert target.read_bytes() == b"text"
    assert len(calls) >= 2  # the file, then its folder
    assert result.identity.sha256 == files.content_digest(b"text")


def test_non_durable_new_files_are_published_once_and_made_durable_by_one_sync(tmp_path, monkeypatch):
    calls = _count_fsyncs(monkeypatch)
    synced: list[int] = []
    real_libc = files._libc

    class _Libc:  # the real libc, with its syncfs calls counted
        def __getattr__(self, name: str):
            return getattr(real_libc(), name)

        def syncfs(self, fd: int) -> int:
            synced.append(fd)
            return real_libc().syncfs(fd)

    if os.uname().sysname == "Linux":
        monkeypatch.setattr(files, "_libc", lambda: _Libc())
    written = [files.publish_new(tmp_path / f"blob{i}", b"x" * i, durable=False).path for i in range(5)]
    assert calls == []  # nothing fsynced per file
    with pytest.raises(BridgeError) as err:
        files.publish_new(tmp_path / "blob1", b"other", durable=False)
    assert err.value.code.value == "TARGET_EXISTS"  # still create-only
    files.sync_filesystem(written)
    if os.uname().sysname == "Linux":
        assert len(synced) == 1 and calls == []  # one syncfs for all of them
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"blob{i}" for i in range(5)]
    assert (tmp_path / "blob3").read_bytes() == b"xxx"


def test_writing_a_file_loads_no_module_only_rare_paths_need(tmp_path):
    """`secrets` (hmac, hashlib, random), `shutil` (bz2, lzma) and `platform` were imported by every process
    that loaded `core.files` (~7 ms of a cold SAGE build's parent, which writes its caches), and `ctypes`
    (~8 ms more; only the no-overwrite renames call libc): a new file and a replaced one, durable or not,
    need none of them."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from deskbridge.core.files import atomic_write\n"
        f"atomic_write({str(tmp_path / 'a')!r}, b'1', durable=False)\n"
        f"atomic_write({str(tmp_path / 'a')!r}, b'2', durable=False)\n"
        f"atomic_write({str(tmp_path / 'b')!r}, b'3')\n"
        "print(','.join(m for m in ('secrets', 'shutil', 'platform', 'hmac', 'random', 'ctypes') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
    assert (tmp_path / "a").read_bytes() == b"2" and (tmp_path / "b").read_bytes() == b"3"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(files.TEMP_PREFIX)]
