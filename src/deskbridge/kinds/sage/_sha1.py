"""`sha1` without importing `hashlib`: CPython's own `_sha1` gives the same digests, and a warm start (which
hashes only a fingerprint and a path) then skips loading OpenSSL through `hashlib` (~4 ms of ~0.1 s)."""

from __future__ import annotations

try:
    from _sha1 import sha1
except ImportError:  # an interpreter built without it
    from hashlib import sha1

__all__ = ["sha1"]
