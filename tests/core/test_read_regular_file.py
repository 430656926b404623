"""core.files.read_regular_file: the one bounded read every kind uses (FIFOs, devices, size caps)."""

from __future__ import annotations

import os

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import read_regular_file

pytestmark = pytest.mark.security


def test_reads_a_regular_file(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"hello")
    assert read_regular_file(p, max_bytes=10) == b"hello"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "trap.md"
    os.mkfifo(fifo)
    with pytest.raises(BridgeError) as err:
        read_regular_file(fifo, max_bytes=10, shown_as="trap.md")
    assert err.value.code == ErrorCode.ACCESS_DENIED
    assert "trap.md" in err.value.message and str(tmp_path) not in err.value.message


def test_device_through_a_symlink_is_refused(tmp_path):
    link = tmp_path / "zero.xml"
    link.symlink_to("/dev/zero")
    with pytest.raises(BridgeError) as err:
        read_regular_file(link, max_bytes=1024, shown_as="zero.xml")
    assert err.value.code == ErrorCode.ACCESS_DENIED
    assert "/dev/zero" not in err.value.message


def test_over_the_limit_is_refused(tmp_path):
    p = tmp_path / "big.bin"
    p.write_bytes(b"x" * 100)
    with pytest.raises(BridgeError) as err:
        read_regular_file(p, max_bytes=99)
    assert err.value.code == ErrorCode.LIMIT_EXCEEDED


def test_missing_file_names_the_given_path(tmp_path):
    with pytest.raises(BridgeError) as err:
        read_regular_file(tmp_path / "nope", max_bytes=10, shown_as="nope")
    assert err.value.code == ErrorCode.NOT_FOUND and err.value.message.startswith("nope")
