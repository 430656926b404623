"""Amplification bombs: small archives that would inflate, share or print without bound are refused with
`PVF_CORRUPT` before the memory is spent, through the real CLI in a process with a hard address-space cap."""

from __future__ import annotations

import io
import resource
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.fuzz.pvf_nkpi import bomb_archive
from deskbridge.kinds.pvf.archive import classic_cipher as cc
from deskbridge.kinds.pvf.archive import open_archive
from deskbridge.kinds.pvf.archive.classic import build_classic
from deskbridge.kinds.pvf.strings.stringtable import build_stringtable

pytestmark = pytest.mark.security

CAP_MB = 768
"""Address space of the process that opens the bombs: well above what reading a real small archive needs
(Python + numpy ≈ 300 MB of mappings), far below what the bombs asked for before the budgets (13 GB)."""


def _capped(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        limit = CAP_MB * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
        check=False,
    )


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_a_string_pool_of_compressed_nuls_is_refused_by_every_command_under_a_memory_cap(tmp_path):
    bomb = _write(tmp_path, "pool.pvf", bomb_archive(0, 27))  # 128 MiB of NULs in ≈ 130 KB
    assert bomb.stat().st_size < 200_000
    for cmd in (["info"], ["ls"], ["verify"], ["cat", "a.equ"], ["extract", "-o", str(tmp_path / "x")]):
        res = _capped("deskbridge", "pvf", cmd[0], str(bomb), *cmd[1:])
        assert res.returncode == 2, (cmd, res.stderr)
        assert "PVF_CORRUPT" in res.stderr and "sTrA string pool" in res.stderr, res.stderr
        assert "budget" in res.stderr and "MemoryError" not in res.stderr
    assert not (tmp_path / "x").exists()


def test_a_chunk_of_compressed_tokens_is_refused_before_it_is_inflated(tmp_path):
    bomb = _write(tmp_path, "chunk.pvf", bomb_archive(1, 24))  # 80 MiB of tokens in ≈ 80 KB
    res = _capped("deskbridge", "pvf", "cat", str(bomb), "a.equ")
    assert res.returncode == 2 and "PVF_CORRUPT" in res.stderr and "chunk 0" in res.stderr, res.stderr
    with pytest.raises(BridgeError) as err:
        open_archive(bomb)
    assert err.value.code == ErrorCode.PVF_CORRUPT and err.value.data["declared"] == 5 << 24


def test_file_entries_sharing_one_region_are_refused_when_they_add_up_past_the_budget():
    data = bomb_archive(2, 17, 15)  # 32,768 entries × 640 KiB over one chunk: 20 GiB
    with pytest.raises(BridgeError) as err:
        open_archive(data)
    assert err.value.code == ErrorCode.PVF_CORRUPT and "payloads together" in err.value.message
    ar = open_archive(bomb_archive(2, 12, 3))  # a few entries sharing a little: fine
    assert len(ar.paths()) == 1 and ar.read("a.equ") == bytes(5 << 12)


def test_one_long_string_repeated_by_many_tokens_is_refused_as_text_but_readable_as_bytes(tmp_path):
    bomb = _write(tmp_path, "text.pvf", bomb_archive(3, 20, 14))  # 16,384 × a 1 MiB string = 16 GiB
    res = _capped("deskbridge", "pvf", "cat", str(bomb), "a.equ")
    assert res.returncode == 2 and "PVF_CORRUPT" in res.stderr and "decompile" in res.stderr, res.stderr
    raw = _capped("deskbridge", "pvf", "cat", "--raw", str(bomb), "a.equ")
    assert raw.returncode == 0 and len(raw.stdout) == 5 * (1 << 14)


def test_archives_within_the_budgets_read_and_render_as_before():
    for kind in range(4):
        ar = open_archive(bomb_archive(kind, 10, 3))
        for path in ar.paths():
            ar.read(path)
            ar.read_text(path)


def _classic_tree(entries: list[tuple[bytes, int, int, int]], data: bytes) -> bytes:
    """A classic archive with these (path, size, key, offset) tree entries over `data` (written by hand:
    blocks may overlap, which no writer of ours produces)."""
    tree = b"".join(
        struct.pack("<II", cc.name_hash(p), len(p)) + p + struct.pack("<iIi", size, key, rel)
        for p, size, key, rel in entries
    )
    tree = cc.padded(tree)
    crc = cc.tree_checksum(tree, len(entries))
    guid = b"00000000-0000-0000-0000-000000000000"
    head = struct.pack("<i", len(guid)) + guid + struct.pack("<iiIi", 66282, len(tree), crc, len(entries))
    return head + cc.encrypt(tree, crc) + data


def test_classic_entries_sharing_one_block_are_refused_when_they_add_up_past_the_budget():
    block = bytes(1 << 20)
    crc = cc.file_checksum(block, 0)
    entries = [(f"f{i}.bin".encode(), len(block), crc, 0) for i in range(100)]
    with pytest.raises(BridgeError) as err:
        open_archive(_classic_tree(entries, cc.encrypt(block, crc)))
    assert err.value.code == ErrorCode.PVF_CORRUPT and "payloads together" in err.value.message


def test_a_classic_script_repeating_a_long_table_string_is_refused_as_text():
    table = build_stringtable([b"x" * (1 << 20)])
    script = b"\xb0\xd0" + struct.pack("<BI", 7, 0) * 4096  # 4,096 × 1 MiB = 4 GiB of text
    out = io.BytesIO()
    build_classic(out, [("stringtable.bin", table), ("a.equ", script)])
    ar = open_archive(out.getvalue(), encoding="tw")
    with pytest.raises(BridgeError) as err:
        ar.read_text("a.equ")
    assert err.value.code == ErrorCode.PVF_CORRUPT and "decompile" in err.value.message
    assert ar.read("a.equ") == script


def test_the_bomb_fuzz_target_runs_clean_under_a_memory_cap():
    # The longest input within budget is a ≈ 1 MiB script (the per-stream allowance), ≈ 220 k tokens to
    # decompile: ≈ 1 s of CPU, but the runner's limit is wall time and a shared machine under load takes
    # many times that, so the per-input limit here is 30 s (the cap under test is memory).
    res = _capped(
        "deskbridge.fuzz",
        *("--target", "pvf_nkpi.bomb", "--inputs", "120", "--memory-mb", "0", "--time-limit", "30"),
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 findings" in res.stdout
