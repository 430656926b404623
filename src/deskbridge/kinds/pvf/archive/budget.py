"""How much work a PVF archive may ask for: decompression and decompile budgets against amplification bombs.

A hostile archive can be small on disk and enormous once read: zlib expands up to ~1032:1 (RFC 1951), so a
600 KB nkpi name table can declare a 512 MB string pool of NULs, a 257 KB file a 256 MB chunk of script
tokens, file entries can all point at the same bytes, and one 5-byte string token can print a megabyte of
text. Real archives stay far below every bound here: 90US chunks inflate ≈ 10.8:1 on average (pvfine's
FORMAT.md figures: 54.1 MB → 583.6 MB), our synthetic pools ≈ 7.5:1 and chunks ≈ 3.2:1. Each bound is a
ratio (what a real archive could need) plus a small allowance (so tiny streams of zeros are fine); anything
beyond is refused with `PVF_CORRUPT` before the memory is allocated, naming the offset and the figures.
"""

from __future__ import annotations

from typing import Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.limits import MIB

STREAM_RATIO_MAX: Final = 64
"""Decompressed bytes per compressed byte of one zlib stream (an nkpi chunk or string pool)."""
STREAM_ALLOWANCE_BYTES: Final = 1 * MIB
"""Bytes any one stream may inflate to whatever its ratio (a small chunk of zeros is legitimate)."""
ARCHIVE_RATIO_MAX: Final = 32
"""All decompressed bytes of an archive (every chunk and pool), and the sum of every file's payload size,
per byte of the archive file."""
ARCHIVE_ALLOWANCE_BYTES: Final = 16 * MIB
"""Bytes on top of the archive ratio (small archives)."""
TEXT_RATIO_MAX: Final = 64
"""Characters of decompiled script text per payload byte (5-byte tokens; an int prints as ≈ 2 characters,
a string token as its string)."""
TEXT_ALLOWANCE_CHARS: Final = 1 * MIB
"""Characters any one script may decompile to whatever its size (a dialogue file with long strings)."""


def stream_budget(compressed: int) -> int:
    """Most bytes a zlib stream of `compressed` bytes may declare."""
    return STREAM_RATIO_MAX * max(0, compressed) + STREAM_ALLOWANCE_BYTES


def archive_budget(file_size: int) -> int:
    """Most decompressed bytes (or summed payload bytes) an archive of `file_size` bytes may declare."""
    return ARCHIVE_RATIO_MAX * max(0, file_size) + ARCHIVE_ALLOWANCE_BYTES


def text_budget(payload: int) -> int:
    """Most characters the text of a `payload`-byte script may have."""
    return TEXT_RATIO_MAX * max(0, payload) + TEXT_ALLOWANCE_CHARS


def over_budget(offset: int, what: str, declared: int, budget: int, basis: str) -> BridgeError:
    """`PVF_CORRUPT` for a declared size past its budget: what, where, the figures, and what to do."""
    return BridgeError(
        ErrorCode.PVF_CORRUPT,
        f"{what} at offset {offset} declares {declared:,} bytes, over the {budget:,}-byte budget for {basis}; "
        "real archives stay far below it, so this file is damaged or built to exhaust memory",
        "Nothing was read past the header fields. Use an undamaged copy of the archive (or the game "
        "client's original); `deskbridge pvf verify` shows every other problem.",
        data={
            "offset": offset,
            "expected": f"at most {budget} bytes",
            "declared": declared,
            "budget": budget,
        },
    )


def check_text(chars: int, payload: int, path: str | None = None) -> None:
    """Refuse a script whose text would exceed `text_budget(payload)` (checked before printing)."""
    budget = text_budget(payload)
    if chars > budget:
        where = f"'{path}'" if path else "script"
        raise BridgeError(
            ErrorCode.PVF_CORRUPT,
            f"{where}: its {payload:,} payload bytes would decompile to more than {budget:,} characters "
            f"(string tokens repeating long strings; {chars:,} counted so far)",
            "Read its bytes instead (`deskbridge pvf cat --raw`); the text form is refused so that a small "
            "file cannot exhaust memory.",
            data={"offset": 0, "expected": f"at most {budget} characters of text", "chars": chars},
        )
