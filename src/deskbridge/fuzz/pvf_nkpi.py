"""Fuzz targets for the nkpi PVF parsers: whole archives, header, hash table, GRPI, name pools, the nkpi
script codec and UTF-16 text files — with round-trip properties where the format promises one."""

from __future__ import annotations

import contextlib
import struct
import tempfile
import zlib
from functools import lru_cache
from pathlib import Path

from deskbridge.core.errors import BridgeError
from deskbridge.kinds.pvf.archive import nkpi_header as hdr
from deskbridge.kinds.pvf.archive.nkpi import NkpiArchive
from deskbridge.kinds.pvf.archive.nkpi_cipher import LEGACY, MAGIC_DATA, MAGIC_POOL, crypt
from deskbridge.kinds.pvf.archive.nkpi_pools import PoolKeys, StringPools
from deskbridge.kinds.pvf.archive.nkpi_tables import parse_grpi, parse_hash_table
from deskbridge.kinds.pvf.script import nkpi_codec as codec

_MAX_FILES = 48
_VECTORS = Path(__file__).resolve().parents[3] / "../shared/data/pvf"


@lru_cache(maxsize=1)
def _pools() -> StringPools:
    pools = StringPools(
        bytes(8),
        b"\0[name]\0sword\0a`b\0\xff\xfe\0",
        "\0\0巨剑\0\0".encode("utf-16-le"),
        PoolKeys(LEGACY.pool_a, LEGACY.pool_w, LEGACY.mask_a, LEGACY.mask_w),
        "utf-8",
    )
    return pools


def fuzz_archive(data: bytes) -> None:
    """Open, list, read and render an nkpi archive from arbitrary bytes (no 65,536-seed zlib recovery)."""
    ar = NkpiArchive(data, recover=False)
    for path in ar.paths()[:_MAX_FILES]:
        ar.read(path)
        ar.file_info(path)
        with contextlib.suppress(BridgeError):
            text = ar.read_text(path)
            if ar.text_to_payload(path, text) != ar.read(path):
                raise AssertionError(f"decompile → compile changed {path}")


@lru_cache(maxsize=1)
def _plain_image() -> tuple[list[bytes], list[bytes]]:
    """A small legacy archive taken apart into plaintext sections (header, file table, hash table, sTrA,
    sTrW, GRPI) and decompressed chunks, for the structure-aware target below."""
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    with tempfile.TemporaryDirectory() as tmp:
        path = _VECTORS / "vs_jp_shared.pvf"  # 12 files, < 1 KB of payload: fast to rebuild per input
        if not path.is_file():
            path = Path(tmp) / "seed.pvf"
            synth_nkpi(path, 16, 2, "legacy")
        ar = NkpiArchive(path)
        data = path.read_bytes()
        h = ar.header
        sections = [
            hdr.encode(h),
            bytes(ar.files.tobytes()),
            crypt(data[h.hash_table_offset : h.name_table_offset], LEGACY.hash, MAGIC_DATA),
            ar.pools.raw_a(),
            ar.pools.raw_w(),
            crypt(data[h.grpi_offset : h.body_offset], LEGACY.grpi, MAGIC_DATA),
        ]
        chunks = [ar.chunk(i) for i in range(len(ar.grpi))]
        ar.close()
    return sections, chunks


def _xor(data: bytes, mask: bytes) -> bytes:
    if not mask:
        return data
    m = mask[: len(data)].ljust(len(data), b"\0")
    return bytes(a ^ b for a, b in zip(data, m, strict=True))


def fuzz_archive_plain(mask: bytes) -> None:
    """Structure-aware: XOR the input over the *plaintext* sections and chunks of a real archive, re-encrypt
    and re-compress with honest sizes (unless the mask changed them), then open, list and read everything.
    Byte mutations of the ciphertext rarely get past the header; these reach the tables, pools and codec."""
    sections, chunks = _plain_image()
    pos = 0

    def take(n: int) -> bytes:
        nonlocal pos
        part = mask[pos : pos + n]
        pos += n
        return part

    head_mask = take(48)
    ft = _xor(sections[1], take(len(sections[1])))
    ht = _xor(sections[2], take(len(sections[2])))
    pool_a = _xor(sections[3], take(len(sections[3])))
    pool_w = _xor(sections[4], take(len(sections[4])))
    raw_chunks = [_xor(c, take(len(c))) for c in chunks]
    grpi_mask = take(8 * len(chunks))
    pools = StringPools(
        bytes(8),
        pool_a,
        pool_w,
        PoolKeys(LEGACY.pool_a, LEGACY.pool_w, LEGACY.mask_a, LEGACY.mask_w),
        "utf-8",
    )
    h = hdr.decode(sections[0])
    assert h is not None
    archive = assemble_legacy(
        ft,
        pools.serialize(level=1),
        [zlib.compress(c, 1) for c in raw_chunks],
        [len(c) for c in raw_chunks],
        hash_plain=ht,
        guid=h.guid,
        padding=h.padding,
        head_mask=head_mask,
        grpi_mask=grpi_mask,
    )
    fuzz_archive(archive)


def assemble_legacy(
    files: bytes,
    name_table: bytes,
    streams: list[bytes],
    raw_sizes: list[int],
    *,
    hash_plain: bytes = b"",
    guid: bytes = bytes(20),
    padding: int = 0,
    head_mask: bytes = b"",
    grpi_mask: bytes = b"",
) -> bytes:
    """A legacy-keyed nkpi archive from plaintext parts: the file table, an already serialised name table,
    zlib chunk streams (encrypted here) with the original sizes GRPI declares, and an optional hash table.
    Sizes are honest unless a mask changes them (for fuzzing and for crafting hostile archives in tests)."""
    bodies = [crypt(c, LEGACY.body, MAGIC_DATA) for c in streams]
    ends = 0
    grpi = bytearray()
    for b, raw in zip(bodies, raw_sizes, strict=True):
        ends += len(b)
        grpi += struct.pack("<ii", ends, raw)
    h = hdr.Header(guid, len(files) // 24, padding, ends, len(bodies), len(hash_plain), len(name_table))
    head = _xor(hdr.encode(h), head_mask)
    return b"".join(
        [
            crypt(head, LEGACY.header, MAGIC_DATA),
            files,
            crypt(hash_plain, LEGACY.hash, MAGIC_DATA),
            name_table,
            crypt(_xor(bytes(grpi), grpi_mask), LEGACY.grpi, MAGIC_DATA),
            *bodies,
        ]
    )


def legacy_name_table(stream_a: bytes, raw_a: int, stream_w: bytes = b"", raw_w: int = 0) -> bytes:
    """A name table from two zlib streams and the pool sizes they declare (encrypted with the legacy keys)."""
    out = [bytes(8)]
    for stream, raw, seed, mask in (
        (stream_a, raw_a, LEGACY.pool_a, LEGACY.mask_a),
        (stream_w, raw_w, LEGACY.pool_w, LEGACY.mask_w),
    ):
        enc = crypt(stream, seed, MAGIC_POOL) if stream else b""
        out.append(struct.pack("<II", len(enc) ^ mask, raw ^ len(enc)))
        out.append(enc)
    return b"".join(out)


def deflate_repeated(piece: bytes, count: int, *, prefix: bytes = b"", suffix: bytes = b"") -> bytes:
    """zlib stream of `prefix + piece * count + suffix`, compressed in steps (never all of it in memory)."""
    c = zlib.compressobj(9)
    step = max(1, (1 << 20) // max(1, len(piece)))
    parts = [c.compress(prefix)]
    done = 0
    while done < count:
        k = min(step, count - done)
        parts.append(c.compress(piece * k))
        done += k
    parts.append(c.compress(suffix))
    parts.append(c.flush())
    return b"".join(parts)


def file_entries(rows: list[tuple[int, int, int, int, int, int]]) -> bytes:
    """File-table bytes from (name offset, path offset, chunk, data offset, size, data type) rows."""
    return b"".join(struct.pack("<IIiiii", *r) for r in rows)


_BOMB_NAME = b"\0a.equ\0"
"""sTrA of the bombs: the empty root folder (offset 0) and the file name (magic offset 2)."""


def bomb_archive(kind: int, exp: int, count_exp: int = 0, fill: int = 0) -> bytes:
    """An nkpi archive built to amplify: 0 = a string pool of 2**exp `fill` bytes; 1 = one chunk of 2**exp
    zero tokens read as one script; 2 = 2**count_exp file entries over one chunk of 2**exp tokens; 3 = one
    string of 2**exp bytes referenced by 2**count_exp string tokens. Small on disk, huge if read naively."""
    name = _BOMB_NAME
    table = legacy_name_table(zlib.compress(name), len(name))
    if kind == 0:
        n = 1 << exp
        table = legacy_name_table(deflate_repeated(bytes([fill]), n, prefix=name), len(name) + n)
        return assemble_legacy(file_entries([(2, 0, 0, 0, 0, 1)]), table, [zlib.compress(b"")], [0])
    if kind in (1, 2):
        raw = 5 * (1 << exp)
        rows = [(2, 0, 0, 0, raw, 1)] * (1 << (count_exp if kind == 2 else 0))
        return assemble_legacy(file_entries(rows), table, [deflate_repeated(bytes(5), 1 << exp)], [raw])
    long = bytes([fill or 0x78]) * (1 << exp)
    table = legacy_name_table(deflate_repeated(long, 1, prefix=name, suffix=b"\0"), len(name) + len(long) + 1)
    tokens = struct.pack("<Bi", 6, 2 * len(name)) * (1 << count_exp)
    return assemble_legacy(
        file_entries([(2, 0, 0, 0, len(tokens), 1)]), table, [zlib.compress(tokens)], [len(tokens)]
    )


def fuzz_bomb(data: bytes) -> None:
    """Amplification bombs shaped by the input (see `bomb_archive`; up to 2**23 units, 2**14 entries, so one
    input builds in well under the runner's time limit). Whatever the sizes,
    opening, listing, reading and rendering stay within the budgets of `archive/budget.py`: a typed error or
    bounded work, never a memory blow-up (the fuzz runner's address-space cap turns one into a finding)."""
    b = data.ljust(4, b"\0")
    fuzz_archive(bomb_archive(b[0] % 4, b[1] % 24, b[2] % 15, b[3]))


def fuzz_header(data: bytes) -> None:
    """Recognise and size-check arbitrary 48-byte headers (the first 4 bytes of input choose the file size)."""
    size = struct.unpack("<I", data[:4].ljust(4, b"\0"))[0]
    raw = data[4:52].ljust(hdr.HEADER_SIZE, b"\0")
    found = hdr.identify(raw, size)
    if found:
        hdr.check_sizes(found[1], size)
        if hdr.encrypt(found[1], found[0]) != raw:
            raise AssertionError("header re-encryption changed the bytes")


def fuzz_hash_table(data: bytes) -> None:
    pairs, ordered = parse_hash_table(data, 0)
    if 8 + 8 * len(pairs) + 4 * len(ordered) != len(data):
        raise AssertionError("hash table sizes do not add up")


def fuzz_grpi(data: bytes) -> None:
    usable = data[: len(data) - len(data) % 8]
    body = struct.unpack_from("<i", usable, len(usable) - 8)[0] if usable else 0
    parse_grpi(usable, 0, body)


def fuzz_pools(data: bytes) -> None:
    """Parse a name table; resolve a few offsets; an unchanged pool set must serialise back and re-parse."""
    keys = PoolKeys(LEGACY.pool_a, LEGACY.pool_w, LEGACY.mask_a, LEGACY.mask_w)
    pools, _ = StringPools.parse(data, 0, keys, allow_recover=False)
    for off in (0, 1, 2, 3, 7, pools.size_a * 2 - 2, pools.size_w - 1):
        if off >= 0 and pools.is_valid(off):
            pools.resolve(off)
    again, _ = StringPools.parse(pools.serialize(), 0, keys, allow_recover=False)
    if again.raw_a() != pools.raw_a() or again.raw_w() != pools.raw_w():
        raise AssertionError("pool serialise → parse changed the strings")


def fuzz_pool_strings(data: bytes) -> None:
    """Resolve, find and append strings over arbitrary decompressed pool contents."""
    cut = data[0] if data else 0
    a, w = data[1 : 1 + cut], data[1 + cut :]
    w = w[: len(w) - len(w) % 2]
    pools = StringPools(bytes(8), a, w, PoolKeys(1, 2, 3, 4), "utf-8")
    for off in range(0, min(2 * len(a) + 2, 64)):
        if pools.is_valid(off):
            s = pools.resolve(off)
            found = pools.find(s)  # None is fine when `off` points into the middle of a string
            if found is not None and pools.resolve(found) != s:
                raise AssertionError(f"string at {off} is found at {found}, which holds another string")
    for s in ("[name]", "巨剑", ""):
        off = pools.add(s)
        if pools.resolve(off) != s:
            raise AssertionError(f"added {s!r} resolves differently")


def fuzz_script(data: bytes) -> None:
    """Decompile arbitrary records; what decompiles must compile back byte-identical."""
    payload = data[: len(data) - len(data) % 5]
    pools = _pools()
    text = codec.decompile(payload, pools)
    if codec.compile_text(text, pools, original=payload) != payload:
        raise AssertionError("decompile → compile changed the bytes")


def fuzz_text(data: bytes) -> None:
    """Compile arbitrary dialect text as nkpi; what compiles must decompile and compile to the same bytes."""
    text = data.decode("utf-8", "replace")
    pools = _pools()
    payload = codec.compile_text(text, pools)
    if codec.compile_text(codec.decompile(payload, pools), pools, original=payload) != payload:
        raise AssertionError("compile → decompile → compile changed the bytes")


def fuzz_utf16(data: bytes) -> None:
    """DataType 3 text (NUL padding, Korean mojibake) must round-trip exactly."""
    payload = data[: len(data) - len(data) % 2]
    text, mojibake = codec.decode_utf16_text(payload)
    if codec.encode_utf16_text(text, mojibake=mojibake) != payload:
        raise AssertionError("UTF-16 text round trip changed the bytes")


TARGETS = {
    "archive": fuzz_archive,
    "archive_plain": fuzz_archive_plain,
    "bomb": fuzz_bomb,
    "header": fuzz_header,
    "hash_table": fuzz_hash_table,
    "grpi": fuzz_grpi,
    "pools": fuzz_pools,
    "pool_strings": fuzz_pool_strings,
    "script": fuzz_script,
    "text": fuzz_text,
    "utf16": fuzz_utf16,
}


def _seed_archives() -> list[bytes]:
    out = [p.read_bytes() for p in sorted(_VECTORS.glob("vs_*.pvf"))] if _VECTORS.is_dir() else []
    from deskbridge.kinds.pvf.synth.nkpi import synth_nkpi

    with tempfile.TemporaryDirectory() as tmp:
        for variant in ("legacy", "protected"):
            path = Path(tmp) / f"{variant}.pvf"
            synth_nkpi(path, 24, 1, variant)
            out.append(path.read_bytes())
    return out


def _seeds() -> dict[str, list[bytes]]:
    archives = _seed_archives()
    first = archives[0]
    ar = NkpiArchive(first)
    h, scheme = ar.header, ar.scheme
    hash_plain = crypt(first[h.hash_table_offset : h.name_table_offset], scheme.hash, MAGIC_DATA)
    grpi_plain = crypt(first[h.grpi_offset : h.body_offset], scheme.grpi, MAGIC_DATA)
    scripts = [ar.read(p) for p in ar.paths() if ar.data_type(p) == 1][:8]
    texts = [ar.read_text(p).encode("utf-8") for p in ar.paths() if ar.data_type(p) == 1][:8]
    utf16 = [ar.read(p) for p in ar.paths() if ar.data_type(p) == 3][:4]
    ar.close()
    return {
        "archive": archives,
        "archive_plain": [b"", bytes(64)],
        "bomb": [bytes([k, 23, 14, 0]) for k in range(4)] + [bytes([k, 12, 3, 0x41]) for k in range(4)],
        "header": [struct.pack("<I", len(a)) + a[:48] for a in archives],
        "hash_table": [hash_plain],
        "grpi": [grpi_plain],
        "pools": [first[h.name_table_offset : h.grpi_offset]],
        "pool_strings": [bytes([12]) + b"\0[name]\0abc\0" + "\0巨剑\0".encode("utf-16-le")],
        "script": scripts,
        "text": texts,
        "utf16": [*utf16, "╟╤▒╣ ╛╞└╠┼█".encode("utf-16-le")],
    }


SEEDS = _seeds()
