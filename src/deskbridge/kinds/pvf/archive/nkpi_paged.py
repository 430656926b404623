"""Page guards of paged nkpi archives (110US / 100CN / 115CN) and the user-supplied key material.

Every 10 MiB page (0xA00000) has its first 0x2800 bytes AES-256-CBC encrypted in place with IV = 0, one
32-byte key per page (research/pvf.md §1B, PF `PVF新格式分析.md §2.3–2.9`). The page keys come from the
game client: `sk.dat` holds RSA-1024 blocks (128 B each) decrypted with a private key embedded in the
client executable, whose output is AES-256-CBC(IV=0)-unwrapped (first `len & ~0xFF` bytes) with a 32-byte
"metadata key" into N × 32-byte page keys. We never ship keys: the user passes either the page keys
directly or `sk.dat` plus the RSA modulus/private exponent and the metadata key (a JSON key file or CLI
options). A final page shorter than 0x2800 bytes has only its whole 16-byte blocks encrypted (our choice;
no source describes that case).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from deskbridge.core.errors import BridgeError, ErrorCode

from .nkpi_errors import key_required

PAGE_SIZE = 0xA00000
GUARD_SIZE = 0x2800
RSA_BLOCK = 128


def _aes(key: bytes):  # type: ignore[no-untyped-def]
    try:
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise key_required(
            "paged nkpi archives need the 'cryptography' package for AES page guards; install it"
        ) from exc
    return Cipher(algorithms.AES(key), modes.CBC(bytes(16)))


def aes_cbc_decrypt(key: bytes, data: bytes) -> bytes:
    d = _aes(key).decryptor()
    return d.update(data) + d.finalize()


def aes_cbc_encrypt(key: bytes, data: bytes) -> bytes:
    e = _aes(key).encryptor()
    return e.update(data) + e.finalize()


def guard_length(page: int, file_size: int) -> int:
    """Bytes of page `page` under AES: 0x2800, or the whole 16-byte blocks of a short last page."""
    start = page * PAGE_SIZE
    return max(0, min(GUARD_SIZE, file_size - start)) & ~15


def page_count(file_size: int) -> int:
    return (file_size + PAGE_SIZE - 1) // PAGE_SIZE


@dataclass(frozen=True)
class NkpiKeys:
    """Key material for nkpi archives, all supplied by the user; repr never shows it."""

    page_keys: tuple[bytes, ...] = field(default=(), repr=False)

    def page_key(self, page: int) -> bytes:
        if page >= len(self.page_keys):
            raise key_required(
                f"the archive needs a key for page {page} but only {len(self.page_keys)} page keys were given",
                pages_needed=page + 1,
                keys_given=len(self.page_keys),
            )
        return self.page_keys[page]

    def __bool__(self) -> bool:
        return bool(self.page_keys)


def _rsa_unpad(block: bytes) -> bytes:
    """PKCS#1 v1.5 padding removed (block type 1 or 2); a block without padding is returned whole."""
    if len(block) >= 11 and block[0] == 0 and block[1] in (1, 2):
        sep = block.find(b"\0", 2)
        if sep >= 10:
            return block[sep + 1 :]
    return block


def unwrap_sk_dat(
    sk_dat: bytes, modulus: int, private_exponent: int, metadata_key: bytes
) -> tuple[bytes, ...]:
    """Page keys from `sk.dat`: raw RSA per 128-byte block, unpad, concatenate, AES-unwrap, split in 32s."""
    if len(sk_dat) == 0 or len(sk_dat) % RSA_BLOCK:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"sk.dat must be a whole number of 128-byte RSA blocks, got {len(sk_dat)} bytes",
        )
    if len(metadata_key) != 32:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the metadata key must be 32 bytes (64 hex digits)")
    plain = bytearray()
    for i in range(0, len(sk_dat), RSA_BLOCK):
        c = int.from_bytes(sk_dat[i : i + RSA_BLOCK], "big")
        if c >= modulus:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"sk.dat block {i // RSA_BLOCK} does not fit the RSA modulus; check the key parameters",
            )
        m = pow(c, private_exponent, modulus).to_bytes(RSA_BLOCK, "big")
        plain += _rsa_unpad(m)
    cut = len(plain) & ~0xFF
    unwrapped = aes_cbc_decrypt(metadata_key, bytes(plain[:cut])) + bytes(plain[cut:])
    return tuple(unwrapped[i : i + 32] for i in range(0, len(unwrapped) - 31, 32))


def _int(value: object, name: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        v = value.strip().lower()
        try:
            return int(v, 16) if v.startswith("0x") else int(v)
        except ValueError:
            pass
    raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"key parameter {name} must be an integer or a hex string")


def load_keys(
    *,
    key_file: str | Path | None = None,
    sk_dat: str | Path | None = None,
    rsa_modulus: int | str | None = None,
    rsa_private_exponent: int | str | None = None,
    metadata_key: str | None = None,
    page_keys_hex: list[str] | None = None,
) -> NkpiKeys:
    """Key material from a JSON key file and/or explicit parameters (explicit ones win).

    Key file fields: `page_keys` (list of 64-hex-digit keys) or `sk_dat` (path, relative to the key file),
    `rsa_modulus`, `rsa_private_exponent` (decimal, or hex with a `0x` prefix) and `metadata_key` (64 hex digits).
    """
    cfg: dict[str, object] = {}
    base = Path(".")
    if key_file is not None:
        base = Path(key_file).parent
        try:
            cfg = json.loads(Path(key_file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT, f"cannot read the key file {key_file}: {exc}"
            ) from exc
        if not isinstance(cfg, dict):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "the key file must hold a JSON object")
    hexes = page_keys_hex if page_keys_hex is not None else cfg.get("page_keys")
    if hexes:
        try:
            keys = tuple(bytes.fromhex(str(h)) for h in hexes)  # type: ignore[union-attr]
        except ValueError as exc:
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"page keys must be hex: {exc}") from exc
        if any(len(k) != 32 for k in keys):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, "every page key must be 32 bytes (64 hex digits)")
        return NkpiKeys(keys)
    sk = sk_dat if sk_dat is not None else cfg.get("sk_dat")
    if sk is None:
        return NkpiKeys()
    sk_path = Path(str(sk))
    if not sk_path.is_absolute() and sk_dat is None:
        sk_path = base / sk_path
    n = rsa_modulus if rsa_modulus is not None else cfg.get("rsa_modulus")
    d = rsa_private_exponent if rsa_private_exponent is not None else cfg.get("rsa_private_exponent")
    meta = metadata_key if metadata_key is not None else cfg.get("metadata_key")
    if n is None or d is None or meta is None:
        raise key_required(
            "sk.dat was given but the RSA modulus, private exponent or metadata key is missing"
        )
    try:
        data = sk_path.read_bytes()
        meta_bytes = bytes.fromhex(str(meta))
    except (OSError, ValueError) as exc:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"cannot read the key material: {exc}") from exc
    return NkpiKeys(unwrap_sk_dat(data, _int(n, "rsa_modulus"), _int(d, "rsa_private_exponent"), meta_bytes))
