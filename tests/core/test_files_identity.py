"""The chunked, composable file identity (`IDENTITY_SCHEME`): one digest whatever wrote or read the bytes,
and kernel-copied chunks of a file we already hashed are not hashed again."""

from __future__ import annotations

import hashlib
import os

import pytest

from deskbridge.core import files
from deskbridge.core.files import (
    IDENTITY_CHUNK,
    IDENTITY_SCHEME,
    FileIdentity,
    atomic_write,
    content_digest,
    file_identity,
)

SIZES = [0, 1, IDENTITY_CHUNK - 1, IDENTITY_CHUNK, IDENTITY_CHUNK + 1, 3 * IDENTITY_CHUNK + 12345]


def _reference(data: bytes) -> str:
    """The scheme written out from its definition, independently of core.files."""
    h = hashlib.sha256(b"deskbridge-identity-sha256-1m\0" + len(data).to_bytes(8, "little"))
    for i in range(0, len(data), IDENTITY_CHUNK):
        h.update(hashlib.sha256(data[i : i + IDENTITY_CHUNK]).digest())
    return h.hexdigest()


@pytest.mark.parametrize("size", SIZES)
def test_every_path_to_an_identity_gives_the_same_digest(tmp_path, size):
    data = os.urandom(size)
    expected = _reference(data)
    assert content_digest(data) == expected
    assert atomic_write(tmp_path / "a", data).identity.sha256 == expected  # bytes written at once

    def in_pieces(out):  # small and large writes, through the running hash and its worker
        for i in range(0, size, 777_777):
            out.write(data[i : i + 777_777])

    assert atomic_write(tmp_path / "b", in_pieces).identity.sha256 == expected
    ident = file_identity(tmp_path / "b")
    assert ident.sha256 == expected and ident.scheme == IDENTITY_SCHEME


def test_a_kernel_copy_of_a_hashed_file_reuses_its_chunk_digests(tmp_path, monkeypatch):
    data = os.urandom(5 * IDENTITY_CHUNK + 4321)
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)  # hashes it once and remembers its chunk digests
    read = []
    real = os.preadv

    def counting(fd, buffers, offset, *rest):
        n = real(fd, buffers, offset, *rest)
        read.append(n)
        return n

    monkeypatch.setattr(files.os, "preadv", counting)

    def copy_all(out):
        out.write(b"")  # nothing before: the copy starts at the same alignment
        fd = os.open(src, os.O_RDONLY)
        try:
            assert out.copy_range(fd, 0, len(data)) == len(data)
        finally:
            os.close(fd)

    result = atomic_write(tmp_path / "dst", copy_all)
    assert result.identity.sha256 == _reference(data)
    assert sum(read) == 4321  # only the partial last chunk was read back; five whole chunks reused

    read.clear()

    def shifted(out):  # copied one byte later: no chunk lines up, every byte is hashed from the temp file
        out.write(b"x")
        fd = os.open(src, os.O_RDONLY)
        try:
            out.copy_range(fd, 0, len(data))
        finally:
            os.close(fd)

    assert atomic_write(tmp_path / "dst2", shifted).identity.sha256 == _reference(b"x" + data)
    assert sum(read) == len(data)


def test_an_identity_from_before_the_chunked_scheme_is_not_taken_as_current(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    now = file_identity(p)
    old = {k: v for k, v in now.to_dict().items() if k != "scheme"}
    old["sha256"] = hashlib.sha256(b"abc").hexdigest()
    legacy = FileIdentity.from_dict(old)
    assert legacy.scheme == "sha256" and legacy != now
    assert FileIdentity.from_dict(now.to_dict()) == now
