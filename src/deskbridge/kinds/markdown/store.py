"""The markdown kind's `core.lifecycle.Store`: a folder (or one file's folder) is one engine workspace whose keys
are the open documents (their `docId`s), each saved to its own file by the core lifecycle.

What is the core's and what is ours:

* the core (`core.engine` / `core.lifecycle`) decides *when* and *whether*: per-key admission (two documents
  save side by side, one document once), the draft barrier, `SOURCE_CHANGED` / `TARGET_EXISTS` /
  `TARGET_CHANGED` with the content-aware identity check, the atomic write, the revision, the saved state
  and the one identity record per key (`Workspace.key_identities`);
* this module says *how*: where a document's file is (`key_path`), the value to write taken right after
  the barrier (`snapshot_key`: the collab text, after every editor got its typing in), its bytes in the
  file's own encoding, line endings (each line's own in a file of mixed endings) and BOM (`serialize_key`),
  and where a saved-as document lives now.

Keys are document ids rather than relative paths: a document may be untitled (no path yet), outside the
folder (opened with the person's approval) or saved as another file — its id stays, its file changes.
The text itself stays in the document's collab authority (collab.py: OT rebasing needs its update log);
every accepted update is noted in the engine (`Engine.note_changed`) under the collab lock, so a revision
the tools report always names exactly one collab version of the document (`MarkdownDocument.revision_at`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.workspace import Workspace
from deskbridge.kinds.markdown.document import DocumentKey, MarkdownDocument, encode_text
from deskbridge.kinds.markdown.line_endings import MixedEndings, with_endings

Snapshot = tuple[str, int, str, str, bool, MixedEndings | None]
"""What `snapshot_key` takes of a document: text, version, encoding, majority line ending, BOM, mixed endings."""

if TYPE_CHECKING:
    from deskbridge.kinds.markdown.documents import Documents


class DocumentSource:
    """The engine `Source` over the open documents: key = docId, value = the document (its text lives in its
    collab log, read with `collab.snapshot()`; the engine never copies it)."""

    def __init__(self, docs: dict[str, MarkdownDocument]) -> None:
        self._docs = docs

    def get(self, key: str) -> MarkdownDocument:
        return self._docs[key]

    def all_keys(self) -> Iterable[str]:
        return list(self._docs)


class MarkdownStore:
    """See the module docstring; `service` is the `MarkdownService` whose documents are the keys."""

    def __init__(self, service: Documents) -> None:
        self.service = service
        self._endings_written: dict[str, tuple[MixedEndings, MixedEndings]] = {}
        """Per document: the line endings it had and those its last serialised text has, until written."""

    def load(self, path: Path | None) -> DocumentSource:
        return DocumentSource(self.service.docs)

    def serialize(self, workspace: Workspace, out: BinaryIO) -> None:
        raise NotImplementedError("a markdown workspace is saved one document at a time (save(keys=[docId]))")

    def key_path(self, workspace: Workspace, key: str) -> Path | None:
        return self._doc(key).path

    def _doc(self, key: str) -> MarkdownDocument:
        doc = self.service.docs.get(key)
        if doc is None:  # closed meanwhile
            raise BridgeError(ErrorCode.NOT_FOUND, f"document {key!r} is no longer open")
        return doc

    def barrier_scope(self, workspace: Workspace, keys: Sequence[str]) -> dict[str, Any]:
        # The editor compares `docId` with the document it shows and flushes its typing only then.
        doc = self._doc(keys[0])
        return {"docId": doc.doc_id, "docRevision": doc.revision}

    def snapshot_key(self, workspace: Workspace, key: str) -> Snapshot:
        """After the barrier: the text to save (every editor has pushed its typing by now) and its version."""
        doc = self._doc(key)
        text, version = doc.collab.snapshot()
        return text, version, doc.encoding, doc.newline, doc.bom, doc.mixed_endings

    def serialize_key(self, workspace: Workspace, key: str, out: BinaryIO, snapshot: Snapshot) -> None:
        text, _version, encoding, newline, bom, mixed = snapshot
        if mixed is not None:
            text, written = with_endings(text, mixed, newline)
            newline = "\n"  # every line carries its own ending now
            self._endings_written[key] = (mixed, written)  # they describe the file once `key_written` says so
        out.write(encode_text(text, encoding, newline, bom))

    def key_written(self, workspace: Workspace, key: str) -> None:
        """The file now holds what `serialize_key` wrote: the next save matches its lines against these endings
        (a failed write left the old file, which the old endings still describe)."""
        endings = self._endings_written.pop(key, None)
        doc = self.service.docs.get(key)
        # (a document reloaded meanwhile has endings of its own, read from the file)
        if endings is not None and doc is not None and doc.mixed_endings is endings[0]:
            doc.mixed_endings = endings[1]

    def find_key(self, workspace: Workspace, path: Path) -> str | None:
        """The open document whose file is `path` (one document per file)."""
        doc = self.service.find_open(path)
        return None if doc is None else doc.doc_id

    def load_key(
        self, workspace: Workspace, path: Path | None, encoding: str | None = None, text: str = ""
    ) -> MarkdownDocument:
        """Read one document (in a worker thread for an open; `Lifecycle.open_key` checks the file's
        identity around it); no path: a new untitled document with `text`."""
        if path is None:
            return MarkdownDocument.new("", text)
        return MarkdownDocument.read("", path, encoding)

    def add_key(self, workspace: Workspace, key: str, doc: MarkdownDocument, revision: int) -> None:
        """The loaded document is open as `key` (under `Engine.lock`; the core records revision and identity)."""
        self.service.check_room()
        doc.doc_id = key
        self.service.docs[key] = doc
        doc.bind(DocumentKey(self.service.engine, workspace, key), revision)

    def close_key(self, workspace: Workspace, key: str) -> None:
        """The document is no longer open (called under `Engine.lock`)."""
        doc = self.service.docs.pop(key)
        doc.collab.on_update = None
        self._endings_written.pop(key, None)  # a failed save's endings, never written

    def rebind_key(self, workspace: Workspace, key: str, path: Path) -> None:
        """After a save-as: the document lives in the new file (later saves go there)."""
        self._doc(key).path = path
