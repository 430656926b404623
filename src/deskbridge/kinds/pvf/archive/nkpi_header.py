"""The 48-byte nkpi header: decoding, encoding, and recognising which key scheme encrypted it.

Layout after decryption (research/pvf.md §1B, PF `docs/FORMAT.md`): `u32 "nkpi", byte[20] guid,
i32 FileCount, i32 Padding, i32 BodySize, i32 GroupCount, i32 HashTableSize, i32 NameTableSize`, and the
sections follow back to back, so `48 + 24*FileCount + Hash + Name + 8*Groups + Body == file size`.
That equation is what makes a decryption trustworthy, including one under a recovered seed.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, replace

from .nkpi_cipher import MAGIC_DATA, SCHEMES, KeyScheme, crypt
from .nkpi_errors import corrupt
from .nkpi_recover import recover_word_seed

HEADER_SIZE = 48
FILE_ENTRY_SIZE = 24
GRPI_ENTRY_SIZE = 8
SIGNATURE = b"nkpi"
_FMT = struct.Struct("<4s20s6i")
_GUARD_SLICE = slice(24, 28)


@dataclass(frozen=True)
class Header:
    """The decrypted header fields (sizes in bytes, counts in entries)."""

    guid: bytes
    file_count: int
    padding: int
    body_size: int
    group_count: int
    hash_table_size: int
    name_table_size: int

    @property
    def file_table_offset(self) -> int:
        return HEADER_SIZE

    @property
    def hash_table_offset(self) -> int:
        return HEADER_SIZE + FILE_ENTRY_SIZE * self.file_count

    @property
    def name_table_offset(self) -> int:
        return self.hash_table_offset + self.hash_table_size

    @property
    def grpi_offset(self) -> int:
        return self.name_table_offset + self.name_table_size

    @property
    def body_offset(self) -> int:
        return self.grpi_offset + GRPI_ENTRY_SIZE * self.group_count

    @property
    def total_size(self) -> int:
        return self.body_offset + self.body_size

    def with_sizes(self, **sizes: int) -> Header:
        return replace(self, **sizes)


def decode(plain: bytes) -> Header | None:
    """Header fields from 48 decrypted bytes, or None if the signature is not "nkpi"."""
    sig, guid, *fields = _FMT.unpack(plain[:HEADER_SIZE])
    if sig != SIGNATURE:
        return None
    return Header(guid, *fields)


def encode(header: Header) -> bytes:
    """The 48 plaintext bytes of a header."""
    return _FMT.pack(
        SIGNATURE,
        header.guid,
        header.file_count,
        header.padding,
        header.body_size,
        header.group_count,
        header.hash_table_size,
        header.name_table_size,
    )


def _guard(raw: bytes) -> bytes:
    """Apply/undo the header guard: bytes 24..28 XOR 0x55 (PF `applyGuard`)."""
    b = bytearray(raw)
    for i in range(_GUARD_SLICE.start, _GUARD_SLICE.stop):
        b[i] ^= 0x55
    return bytes(b)


def decrypt(raw: bytes, scheme: KeyScheme) -> Header | None:
    """Decrypt a raw header with a scheme (applying the guard when the scheme has one)."""
    if scheme.guard:
        raw = _guard(raw)
    return decode(crypt(raw[:HEADER_SIZE], scheme.header, MAGIC_DATA))


def encrypt(header: Header, scheme: KeyScheme) -> bytes:
    """The 48 on-disk bytes of a header under a scheme."""
    raw = crypt(encode(header), scheme.header, MAGIC_DATA)
    return _guard(raw) if scheme.guard else raw


def check_sizes(header: Header, file_size: int) -> None:
    """Refuse a header whose fields are negative or do not add up to the file size (before any allocation)."""
    fields = {
        "FileCount": header.file_count,
        "BodySize": header.body_size,
        "GroupCount": header.group_count,
        "HashTableSize": header.hash_table_size,
        "NameTableSize": header.name_table_size,
    }
    for name, value in fields.items():
        if value < 0 or value > file_size:
            raise corrupt(0, f"header {name} between 0 and the file size {file_size}", str(value))
    if header.total_size != file_size:
        raise corrupt(
            0,
            f"header section sizes adding up to the file size {file_size}",
            f"they add up to {header.total_size}",
        )


def fits(header: Header | None, file_size: int) -> bool:
    return (
        header is not None
        and header.total_size == file_size
        and min(
            header.file_count,
            header.body_size,
            header.group_count,
            header.hash_table_size,
            header.name_table_size,
        )
        >= 0
    )


def identify(
    raw: bytes, file_size: int, schemes: tuple[str, ...] = ("legacy", "guard", "protected")
) -> tuple[KeyScheme, Header] | None:
    """The first known scheme under which the raw header decrypts to "nkpi" with consistent sizes."""
    for name in schemes:
        scheme = SCHEMES[name]
        header = decrypt(raw, scheme)
        if fits(header, file_size):
            assert header is not None
            return scheme, header
    return None


def recover(raw: bytes, file_size: int) -> tuple[int, bool, Header] | None:
    """Recover an unknown header seed from the known "nkpi" signature: (seed, guarded, header)."""
    sig_word = int.from_bytes(SIGNATURE, "little")
    for guarded in (False, True):
        data = _guard(raw) if guarded else raw
        found: list[Header] = []

        def accept(seed: int, data: bytes = data, found: list[Header] = found) -> bool:
            header = decode(crypt(data[:HEADER_SIZE], seed, MAGIC_DATA))
            if fits(header, file_size):
                assert header is not None
                found.append(header)
                return True
            return False

        seed = recover_word_seed(data, 0, sig_word, MAGIC_DATA, accept)
        if seed is not None:
            return seed, guarded, found[-1]
    return None
