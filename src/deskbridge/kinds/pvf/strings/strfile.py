"""`.str` string files: `key>value` lines, `//` comments, NUL padding kept, edits that preserve everything else.

Classic `.str` files are text in the pack encoding with CRLF lines, split at the first `>` (research/pvf.md
§2A); nkpi stores them as UTF-16LE (dataType 3), sometimes NUL-padded at the end — new lines go *before*
the padding (pvfine §2.15 bug note). `StrFile` works on decoded text so both families share it; the codec
(`encoding`) is the caller's (`"cp950"`, `"utf-16-le"` …).
"""

from __future__ import annotations

from dataclasses import dataclass

from deskbridge.core.errors import BridgeError, ErrorCode


@dataclass(slots=True)
class StrFile:
    """A parsed `.str` file that re-serialises to its exact input until edited."""

    text: str
    """Decoded content without the trailing NUL padding."""
    padding: str
    """Trailing NULs, kept verbatim."""
    newline: str
    """Line ending used for appended lines (the file's own: CRLF or LF)."""

    @classmethod
    def decode(cls, data: bytes, encoding: str) -> StrFile:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError as exc:
            raise BridgeError(
                ErrorCode.ENCODING_MISMATCH,
                f".str bytes are not valid {encoding} at offset {exc.start}",
                data={"encoding": encoding, "offset": exc.start},
            ) from None
        if text.encode(encoding) != data:
            raise BridgeError(
                ErrorCode.ENCODING_MISMATCH,
                f".str bytes do not survive decoding and re-encoding as {encoding} (duplicate code points)",
                hint="Edit this file as raw bytes, or open the archive with its real encoding.",
                data={"encoding": encoding},
            )
        return cls.from_text(text)

    @classmethod
    def from_text(cls, text: str) -> StrFile:
        body = text.rstrip("\0")
        padding = text[len(body) :]
        newline = "\r\n" if "\r\n" in body or "\n" not in body else "\n"
        return cls(body, padding, newline)

    def entries(self) -> dict[str, str]:
        """key → value, first occurrence wins; comments and lines without `>` are skipped."""
        out: dict[str, str] = {}
        for line in self.text.split("\n"):
            line = line.rstrip("\r")
            if not line or line.startswith("//"):
                continue
            key, sep, value = line.partition(">")
            if sep and key not in out:
                out[key] = value
        return out

    def duplicate_keys(self) -> list[str]:
        """Keys with more than one `key>` line: tools disagree on which wins (we and pvfUtility's lookup
        take the first, pvf-parser-ts the last, pvfUtility's loader drops the file), so they are warned."""
        seen: set[str] = set()
        dups: list[str] = []
        for line in self.text.split("\n"):
            line = line.rstrip("\r")
            if not line or line.startswith("//"):
                continue
            key, sep, _ = line.partition(">")
            if sep:
                if key in seen and key not in dups:
                    dups.append(key)
                seen.add(key)
        return dups

    def get(self, key: str) -> str | None:
        return self.entries().get(key)

    def set(self, key: str, value: str) -> None:
        """Change the first `key>` line, or append one before the padding; keys/values are single lines."""
        if not key or ">" in key or key.startswith("//") or any(c in key + value for c in "\r\n\0"):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "a .str key must be non-empty without '>', and key/value without line breaks or NUL",
            )
        lines = self.text.split("\n")
        for i, line in enumerate(lines):
            bare = line.rstrip("\r")
            if not bare.startswith("//") and bare.partition(">")[0] == key and ">" in bare:
                lines[i] = f"{key}>{value}" + ("\r" if line.endswith("\r") else "")
                self.text = "\n".join(lines)
                return
        body = self.text
        if body and not body.endswith("\n"):
            body += self.newline
        self.text = body + f"{key}>{value}" + self.newline

    def to_text(self) -> str:
        return self.text + self.padding

    def encode(self, encoding: str) -> bytes:
        return self.to_text().encode(encoding)
