"""The nkpi LCG keystream cipher and its key schemes, vectorised with numpy (research/pvf.md §1B).

The cipher is a symmetric XOR with a keystream drawn from the MSVC-style LCG `x' = 0x343FD*x + magic`:
every 32-bit keystream word consumes two LCG steps, `t1 = A*s + m; s = A*t1 + m; ks = (t1 & 0xFFFF0000) |
(s >> 16)`, and a 1-3 byte tail uses the next word's low bytes (PF `crypt.go`, restated in research §1B).
A Python per-byte loop is far too slow for a 580 MB archive, so the keystream is computed in blocks:
with y_i the first LCG state of word i, y_i = P_i*y_0 + Q_i (mod 2^32) where (P_i, Q_i) is the i-fold
composition of the two-step map; P and Q are precomputed once per magic and each block costs two vector ops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

MASK32 = 0xFFFFFFFF
LCG_A = 0x343FD
MAGIC_DATA = 0x269EC3
"""LCG increment for the header, hash table, GRPI and body chunks (research §1B)."""
MAGIC_POOL = 0x269EC9
"""LCG increment for the two string pools of the name table (research §1B)."""

_BLOCK_WORDS = 1 << 16


def legacy_seed(key: bytes) -> int:
    """Seed of a 4-byte ASCII key name in the LegacyNkpi scheme (90US; research §1B key table)."""
    k0, k1, k2, k3 = key[0], key[1], key[2], key[3]
    return (0x76826701 * k0 + 0x1C1 * (k3 + 0x1C1 * (k2 + 0x1C1 * k1))) & MASK32


def wide_seed(key: str) -> int:
    """Seed of a 4-character key name over UTF-16 code units ("wide" scheme: 90CN protected, 110US)."""
    u0, u1, u2, u3 = (ord(c) for c in key[:4])
    return (0x339E9711 * u0 + 0x393 * (u3 + 0x393 * (u2 + 0x393 * u1))) & MASK32


@dataclass(frozen=True)
class KeyScheme:
    """The six seeds one nkpi variant uses, plus the XOR masks of the two pool size fields."""

    name: str
    header: int
    hash: int
    grpi: int
    pool_a: int
    pool_w: int
    body: int
    mask_a: int
    mask_w: int
    guard: bool = False
    """Header bytes 24..28 are XOR-ed with 0x55 before decryption (PF `applyGuard`)."""


_LEGACY_MASKS = (0xAA74472E, 0x9A82F037)

LEGACY = KeyScheme(
    "legacy",
    legacy_seed(b"HeaD"),
    legacy_seed(b"HASH"),
    legacy_seed(b"GRPI"),
    legacy_seed(b"sTrA"),
    legacy_seed(b"sTrW"),
    legacy_seed(b"BodY"),
    *_LEGACY_MASKS,
)
GUARD = KeyScheme(**{**LEGACY.__dict__, "name": "guard", "guard": True})
PROTECTED = KeyScheme(
    "protected",
    wide_seed("hEAd"),
    wide_seed("hash"),
    wide_seed("grpi"),
    wide_seed("StRa"),
    wide_seed("StRw"),
    wide_seed("bODy"),
    *_LEGACY_MASKS,
)
PAGED = KeyScheme(
    "paged",
    wide_seed("iNfO"),
    0x5824C072,  # recovered structurally by pvfine; the key name is unknown (research §1B, §5 item 6)
    wide_seed("Gidx"),
    wide_seed("stAs"),
    wide_seed("stWs"),
    wide_seed("mAIn"),
    0xE7ADF7EA,
    0xB8DEA7AC,
)
SCHEMES: dict[str, KeyScheme] = {s.name: s for s in (LEGACY, GUARD, PROTECTED, PAGED)}


def _compose(a1: int, c1: int, a2: int, c2: int) -> tuple[int, int]:
    """Affine map `x -> a2*(a1*x + c1) + c2` (apply the first, then the second), mod 2^32."""
    return (a1 * a2) & MASK32, (a2 * c1 + c2) & MASK32


@lru_cache(maxsize=4)
def _block_tables(magic: int) -> tuple[np.ndarray, np.ndarray, int, int]:
    """P_i, Q_i for i < block size (word i's first state from word 0's), plus the map over one whole block."""
    step2 = _compose(LCG_A, magic, LCG_A, magic)  # two LCG steps = one keystream word
    p = np.ones(1, dtype=np.uint32)
    q = np.zeros(1, dtype=np.uint32)
    span = step2  # map that advances len(p) words
    while len(p) < _BLOCK_WORDS:
        a, c = span
        p = np.concatenate([p, p * np.uint32(a)])
        q = np.concatenate([q, q * np.uint32(a) + np.uint32(c)])
        span = _compose(a, c, a, c)
    p.setflags(write=False)
    q.setflags(write=False)
    return p, q, span[0], span[1]


def keystream_words(seed: int, count: int, magic: int = MAGIC_DATA) -> np.ndarray:
    """The first `count` 32-bit keystream words for `seed` (uint32 array)."""
    out = np.empty(count, dtype=np.uint32)
    if count == 0:
        return out
    p, q, block_a, block_c = _block_tables(magic)
    y0 = (LCG_A * (seed & MASK32) + magic) & MASK32  # t1 of word 0
    a32, m32 = np.uint32(LCG_A), np.uint32(magic)
    hi_mask = np.uint32(0xFFFF0000)
    for start in range(0, count, _BLOCK_WORDS):
        n = min(_BLOCK_WORDS, count - start)
        t1 = p[:n] * np.uint32(y0) + q[:n]
        s = t1 * a32 + m32
        np.bitwise_or(t1 & hi_mask, s >> np.uint32(16), out=out[start : start + n])
        y0 = (block_a * y0 + block_c) & MASK32
    return out


def keystream_word_at(seed: int, k: int, magic: int = MAGIC_DATA) -> int:
    """Keystream word `k` for `seed` alone (`keystream_words(seed, k + 1)[k]` without the k words before it):
    the LCG is an affine map, so k steps of it are one map found by squaring."""
    a, c = 1, 0  # the identity map
    step_a, step_c = _compose(LCG_A, magic, LCG_A, magic)  # one keystream word = two LCG steps
    while k:
        if k & 1:
            a, c = _compose(a, c, step_a, step_c)
        step_a, step_c = _compose(step_a, step_c, step_a, step_c)
        k >>= 1
    t1 = (a * ((LCG_A * (seed & MASK32) + magic) & MASK32) + c) & MASK32
    s = (t1 * LCG_A + magic) & MASK32
    return (t1 & 0xFFFF0000) | (s >> 16)


def crypt(data: bytes | bytearray | memoryview, seed: int, magic: int = MAGIC_DATA) -> bytes:
    """Encrypt or decrypt `data` (the cipher is its own inverse)."""
    n = len(data)
    if n == 0:
        return b""
    words = (n + 3) // 4
    ks = keystream_words(seed, words, magic)
    buf = np.zeros(words * 4, dtype=np.uint8)
    buf[:n] = np.frombuffer(data, dtype=np.uint8)
    np.bitwise_xor(buf.view("<u4"), ks, out=buf.view("<u4"))
    return buf[:n].tobytes()
