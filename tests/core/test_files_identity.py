"""The content-defined, composable file identity (`IDENTITY_SCHEME`): one digest whatever wrote or read the
bytes, and kernel-copied chunks of a file we already hashed are not hashed again — also when the copy lands
at another offset (an edit earlier in the file moved it)."""

from __future__ import annotations

import hashlib
import os
import random

import pytest
from blake3 import blake3

from deskbridge.core import files
from deskbridge.core.files import (
    IDENTITY_ANCHOR,
    IDENTITY_MAX_CHUNK,
    IDENTITY_MIN_CHUNK,
    IDENTITY_SCHEME,
    FileIdentity,
    atomic_write,
    chunk_cuts,
    content_digest,
    file_identity,
)

MIN, MAX = IDENTITY_MIN_CHUNK, IDENTITY_MAX_CHUNK
SIZES = [0, 1, MIN - 1, MIN, MIN + 1, MAX + 7, 3 * MIN + 12345]


def _reference_cuts(data: bytes) -> list[int]:
    """The cut rule written out from its definition, byte by byte, independently of core.files: a chunk
    ends right after the first anchor lying wholly in [start + MIN, start + MAX), else at start + MAX, and
    the last chunk at the end of the data."""
    cuts, start, n = [], 0, len(data)
    while start < n:
        cut = min(start + MAX, n)
        for i in range(start + MIN, min(start + MAX, n) - len(IDENTITY_ANCHOR) + 1):
            if data[i : i + len(IDENTITY_ANCHOR)] == IDENTITY_ANCHOR:
                cut = i + len(IDENTITY_ANCHOR)
                break
        cuts.append(cut)
        start = cut
    return cuts


def _reference(data: bytes) -> str:
    h = blake3(b"deskbridge-identity-blake3-cdc\0" + len(data).to_bytes(8, "little"))
    start = 0
    for cut in _reference_cuts(data):
        h.update((cut - start).to_bytes(8, "little") + blake3(data[start:cut]).digest())
        start = cut
    return h.hexdigest()


def _with_anchors(size: int, seed: int = 1, every: int = 40_000) -> bytes:
    """Random bytes with an anchor every ~`every` bytes (as encrypted archives have by chance)."""
    rng = random.Random(seed)
    data = bytearray(rng.randbytes(size))
    for at in range(rng.randrange(every), size - 2, every + rng.randrange(1000)):
        data[at : at + 2] = IDENTITY_ANCHOR
    return bytes(data)


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("anchors", [False, True])
def test_every_path_to_an_identity_gives_the_same_digest(tmp_path, size, anchors):
    data = _with_anchors(size) if anchors and size > 2 else os.urandom(size)
    assert chunk_cuts(data) == _reference_cuts(data)
    expected = _reference(data)
    assert content_digest(data) == expected
    assert content_digest(memoryview(data)) == expected
    assert atomic_write(tmp_path / "a", data).identity.sha256 == expected  # bytes written at once

    def in_pieces(out):  # small and large writes
        for i in range(0, size, 777_777):
            out.write(data[i : i + 777_777])

    assert atomic_write(tmp_path / "b", in_pieces).identity.sha256 == expected
    ident = file_identity(tmp_path / "b")
    assert ident.sha256 == expected and ident.scheme == IDENTITY_SCHEME


def test_an_anchor_across_a_read_step_is_found(tmp_path):
    """The file hash reads a little past the minimum at a time: an anchor split across two reads counts."""
    data = bytearray(os.urandom(MIN + (64 << 10) + 10))
    data = data.replace(IDENTITY_ANCHOR, b"\0\0")
    split = MIN + (64 << 10) - 1
    data[split : split + 2] = IDENTITY_ANCHOR
    data = bytes(data)
    assert chunk_cuts(data)[0] == split + 2
    (tmp_path / "f").write_bytes(data)
    assert file_identity(tmp_path / "f").sha256 == _reference(data)


def _count_reads(monkeypatch) -> list[int]:
    """Bytes the identity hash reads (not those a shifted copy reads from its source on the way)."""
    read: list[int] = []
    real = files._Window._fill

    def counting(self, end):
        before = self.have
        real(self, end)
        read.append(self.have - before)

    monkeypatch.setattr(files._Window, "_fill", counting)
    return read


def _copying(src, head: bytes, start: int = 0, length: int | None = None, tail: bytes = b""):
    def write(out):
        out.write(head)
        fd = os.open(src, os.O_RDONLY)
        try:
            n = os.fstat(fd).st_size - start if length is None else length
            assert out.copy_range(fd, start, n) == n
        finally:
            os.close(fd)
        out.write(tail)

    return write


def test_a_kernel_copy_of_a_hashed_file_reuses_its_chunk_digests(tmp_path, monkeypatch):
    data = _with_anchors(8 * MAX + 4321, seed=2)
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)  # hashes it once and remembers its chunks
    last = chunk_cuts(data)[-2]  # the last chunk ends at the end of the file: not reusable, hashed again
    read = _count_reads(monkeypatch)

    result = atomic_write(tmp_path / "dst", _copying(src, b""))
    assert result.identity.sha256 == _reference(data)
    assert sum(read) <= len(data) - last + 2 * MIN


def test_a_copy_moved_by_an_earlier_edit_still_reuses_its_chunks(tmp_path, monkeypatch):
    """The archive case: a file in the middle grew, so everything after it moved by a few bytes."""
    data = _with_anchors(16 * MAX + 999, seed=3)
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)
    read = _count_reads(monkeypatch)
    edit_at = 5 * MAX + 123

    def edited(out):
        fd = os.open(src, os.O_RDONLY)
        try:
            assert out.copy_range(fd, 0, edit_at) == edit_at
            out.write(b"a longer replacement for the edited file")
            rest = len(data) - edit_at - 10
            assert out.copy_range(fd, edit_at + 10, rest) == rest
        finally:
            os.close(fd)

    new = data[:edit_at] + b"a longer replacement for the edited file" + data[edit_at + 10 :]
    result = atomic_write(tmp_path / "dst", edited)
    # read back: the edited chunk, the chunk or two until the cuts meet again, the file's last chunk
    assert sum(read) <= 2 * MAX < len(data) // 8
    assert result.identity.sha256 == _reference(new) == file_identity(tmp_path / "dst").sha256

    read.clear()

    def shifted(out):  # copied one byte later than anything else: the same chunks after the first cut
        out.write(b"x")
        _copying(src, b"")(out)

    assert atomic_write(tmp_path / "dst2", shifted).identity.sha256 == _reference(b"x" + data)
    assert sum(read) <= 2 * MAX


def test_a_copy_after_a_rewritten_head_meets_the_source_cuts_again(tmp_path, monkeypatch):
    """The archive's file table is rewritten (other bytes, other anchors): after it the chains of cuts
    start far apart, and must still meet again soon, not many chunks later."""
    data = _with_anchors(24 * MAX, seed=5, every=70_000)
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)
    head = _with_anchors(2 * MAX + 777, seed=6, every=50_000)
    read = _count_reads(monkeypatch)
    result = atomic_write(tmp_path / "dst", _copying(src, head, start=len(head)))
    assert result.identity.sha256 == _reference(head + data[len(head) :])
    assert sum(read) <= len(head) + MAX


def test_content_without_anchors_is_cut_at_the_maximum_and_still_reused_in_place(tmp_path, monkeypatch):
    data = os.urandom(3 * MAX + 5).replace(IDENTITY_ANCHOR, b"\0\0")
    assert chunk_cuts(data) == [MAX, 2 * MAX, 3 * MAX, 3 * MAX + 5]
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)
    read = _count_reads(monkeypatch)
    assert atomic_write(tmp_path / "dst", _copying(src, b"")).identity.sha256 == _reference(data)
    assert sum(read) == 5


def test_a_source_changed_after_hashing_is_not_vouched_for(tmp_path):
    """A different file (new inode / mtime) has no remembered chunks: its copy is hashed from disk."""
    data = _with_anchors(3 * MIN, seed=4)
    src = tmp_path / "src"
    src.write_bytes(data)
    file_identity(src)
    other = bytearray(data)
    other[MIN + 5] ^= 0xFF
    src2 = tmp_path / "src2"
    src2.write_bytes(bytes(other))
    result = atomic_write(tmp_path / "dst", _copying(src2, b""))
    assert result.identity.sha256 == _reference(bytes(other)) != _reference(data)


def test_an_identity_from_an_earlier_scheme_is_not_taken_as_current(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(b"abc")
    now = file_identity(p)
    old = {k: v for k, v in now.to_dict().items() if k != "scheme"}
    old["sha256"] = hashlib.sha256(b"abc").hexdigest()
    legacy = FileIdentity.from_dict(old)
    assert legacy.scheme == "sha256" and legacy != now
    for earlier in ("sha256-1m", "sha256-cdc"):
        fixed = FileIdentity.from_dict({**now.to_dict(), "scheme": earlier})
        assert fixed != now  # same digest field, other scheme: not the same identity
    assert FileIdentity.from_dict(now.to_dict()) == now
    assert now.scheme == IDENTITY_SCHEME == "blake3-cdc"


@pytest.mark.parametrize("numpy_loaded", [True, False], ids=["numpy", "find"])
def test_the_anchor_search_finds_what_bytes_find_finds(numpy_loaded, monkeypatch):
    """`_find_anchor` (numpy when the process has it, else `find`) gives `bytes.find`'s index for every
    window: anchors at the window's first and last possible positions, one byte across either edge, a
    first byte alone, none at all, windows shorter than the numpy cut-over and longer than a step."""
    import sys

    import numpy  # noqa: F401 - loaded, so the numpy branch is taken unless removed below

    if not numpy_loaded:
        monkeypatch.delitem(sys.modules, "numpy")
    rng = random.Random(7)
    n = 3 * files._NUMPY_FIND_MIN
    monkeypatch.setattr(files, "_SCAN_STEP", files._NUMPY_FIND_MIN + 3)  # windows span several steps
    for trial in range(400):
        data = bytearray(rng.randbytes(n).replace(IDENTITY_ANCHOR, b"\0\0"))
        start = rng.choice([0, 1, rng.randrange(n)])
        end = rng.choice([n, start + files._NUMPY_FIND_MIN + rng.randrange(3), rng.randrange(start, n + 1)])
        step = files._SCAN_STEP
        spots = [start - 1, start, end - 2, end - 1, start + step - 1, start + step, rng.randrange(n - 1)]
        for at in rng.sample(spots, rng.randrange(3)):
            if 0 <= at < n - 1:
                data[at : at + 2] = IDENTITY_ANCHOR
        if trial % 5 == 0:
            data[rng.randrange(n)] = IDENTITY_ANCHOR[0]
        for buf in (data, bytes(data)):
            assert files._find_anchor(buf, start, end) == buf.find(IDENTITY_ANCHOR, start, end), (start, end)
