"""Read the asset list of a compiled BinaryAssetBuilder stream manifest (`*.manifest`, versions 5–7).

Layout (research/sage.md §2.4, after OpenSAGE `Data/StreamFS/ManifestFile.cs`): a header — either
`u32 0, u16 version (7), u8 isBigEndian, u8 isLinked` or `u8 isBigEndian, u8 isLinked, u16 version (5|6)` —
then eleven u32 counts and buffer sizes, one entry of eleven u32 per asset (plus `isTokenized` from
version 6), the asset-reference buffer, the referenced-manifest names, the NUL-terminated asset names
(`Type:Id`, or `Type:Type:Id` for art) and the source-file names. Only names and sources are read.
Every size is checked against the file length, so a damaged file raises `ManifestError`, never more.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

MANIFEST_MAX_ASSETS = 1_000_000
"""More assets than this in one manifest is treated as damage (stock RA3 manifests hold ~14 k)."""


class ManifestError(ValueError):
    """The bytes are not a manifest this reader understands; the message says where it broke."""


@dataclass(frozen=True, slots=True)
class ManifestAsset:
    """One compiled asset: its type (first name segment), id (last segment) and source file."""

    type: str
    id: str
    source: str


@dataclass(frozen=True, slots=True)
class Manifest:
    version: int
    big_endian: bool
    assets: tuple[ManifestAsset, ...]
    referenced: tuple[str, ...]
    """Names of the manifests this stream references or patches."""


def _cstring(buf: bytes, offset: int) -> str:
    if offset < 0 or offset >= len(buf):
        return ""
    end = buf.find(b"\0", offset)
    return buf[offset : end if end >= 0 else len(buf)].decode("latin-1")


def parse_manifest(data: bytes) -> Manifest:
    """Parse a manifest; raise `ManifestError` for anything truncated, oversized or of another version."""
    if len(data) < 8:
        raise ManifestError(f"manifest too short: {len(data)} bytes")
    pos = 0
    if struct.unpack_from("<I", data, 0)[0] == 0:
        version = struct.unpack_from("<H", data, 4)[0]
        big = data[6] != 0
        pos = 8
    else:
        big = data[0] != 0
        version = struct.unpack_from(">H" if big else "<H", data, 2)[0]
        pos = 4
    if version not in (5, 6, 7):
        raise ManifestError(f"unsupported manifest version {version} (5, 6 and 7 are read)")
    e = ">" if big else "<"
    if len(data) < pos + 44:
        raise ManifestError("manifest header is truncated")
    (
        _checksum,
        _types_hash,
        count,
        _inst,
        _max_inst,
        _max_reloc,
        _max_imports,
        ref_size,
        names_ref_size,
        name_size,
        source_size,
    ) = struct.unpack_from(e + "11I", data, pos)
    pos += 44
    entry_size = 48 if version >= 6 else 44
    if count > MANIFEST_MAX_ASSETS:
        raise ManifestError(f"manifest claims {count} assets, more than {MANIFEST_MAX_ASSETS}")
    need = pos + count * entry_size + ref_size + names_ref_size + name_size + source_size
    if need > len(data):
        raise ManifestError(f"manifest needs {need} bytes but the file has {len(data)}")
    entries = [struct.unpack_from(e + "11I", data, pos + i * entry_size) for i in range(count)]
    pos += count * entry_size + ref_size
    refs_buf = data[pos : pos + names_ref_size]
    pos += names_ref_size
    names = data[pos : pos + name_size]
    pos += name_size
    sources = data[pos : pos + source_size]
    referenced: list[str] = []
    i = 0
    while i < len(refs_buf):
        i += 1  # type byte: 1 = reference, 2 = patch
        end = refs_buf.find(b"\0", i)
        end = len(refs_buf) if end < 0 else end
        if end > i:
            referenced.append(refs_buf[i:end].decode("latin-1"))
        i = end + 1
    assets = []
    for entry in entries:
        full = _cstring(names, entry[6])
        if not full:
            continue
        parts = full.split(":")
        assets.append(ManifestAsset(type=parts[0], id=parts[-1], source=_cstring(sources, entry[7])))
    return Manifest(version=version, big_endian=big, assets=tuple(assets), referenced=tuple(referenced))


def build_manifest(assets: list[tuple[str, str]], version: int = 7, big_endian: bool = False) -> bytes:
    """A minimal valid manifest holding `(name, source)` pairs: for tests and fuzz seeds."""
    e = ">" if big_endian else "<"
    names = b""
    sources = b""
    entries = b""
    for name, source in assets:
        fields = [0, 0, 0, 0, 0, 0, len(names), len(sources), 0, 0, 0]
        entries += struct.pack(e + "11I", *fields)
        if version >= 6:
            entries += struct.pack(e + "I", 0)
        names += name.encode("latin-1") + b"\0"
        sources += source.encode("latin-1") + b"\0"
    header = (
        struct.pack("<IH", 0, version) + bytes([int(big_endian), 0])
        if version == 7
        else bytes([int(big_endian), 0]) + struct.pack(e + "H", version)
    )
    counts = struct.pack(e + "11I", 0, 0, len(assets), 0, 0, 0, 0, 0, 0, len(names), len(sources))
    return header + counts + entries + names + sources
