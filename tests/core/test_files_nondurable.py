"""`atomic_write(durable=False)`: the write for our own caches — still atomic, never fsynced, not hashed."""

from __future__ import annotations

import os

import pytest

from deskbridge.core import files


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
