"""One open Markdown document: its collab text, where it lives on disk, how to write it back, and selection.

The text inside is always '\\n'-separated (CodeMirror normalizes line breaks the same way); the original line
ending, byte-order mark and encoding are remembered so a save writes the file back in the style it came in.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.kinds.markdown import diskio
from deskbridge.kinds.markdown.collab import CollabDocument, map_position

DOCUMENT_MAX_BYTES: Final = 64 * 1024 * 1024
"""Largest file we open as a document (the 120,000-line stress document is about 10 MB)."""

DIRTY_COMPARE_MAX_CHARS: Final = 1024 * 1024
"""Up to this size `dirty` compares content; above it any change since the save counts."""

SUPPORTED_ENCODINGS: Final = ("utf-8", "utf-8-sig", "utf-16", "gb18030", "big5", "shift_jis", "latin-1")


@dataclass
class DecodedFile:
    text: str
    encoding: str
    newline: str
    bom: bool


def decode_file(data: bytes, encoding: str | None = None) -> DecodedFile:
    """Decode file bytes to '\\n'-separated text, detecting BOM and line endings; typed error on bad bytes."""
    bom = data.startswith(b"\xef\xbb\xbf")
    if encoding is None and data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encoding = "utf-16"  # a UTF-16 byte-order mark says it all (the codec reads and writes the mark)
    enc = (encoding or "utf-8").lower()
    if enc not in SUPPORTED_ENCODINGS:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"encoding '{encoding}' is not supported (use one of {', '.join(SUPPORTED_ENCODINGS)})",
        )
    if enc in ("utf-8", "utf-8-sig"):
        enc = "utf-8"
        payload = data[3:] if bom else data
    else:
        payload = data
    try:
        text = payload.decode(enc)
    except UnicodeDecodeError as exc:
        raise BridgeError(
            ErrorCode.ENCODING_MISMATCH,
            f"the file is not valid {enc} (byte {exc.start}); reopen it with another encoding",
            data={"encoding": enc, "byteOffset": exc.start},
        ) from None
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr_only = text.count("\r") - crlf
    newline = "\r\n" if crlf > lf and crlf >= cr_only else ("\r" if cr_only > lf + crlf else "\n")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return DecodedFile(text, enc, newline, bom)


def encode_text(text: str, encoding: str, newline: str, bom: bool) -> bytes:
    """The file bytes for `text` in the document's own encoding, line endings and BOM."""
    if newline != "\n":
        text = text.replace("\n", newline)
    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise BridgeError(
            ErrorCode.ENCODING_MISMATCH,
            f"character {text[exc.start]!r} at offset {exc.start} cannot be written as {encoding}; "
            "save as UTF-8 instead",
            data={"offset": exc.start, "encoding": encoding},
        ) from None
    if bom and encoding == "utf-8":
        data = b"\xef\xbb\xbf" + data
    return data


@dataclass
class Selection:
    """The last selection the browser reported, in code points of the text at `version`."""

    anchor: int
    head: int
    version: int


@dataclass
class MarkdownDocument:
    """An open document: id, path (None for an unsaved new one), collab state, save state, selection."""

    doc_id: str
    path: Path | None
    collab: CollabDocument
    encoding: str = "utf-8"
    newline: str = "\n"
    bom: bool = False
    identity: diskio.FileIdentity | None = None
    saved_text: str = ""
    saved_version: int = 0
    epoch: str = field(default_factory=lambda: secrets.token_hex(3))
    opened_at: float = field(default_factory=time.time)
    selection: Selection | None = None
    external_change: dict[str, Any] | None = None
    """Set when the file on disk changed under us (the UI offers reload/keep)."""

    @classmethod
    def load(cls, doc_id: str, path: Path, encoding: str | None = None) -> MarkdownDocument:
        # One bounded read of a regular file: a FIFO or device named `x.md` is refused, never blocked on.
        data = files.read_regular_file(path, max_bytes=DOCUMENT_MAX_BYTES, shown_as=path.name)
        decoded = decode_file(data, encoding)
        return cls(
            doc_id=doc_id,
            path=path,
            collab=CollabDocument(decoded.text),
            encoding=decoded.encoding,
            newline=decoded.newline,
            bom=decoded.bom,
            identity=diskio.identity_of(path),
            saved_text=decoded.text,
        )

    @classmethod
    def new(cls, doc_id: str, text: str = "") -> MarkdownDocument:
        return cls(doc_id=doc_id, path=None, collab=CollabDocument(text), saved_text=text)

    # --- state -----------------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self.collab.text

    @property
    def version(self) -> int:
        return self.collab.version

    @property
    def revision(self) -> str:
        """Opaque revision: the collab version plus an epoch so a reopened document never reuses one."""
        return f"{self.collab.version}-{self.epoch}"

    def version_of(self, revision: str) -> int:
        """The collab version a revision string names; STALE_WORKSPACE when it is from another opening."""
        if not isinstance(revision, str) or "-" not in revision:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"expectedRevision {revision!r} is not a revision from this server (like '{self.revision}')",
                data={"revision": self.revision},
            )
        number, _, epoch = revision.partition("-")
        if epoch != self.epoch or not number.isdigit() or int(number) > self.collab.version:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                f"revision {revision} is not a revision of the document as it is open now "
                f"(current: {self.revision})",
                data={"revision": self.revision},
            )
        return int(number)

    @property
    def dirty(self) -> bool:
        """Unsaved changes: the text differs from what was last read from or written to the file.

        Compared by content for documents up to 1 MiB (typing a word and deleting it again is clean); for
        bigger ones any change since the save counts, so an edit never has to rebuild a 40 MB string."""
        if self.collab.version == self.saved_version:
            return False
        if self.collab.length != len(self.saved_text):
            return True
        if self.collab.length > DIRTY_COMPARE_MAX_CHARS:
            return True
        return self.collab.text != self.saved_text

    @property
    def name(self) -> str:
        return self.path.name if self.path else f"untitled-{self.doc_id}.md"

    def file_bytes(self) -> bytes:
        return encode_text(self.collab.text, self.encoding, self.newline, self.bom)

    def mark_saved(self, text: str, version: int, identity: diskio.FileIdentity | None) -> None:
        self.saved_text = text
        self.saved_version = version
        self.identity = identity
        self.external_change = None

    # --- selection -------------------------------------------------------------------------------------

    def set_selection(self, anchor: int, head: int, version: int) -> None:
        self.selection = Selection(anchor, head, version)

    def current_selection(self) -> tuple[int, int] | None:
        """The reported selection mapped through every update since it was reported, as (from, to)."""
        sel = self.selection
        if sel is None:
            return None
        try:
            later = self.collab.edits_since(sel.version)
        except BridgeError:
            return None
        a, h = sel.anchor, sel.head
        for edits in later:
            a, h = (
                _map_or_collapse(a, edits, 1 if a > h else -1),
                _map_or_collapse(h, edits, 1 if h > a else -1),
            )
        return (min(a, h), max(a, h))


def _map_or_collapse(pos: int, edits: list[Any], assoc: int) -> int:
    """Map a selection end through edits; an end inside replaced text moves to where that text started."""
    mapped = map_position(pos, edits, assoc=assoc)
    if mapped is not None:
        return mapped
    start = next(e.start for e in edits if e.start < pos < e.end)
    return map_position(start, edits, assoc=-1) or 0
