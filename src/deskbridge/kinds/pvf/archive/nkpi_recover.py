"""Recovering unknown nkpi section seeds from known plaintext, as pvfine does (research/pvf.md §1B).

Two kinds of known plaintext exist. A whole 32-bit plaintext word (the header's "nkpi", the hash table's
file count, GRPI's last cumulative size == BodySize) pins one keystream word: its high half is the
first LCG state's high half, so 65,536 low halves are tried and the second state's high half filters
them to ~1. A zlib stream header (`78 9C`, …) pins only the low 16 bits of word 0, leaving 65,536
candidate seeds that are validated by inflating the section to its declared length (`recoverZlibSeed`).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable

import numpy as np

from .nkpi_cipher import LCG_A, MASK32, crypt

_A_INV = pow(LCG_A, -1, 1 << 32)
_ZLIB_HEADERS = (b"\x78\x9c", b"\x78\xda", b"\x78\x01", b"\x78\x5e")
_PROBE_WORDS = 16


def _affine_pow(a: int, c: int, n: int) -> tuple[int, int]:
    """The affine map `x -> a*x + c` applied n times, as (a', c'), by repeated squaring (mod 2^32)."""
    ra, rc = 1, 0
    while n:
        if n & 1:
            ra, rc = (a * ra) & MASK32, (a * rc + c) & MASK32
        a, c = (a * a) & MASK32, (a * c + c) & MASK32
        n >>= 1
    return ra, rc


def _rewind(states: np.ndarray, words: int, magic: int) -> np.ndarray:
    """Seeds `words` keystream words before the given seeds (each word = two LCG steps)."""
    back1 = (_A_INV, (-_A_INV * magic) & MASK32)  # x = A^-1 * (y - m)
    a, c = _affine_pow(*back1, 2 * words)
    return states * np.uint32(a) + np.uint32(c)


def seeds_from_word(word: int, index: int, magic: int) -> list[int]:
    """Every seed whose keystream word number `index` equals `word` (usually one)."""
    lo = np.arange(1 << 16, dtype=np.uint32)
    t1 = np.uint32(word & 0xFFFF0000) | lo
    s = t1 * np.uint32(LCG_A) + np.uint32(magic)
    t1 = t1[(s >> np.uint32(16)) == np.uint32(word & 0xFFFF)]
    state = t1 * np.uint32(_A_INV) + np.uint32((-_A_INV * magic) & MASK32)  # state before word `index`
    return [int(x) for x in _rewind(state, index, magic)]


def seeds_from_low16(low16: int, magic: int) -> np.ndarray:
    """The 65,536 seeds whose keystream word 0 has these low 16 bits (the second state's high half)."""
    s = np.uint32(low16 << 16) | np.arange(1 << 16, dtype=np.uint32)
    ainv, minus_m = np.uint32(_A_INV), np.uint32((-magic) & MASK32)
    t1 = (s + minus_m) * ainv
    return (t1 + minus_m) * ainv


def _probe_keystreams(seeds: np.ndarray, magic: int) -> np.ndarray:
    """The first few keystream bytes of many seeds at once, shape (len(seeds), 4*_PROBE_WORDS)."""
    a, m = np.uint32(LCG_A), np.uint32(magic)
    out = np.empty((len(seeds), _PROBE_WORDS), dtype="<u4")
    s = seeds.copy()
    for i in range(_PROBE_WORDS):
        t1 = s * a + m
        s = t1 * a + m
        out[:, i] = (t1 & np.uint32(0xFFFF0000)) | (s >> np.uint32(16))
    return out.view(np.uint8)


def inflate_exact(data: bytes, raw_len: int) -> bytes | None:
    """Inflate a whole zlib stream that must produce exactly `raw_len` bytes; None if it does not."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, raw_len + 1)
    except zlib.error:
        return None
    if len(out) != raw_len or not d.eof:
        return None
    return out


def recover_zlib_seed(cipher: bytes, raw_len: int, magic: int) -> int | None:
    """The seed under which `cipher` decrypts to a zlib stream inflating to exactly `raw_len` bytes."""
    if len(cipher) < 2:
        return None
    probe = np.frombuffer(cipher[: 4 * _PROBE_WORDS].ljust(4 * _PROBE_WORDS, b"\0"), dtype=np.uint8)
    probe_len = min(len(cipher), 4 * _PROBE_WORDS)
    for head in _ZLIB_HEADERS:
        low16 = (cipher[0] ^ head[0]) | ((cipher[1] ^ head[1]) << 8)
        seeds = seeds_from_low16(low16, magic)
        plain = (_probe_keystreams(seeds, magic) ^ probe)[:, :probe_len]
        for i in _plausible_prefixes(plain):
            seed = int(seeds[i])
            if inflate_exact(crypt(cipher, seed, magic), raw_len) is not None:
                return seed
    return None


def _plausible_prefixes(plain: np.ndarray) -> Iterable[int]:
    """Rows whose first bytes inflate without a zlib error (most random candidates fail at once)."""
    for i in range(plain.shape[0]):
        d = zlib.decompressobj()
        try:
            d.decompress(plain[i].tobytes(), 1 << 16)
        except zlib.error:
            continue
        yield i


def recover_word_seed(
    cipher: bytes, index: int, plain_word: int, magic: int, accept: Callable[[int], bool]
) -> int | None:
    """The seed making keystream word `index` decrypt to `plain_word`, confirmed by `accept(seed)`."""
    if len(cipher) < 4 * (index + 1):
        return None
    c = int.from_bytes(cipher[4 * index : 4 * index + 4], "little")
    for seed in seeds_from_word(c ^ plain_word, index, magic):
        if accept(seed):
            return seed
    return None
