"""One open Markdown document: its collab text, where it lives on disk, how to write it back, and selection.

The text inside is always '\\n'-separated (CodeMirror normalizes line breaks the same way); the original line
ending, byte-order mark and encoding are remembered so a save writes the file back in the style it came in
(a file whose lines end in more than one way keeps each line's own ending: line_endings.py).
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import FileIdentity
from deskbridge.kinds.markdown.collab import UPDATE_LOG_MAX, CollabDocument, map_position
from deskbridge.kinds.markdown.line_endings import MixedEndings, mixed_endings

if TYPE_CHECKING:
    from deskbridge.core.engine import Engine
    from deskbridge.core.workspace import Workspace

DOCUMENT_MAX_BYTES: Final = 64 * 1024 * 1024
"""Largest file we open as a document (the 120,000-line stress document is about 10 MB)."""

SUPPORTED_ENCODINGS: Final = ("utf-8", "utf-8-sig", "utf-16", "gb18030", "big5", "shift_jis", "latin-1")


@dataclass
class DecodedFile:
    text: str
    encoding: str
    newline: str
    """The majority line ending (LF when there are none)."""
    bom: bool
    mixed: MixedEndings | None = None
    """Each line's own ending when they are not all alike."""


def check_encoding(encoding: str) -> str:
    """The document encoding `encoding` names ('utf-8-sig' is 'utf-8': the byte-order mark is kept apart);
    INVALID_ARGUMENT, listing the supported ones, for any other name."""
    enc = encoding.lower()
    if enc not in SUPPORTED_ENCODINGS:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"encoding '{encoding}' is not supported (use one of {', '.join(SUPPORTED_ENCODINGS)})",
            data={"supported": list(SUPPORTED_ENCODINGS)},
        )
    return "utf-8" if enc == "utf-8-sig" else enc


def decode_file(data: bytes, encoding: str | None = None) -> DecodedFile:
    """Decode file bytes to '\\n'-separated text, detecting BOM and line endings; typed error on bad bytes."""
    bom = data.startswith(b"\xef\xbb\xbf")
    if encoding is None and data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        encoding = "utf-16"  # a UTF-16 byte-order mark says it all (the codec reads and writes the mark)
    enc = check_encoding(encoding or "utf-8")
    payload = data[3:] if enc == "utf-8" and bom else data
    try:
        text = payload.decode(enc)
    except UnicodeDecodeError as exc:
        others = ", ".join(e for e in SUPPORTED_ENCODINGS if e not in (enc, "utf-8-sig"))
        raise BridgeError(
            ErrorCode.ENCODING_MISMATCH,
            f"the file is not valid {enc} (byte {exc.start}); nothing was changed",
            hint=f"Open it again with its real encoding (md_open_document with encodingName: one of {others}; "
            "gb18030 for Simplified Chinese, big5 for Traditional, shift_jis for Japanese).",
            data={"encoding": enc, "byteOffset": exc.start, "supported": list(SUPPORTED_ENCODINGS)},
        ) from None
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    cr_only = text.count("\r") - crlf
    newline = "\r\n" if crlf > lf and crlf >= cr_only else ("\r" if cr_only > lf + crlf else "\n")
    mixed = None
    if "\r" in text:
        raw, text = text, text.replace("\r\n", "\n").replace("\r", "\n")
        if (crlf > 0) + (lf > 0) + (cr_only > 0) > 1:
            mixed = mixed_endings(raw, text)
    return DecodedFile(text, enc, newline, bom, mixed)


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


class DocumentKey:
    """Where an open document is a key of the markdown engine workspace (store.py): the engine, the workspace
    and the key. The document's revision, dirty state and file identity are the engine's, read through it."""

    def __init__(self, engine: Engine, workspace: Workspace, key: str) -> None:
        self.engine = engine
        self.workspace = workspace
        self.key = key
        self.tag = workspace.id[-6:]
        """Part of every revision string: a revision of an earlier workspace (an earlier server) never matches."""


@dataclass
class MarkdownDocument:
    """An open document: id, path (None for an unsaved new one), collab state, file format, selection.

    The collab authority keeps the text and its update log (the OT sequence, `version`); the engine keeps the
    revision, what is saved and the file's identity (`bind` makes the document a key of the workspace).
    """

    doc_id: str
    path: Path | None
    collab: CollabDocument
    encoding: str = "utf-8"
    newline: str = "\n"
    bom: bool = False
    mixed_endings: MixedEndings | None = None
    """Each line's ending in the file as last read or saved, when they are not all alike (line_endings.py)."""
    opened_at: float = field(default_factory=time.time)
    selection: Selection | None = None
    external_change: dict[str, Any] | None = None
    """Set when the file on disk changed under us (the UI offers reload/keep)."""
    key: DocumentKey | None = None
    _versions: list[int] = field(default_factory=list)
    _revisions: list[int] = field(default_factory=list)
    """Collab version → engine revision, one pair per accepted update (both strictly increasing)."""

    @classmethod
    def read(cls, doc_id: str, path: Path, encoding: str | None = None) -> MarkdownDocument:
        """Read and decode `path` (its identity is the caller's: `Lifecycle.open_key` takes it around the read)."""
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
            mixed_endings=decoded.mixed,
        )

    @classmethod
    def load(
        cls, doc_id: str, path: Path, encoding: str | None = None
    ) -> tuple[MarkdownDocument, FileIdentity]:
        """`read`, and the identity of the file as it was read (a reload takes both)."""
        doc = cls.read(doc_id, path, encoding)
        return doc, files.file_identity(path)

    @classmethod
    def new(cls, doc_id: str, text: str = "") -> MarkdownDocument:
        return cls(doc_id=doc_id, path=None, collab=CollabDocument(text))

    # --- the engine key ----------------------------------------------------------------------------------

    def bind(self, key: DocumentKey, opened_at: int) -> None:
        """Make the document key `key.key` of the engine workspace, opened at revision `opened_at`.

        Called by the store's `add_key` under `Engine.lock` while `Lifecycle.open_key` adds the key (which
        advances the revision, marks the key clean and records its file's identity — the engine's, once).
        From now on every update the collab log accepts is noted in the engine under the collab lock, so the
        revision of a version is known the moment the version exists. The collab lock is not taken here: the
        document is not reachable by anyone else until this returns (taking it under `Engine.lock` would
        also invert the collab → engine order `_noted` uses)."""
        self._versions, self._revisions = [self.collab.version], [opened_at]
        self.key = key
        self.collab.on_update = self._noted

    def _noted(self, client_id: str, version: int) -> None:
        key = self.key
        assert key is not None
        rev = key.engine.note_changed(client_id, key.workspace.id, [key.key])
        self._versions.append(version)
        self._revisions.append(rev)
        if len(self._versions) > 2 * UPDATE_LOG_MAX:  # the collab log keeps UPDATE_LOG_MAX updates
            del self._versions[:UPDATE_LOG_MAX], self._revisions[:UPDATE_LOG_MAX]

    # --- state -----------------------------------------------------------------------------------------

    @property
    def text(self) -> str:
        return self.collab.text

    @property
    def version(self) -> int:
        return self.collab.version

    @property
    def revision(self) -> str:
        """The engine revision of the current text (see `revision_at`)."""
        return self.revision_at(self.collab.version)

    def revision_at(self, version: int) -> str:
        """The revision string of collab version `version`: `"<engine revision>-<workspace tag>"`."""
        if self.key is None:
            return f"{version}-unbound"
        with self.collab.lock:
            i = bisect.bisect_right(self._versions, version) - 1
            rev = self._revisions[max(i, 0)]
        return f"{rev}-{self.key.tag}"

    def version_of(self, revision: str) -> int:
        """The collab version a revision string names; STALE_WORKSPACE when it is from another opening."""
        if not isinstance(revision, str) or "-" not in revision:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"expectedRevision {revision!r} is not a revision from this server (like '{self.revision}')",
                data={"revision": self.revision},
            )
        number, _, tag = revision.partition("-")
        with self.collab.lock:
            known = (
                self.key is not None
                and tag == self.key.tag
                and number.isdigit()
                and self._revisions[0] <= int(number) <= self.key.workspace.revision
            )
            if known:
                i = bisect.bisect_right(self._revisions, int(number)) - 1
                return self._versions[i]
        raise BridgeError(
            ErrorCode.STALE_WORKSPACE,
            f"revision {revision} is not a revision of the document as it is open now (current: {self.revision})",
            data={"revision": self.revision},
        )

    @property
    def dirty(self) -> bool:
        """Unsaved changes: the engine's per-key saved state (`Workspace.key_dirty`)."""
        key = self.key
        if key is None:
            return False
        with key.engine.lock:
            return key.workspace.key_dirty(key.key)

    @property
    def identity(self) -> FileIdentity | None:
        """The identity of the document's file as last read or written: the engine's one record."""
        key = self.key
        if key is None:
            return None
        with key.engine.lock:
            return key.workspace.key_identity(key.key)

    @property
    def name(self) -> str:
        return self.path.name if self.path else f"untitled-{self.doc_id}.md"

    def file_bytes(self) -> bytes:
        return encode_text(self.collab.text, self.encoding, self.newline, self.bom)

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
