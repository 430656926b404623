"""Open any `Script.pvf`: detect the family from the first bytes and hand over to its reader.

Classic archives start with `i32 guidLen` (0x24) and an ASCII GUID (research/pvf.md §0); everything else is
offered to the nkpi reader (`archive/nkpi.py`: `looks_like_nkpi(head)` and `open_nkpi(source, *, encoding,
keys)`), which knows its variants and raises `UNSUPPORTED_VARIANT` / `KEY_REQUIRED` itself. Bytes neither
reader accepts give `UNSUPPORTED_VARIANT` naming what was seen.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.pvf.archive.base import Archive, ArchiveBase, FileInfo, SaveReport, norm_path
from deskbridge.kinds.pvf.archive.classic import ClassicArchive, looks_like_classic

__all__ = ["Archive", "ArchiveBase", "FileInfo", "SaveReport", "detect_family", "norm_path", "open_archive"]

_HEAD_BYTES = 64


def _head(source: Path | str | bytes) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[:_HEAD_BYTES])
    try:
        with open(source, "rb") as fh:
            return fh.read(_HEAD_BYTES)
    except FileNotFoundError:
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"no archive file '{source}'",
            hint="Check the path of the .pvf file (a relative path starts at the current folder).",
        ) from None
    except IsADirectoryError:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{source}' is a directory, not a .pvf file") from None


def _nkpi_module() -> Any | None:
    try:
        from deskbridge.kinds.pvf.archive import nkpi
    except ImportError:
        return None
    return nkpi


def detect_family(source: Path | str | bytes) -> str:
    """ "classic" or "nkpi" from the first bytes; UNSUPPORTED_VARIANT when neither fits."""
    head = _head(source)
    if looks_like_classic(head):
        return "classic"
    nkpi = _nkpi_module()
    looks = getattr(nkpi, "looks_like_nkpi", None) if nkpi is not None else None
    if looks is not None and looks(head):
        return "nkpi"
    raise _unknown(head)


def _unknown(head: bytes) -> BridgeError:
    return BridgeError(
        ErrorCode.UNSUPPORTED_VARIANT,
        f"not a PVF archive this version reads: first bytes {head[:16].hex(' ')} match neither a classic "
        "GUID header (i32 length 1..256 + ASCII GUID) nor an nkpi header",
        data={"head_hex": head[:16].hex()},
    )


def damaged_guid_at(head: bytes) -> int | None:
    """Offset of the first non-ASCII GUID byte when `head` is a classic header with a few damaged GUID
    bytes (i32 length 36 and at least 3/4 of the GUID printable), else None. Such an archive is still
    classic: every other field and the tree checksum say whether the rest is intact."""
    if len(head) < 40 or struct.unpack_from("<i", head, 0)[0] != 36:
        return None
    guid = head[4:40]
    bad = [i for i, b in enumerate(guid) if not (0x20 <= b < 0x7F or b == 0)]
    return 4 + bad[0] if bad and len(bad) <= 9 else None


def open_archive(source: Path | str | bytes, *, encoding: str | None = None, keys: Any = None) -> Archive:
    """Open a PVF archive from a path or bytes; only headers, tables and names are parsed now."""
    head = _head(source)
    if len(head) < 8:
        raise BridgeError(
            ErrorCode.PVF_CORRUPT,
            f"file of {len(head)} bytes is too short for any PVF header",
            hint="This is not a PVF archive (a Script.pvf is megabytes, its header alone 48 bytes or more): "
            "check the path, or restore the archive from a backup or a clean copy.",
            data={"offset": 0, "expected": "a header of at least 48 bytes"},
        )
    if looks_like_classic(head):
        return ClassicArchive.open(source, encoding=encoding)
    bad = damaged_guid_at(head)
    if bad is not None:
        ar = ClassicArchive.open(source, encoding=encoding)
        ar.warnings.insert(
            0,
            BridgeError(
                ErrorCode.PVF_CORRUPT,
                f"classic header damaged at offset {bad}: GUID byte 0x{head[bad]:02x} is not ASCII; the tree "
                "and files read normally",
                "The game may refuse the archive: restore the GUID from a backup or another copy "
                "(`pvf info` of that copy shows it).",
                data={"offset": bad, "expected": "an ASCII GUID character"},
            ),
        )
        return ar
    nkpi = _nkpi_module()
    if nkpi is not None and hasattr(nkpi, "open_nkpi"):
        # the nkpi reader names its own failures (UNSUPPORTED_VARIANT with what it saw, KEY_REQUIRED for paged)
        return nkpi.open_nkpi(
            source if isinstance(source, bytes) else Path(source), encoding=encoding, keys=keys
        )
    raise _unknown(head)
