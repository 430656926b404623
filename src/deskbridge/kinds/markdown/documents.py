"""The open documents of a markdown workspace and their files: open, current, describe, save, save-as, close,
external changes (one reason to change: what a document is on disk and how it gets there and back).

Part of `MarkdownService` (service.py), which combines it with editing (editing.py) and derived views
(views.py); all three share the service's state. The folder is one `core.engine` workspace whose keys are the
open documents (store.py): saving and saving-as a document are the core lifecycle's per-key save and save-as
(admission, draft barrier, identity checks, atomic write, saved state), reading runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from deskbridge.core import files
from deskbridge.core.engine import Engine
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.files import FileIdentity
from deskbridge.core.lifecycle import DirtyPolicy, DraftBarrier
from deskbridge.core.paths import OUTSIDE_ROOTS
from deskbridge.core.policy import LAST_APPROVAL, ApprovalText
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown import diskio
from deskbridge.kinds.markdown.approvals import Approvals, unified_diff
from deskbridge.kinds.markdown.callers import UI, is_ai
from deskbridge.kinds.markdown.collab import Edit
from deskbridge.kinds.markdown.document import DocumentKey, MarkdownDocument, check_encoding
from deskbridge.kinds.markdown.outline import Heading
from deskbridge.kinds.markdown.render import PreviewRenderer
from deskbridge.kinds.markdown.scope import Workspace

log = logging.getLogger(__name__)

OPEN_DOCUMENTS_MAX = 64
"""Documents open at once; opening more asks to close one first."""

OVERWRITE_DIFF_READ_MAX = 2 * 1024 * 1024
"""Bytes of a save-as target read, on the event loop, to show the person what overwriting it loses."""

SHOWN_TARGET: contextvars.ContextVar[tuple[Path, tuple[int, int, int, int]] | None] = contextvars.ContextVar(
    "md_shown_target", default=None
)
"""The save-as target as the approval question showed it (path, stat), for the rest of the same tool call."""


def approved_this_call() -> bool:
    """The person approved the current tool call (`App.invoke` asked centrally; `LAST_APPROVAL` is per call)."""
    result = LAST_APPROVAL.get()
    return result is not None and result.approved


class Documents:
    """Opening, saving and closing documents; the service's state is set up by `MarkdownService.__init__`."""

    workspace: Workspace
    docs: dict[str, MarkdownDocument]
    current_id: str | None
    approvals: Approvals
    drafts: DraftBarrier
    engine: Engine
    _ids: itertools.count[int]
    _renderers: dict[str, PreviewRenderer]
    _preview_cache: dict[str, tuple[int, str]]
    _outline_cache: dict[str, tuple[int, list[Heading]]]

    if TYPE_CHECKING:  # provided by the other parts of MarkdownService

        def publish(self, topic: str, data: dict[str, Any]) -> None: ...

    def _new_id(self) -> str:
        return f"d{next(self._ids)}"

    def get(self, doc_id: str | None = None) -> MarkdownDocument:
        """The open document `doc_id`, or the current one when None."""
        key = doc_id or self.current_id
        if key is None:
            raise BridgeError(
                ErrorCode.NO_WORKSPACE,
                "no document is open",
                hint="Open a document first (md_open_document).",
            )
        doc = self.docs.get(key)
        if doc is None:
            raise BridgeError(
                ErrorCode.NOT_FOUND,
                f"no open document has id '{key}'",
                data={"openDocuments": sorted(self.docs)},
            )
        return doc

    def find_open(self, path: Path) -> MarkdownDocument | None:
        for doc in self.docs.values():
            if doc.path == path:
                return doc
        return None

    def open_path(
        self, path: Path, *, encoding: str | None = None, make_current: bool = True
    ) -> MarkdownDocument:
        """Open (or return the already open) document at a resolved path, reading it on this thread (the
        folder's start-up); no scope or approval checks. The core's per-key open (`Lifecycle.open_key_now`)."""
        existing = self.find_open(path)
        if existing is None:
            self.check_room()
        info = self.engine.open_key_now(
            path, key=self._new_id(), workspace_id=self._engine_ws_id(), options={"encoding": encoding}
        )
        return self._opened(info, make_current=make_current)

    def check_room(self) -> None:
        """LIMIT_EXCEEDED when no further document may be open (checked again as the key is added)."""
        if len(self.docs) >= OPEN_DOCUMENTS_MAX:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"{OPEN_DOCUMENTS_MAX} documents are open; close one before opening another",
                "Close a document (md_close_document), then open this one.",
            )

    def _engine_ws_id(self) -> str:
        ws = self.engine.workspace
        assert ws is not None, "the markdown engine workspace is opened when the service is created"
        return ws.id

    def _opened(self, info: dict[str, Any], *, make_current: bool = True) -> MarkdownDocument:
        """After the core's per-key open: announce a newly opened document and make it current."""
        doc = self.docs[info["key"]]
        if info["opened"]:
            self.publish("doc", {"type": "opened", **self.describe(doc)})
        if make_current or self.current_id is None:
            self.set_current(doc.doc_id)
        return doc

    def new_document(self, text: str = "") -> MarkdownDocument:
        """An untitled document (saved later with save-as): a key without a file."""
        self.check_room()
        info = self.engine.open_key_now(
            None, key=self._new_id(), workspace_id=self._engine_ws_id(), options={"text": text}
        )
        return self._opened(info)

    def _key(self, doc: MarkdownDocument) -> DocumentKey:
        assert doc.key is not None
        return doc.key

    def set_current(self, doc_id: str) -> None:
        """The document the person is looking at (MCP tools without a docId act on it)."""
        self.get(doc_id)
        if self.current_id != doc_id:
            self.current_id = doc_id
            self.publish("doc", {"type": "current", "docId": doc_id})

    def describe(self, doc: MarkdownDocument) -> dict[str, Any]:
        """Metadata without the text: id, path, name, version, revision, dirty, external change."""
        return {
            "docId": doc.doc_id,
            "path": self.workspace.relative(doc.path) if doc.path else None,
            "absolutePath": str(doc.path) if doc.path else None,
            "fileName": doc.name,
            "version": doc.version,
            "revision": doc.revision,
            "dirty": doc.dirty,
            "encoding": doc.encoding,
            "current": doc.doc_id == self.current_id,
            "externalChange": doc.external_change is not None,
            "externalDeleted": bool(doc.external_change and doc.external_change.get("deleted")),
        }

    def list_open(self) -> list[dict[str, Any]]:
        return [self.describe(d) for d in self.docs.values()]

    def read(self, doc_id: str | None = None) -> dict[str, Any]:
        """Text plus metadata, taken at one version (the web API's document shape)."""
        doc = self.get(doc_id)
        text, version = doc.collab.snapshot()
        return {**self.describe(doc), "text": text, "version": version, "revision": doc.revision_at(version)}

    def outside_target(self, raw_path: str) -> Path | None:
        """None when `raw_path` is an openable document inside the scope; the error's reason otherwise is
        raised, except for a path outside the scope, for which its text is returned (`Path(raw_path)`), so an
        approval can be asked before anything out there is looked at. A malformed path ('..', device, UNC)
        is refused outright, never asked about."""
        try:
            self.workspace.resolve(raw_path, must_exist=True, check_scope=True)
            return None
        except BridgeError as exc:
            outside = exc.data.get("reason") == OUTSIDE_ROOTS or "scope" in exc.data
            if exc.code is not ErrorCode.ACCESS_DENIED or "UNC" in exc.message or not outside:
                raise
            return Path(raw_path)

    def open_outside_question(self, raw_path: str) -> str | None:
        """The approval question of opening `raw_path` (`md_open_document`'s `approval_summary`): None inside
        the scope (nothing to ask), the question outside it; a path that cannot be opened raises unasked."""
        if self.outside_target(raw_path) is None:
            return None
        return f"open {raw_path!r}, which is outside the workspace ({self.workspace.scope_description()})"

    async def open(
        self, raw_path: str, *, encoding: str | None = None, ctx: CallContext = UI, tool: str = "open"
    ) -> dict[str, Any]:
        """Open a document by path. For an AI caller a path outside the scope needs the person's approval of
        this call, asked centrally by `App.invoke` before the handler runs (`ToolSpec.operation`
        "open_outside"): asked before looking, so whether something exists out there, what it is and where a
        link leads stay unknown to the caller until the person allowed it (the same answer either way)."""
        if self.outside_target(raw_path) is None:
            target = self.workspace.resolve(raw_path, must_exist=True, check_scope=True)
        else:
            if is_ai(ctx) and not approved_this_call():
                # approval switched off (or not asked) must not widen the scope silently
                self.workspace.resolve(raw_path, must_exist=True, check_scope=True)
            target = self.workspace.resolve(raw_path, must_exist=True, check_scope=False)
        if encoding is not None:
            encoding = check_encoding(encoding)  # refused before anything is read, open or not
        already = self.find_open(target)
        if already is None:
            self.check_room()
        elif encoding is not None and encoding != already.encoding and already.dirty:
            # Reading it again in another encoding would replace the unsaved text; the open one would
            # otherwise come back unchanged, as if the file were in the encoding that was asked for.
            raise BridgeError(
                ErrorCode.UNSAVED_CHANGES,
                f"'{already.name}' is open as {already.encoding} with unsaved changes; it was not read "
                f"again as {encoding}",
                hint="Save or close it first (md_save_current_document, or ask the person), then call "
                "md_open_document with this encodingName again.",
                data={"docId": already.doc_id, "encoding": already.encoding},
            )
        # The core's per-key open: admitted per document (NOT_READY while this file's document is being
        # saved or closed), read and hashed in a worker thread, its identity recorded once by the engine.
        info = await self.engine.open_key(
            target,
            key=self._new_id(),
            workspace_id=self._engine_ws_id(),
            options={"encoding": encoding},
            caller=ctx.caller,
        )
        doc = self._opened(info)
        if not info["opened"] and encoding is not None and encoding != doc.encoding and not doc.dirty:
            # Open already in another encoding (a wrong guess read it as mojibake): read the file again in
            # the one asked for, which is refused, changing nothing, when the bytes are not valid in it.
            await self.reload_from_disk(doc.doc_id, encoding=encoding)
            return self.describe(doc)
        change = doc.external_change
        if not info["opened"] and change is not None and not change.get("deleted") and not doc.dirty:
            # Opening it again asks for the file, and nothing here is unsaved: take the file's new text. Without
            # this an agent with no editor open (stdio) kept reading the old text and every save was refused,
            # with no way out (the reload/keep choice is the person's, for a document with unsaved changes).
            await self.reload_from_disk(doc.doc_id)
        return self.describe(doc)

    async def save(
        self, doc_id: str | None = None, *, ctx: CallContext = UI, tool: str = "save"
    ) -> dict[str, Any]:
        """Write the document to its file (the core's per-key save: barrier, identity check, atomic write);
        SOURCE_CHANGED when another program changed the file's content meanwhile."""
        doc = self.get(doc_id)
        if doc.path is None:
            raise BridgeError(
                ErrorCode.SAVE_AS_REQUIRED,
                f"'{doc.name}' has never been saved",
                hint="Use save-as with a path inside the workspace.",
            )
        key = self._key(doc)
        try:
            out = await self.engine.save(workspace_id=key.workspace.id, keys=[key.key], caller=ctx.caller)
        except BridgeError as exc:
            if exc.code is not ErrorCode.SOURCE_CHANGED:
                raise
            path = doc.path
            now = await asyncio.to_thread(diskio.identity_of, path)
            gone = now is None
            self._mark_external(doc, gone=gone)
            if gone:
                # Renamed or deleted: "changed" sent the person to a Reload that has nothing to read.
                hint = (
                    "The file is gone from disk (renamed or deleted): choose Keep mine in the editor's banner "
                    "to write the editor's text there again, or save it elsewhere with "
                    "md_save_current_document_as."
                )
            elif not is_ai(ctx):
                # The person's own save (Ctrl+S): tell them, not an agent, what to do.
                hint = (
                    "Choose Reload from disk or Keep my version in the bar above the editor, then save again."
                )
            elif doc.dirty:
                # The choice is the person's; without an editor open (stdio) nobody may make it, so the agent's
                # text also has a way out that overwrites nothing.
                hint = (
                    "Ask the person to reload or keep their text in the editor (the banner above it), "
                    "then call md_save_current_document again; or write this text to a new file with "
                    "md_save_current_document_as."
                )
            else:
                hint = (
                    f"Nothing here is unsaved: call md_open_document with path {self._target(doc)!r} to take "
                    "the file's new text, then make your change and call md_save_current_document again."
                )
            what = "renamed or deleted" if gone else "changed on disk"
            raise BridgeError(
                ErrorCode.SOURCE_CHANGED,
                f"'{doc.name}' was {what} by another program since it was opened; nothing was written",
                hint=hint,
                data={"docId": doc.doc_id, "path": str(path), "deleted": gone},
            ) from exc
        doc.external_change = None
        self.publish("doc", {"type": "saved", **self.describe(doc)})
        return {**self.describe(doc), "bytesWritten": out["identities"][key.key]["size"]}

    def save_as_target(self, doc_id: str | None, raw_path: str) -> tuple[MarkdownDocument, Path]:
        """The document and the resolved save-as target, refused when it is the document's own file or open."""
        doc = self.get(doc_id)
        target = self.workspace.resolve(raw_path, must_exist=False, check_scope=True)
        if doc.path is not None and target == doc.path:
            raise BridgeError(ErrorCode.SAME_AS_SOURCE, f"'{raw_path}' is the open file itself")
        if self.find_open(target) is not None:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS,
                f"'{raw_path}' is open as another document; close it first",
                hint="Pick another path for md_save_current_document_as; md_list_open_documents shows the open ones.",
            )
        return doc, target

    def overwrite_question(self, doc_id: str | None, raw_path: str, overwrite: bool) -> ApprovalText | None:
        """`md_save_current_document_as`'s approval question (`ToolSpec.operation` "overwrite"): None when
        nothing would be overwritten (no overwrite asked for, or no file there), else the unified diff from
        the file to the document.

        `App.invoke` calls it synchronously on the event loop, so the target is read with one bounded
        `read_regular_file` (`OVERWRITE_DIFF_READ_MAX`; a larger file is described by its size, without a
        diff). The file's stat around that read is left in `SHOWN_TARGET` for this call, so the save refuses
        a file that changed between the question and the write (`TARGET_CHANGED`)."""
        SHOWN_TARGET.set(None)
        if not overwrite:
            return None
        doc, target = self.save_as_target(doc_id, raw_path)
        name = self.workspace.relative(target)
        try:
            before = os.stat(target)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(before.st_mode):
            raise BridgeError(ErrorCode.INVALID_ARGUMENT, f"'{raw_path}' is not a regular file")
        diff = None
        if before.st_size <= OVERWRITE_DIFF_READ_MAX:
            raw = files.read_regular_file(target, max_bytes=OVERWRITE_DIFF_READ_MAX, shown_as=raw_path)
            diff = unified_diff(raw.decode("utf-8", "replace").replace("\r\n", "\n"), doc.text, target.name)
        after = os.stat(target)
        seen = (after.st_dev, after.st_ino, after.st_size, after.st_mtime_ns)
        if seen != (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns):
            raise BridgeError(
                ErrorCode.TARGET_CHANGED,
                f"'{raw_path}' is being written by another program",
                hint="Wait until it has finished, then call md_save_current_document_as again.",
            )
        SHOWN_TARGET.set((target, seen))
        summary = f"overwrite {target.name} with {doc.name}"
        if diff is None:
            summary += f" ({before.st_size} bytes: too large to show the changes)"
        return ApprovalText(summary, diff, name)

    async def save_as(
        self,
        doc_id: str | None,
        raw_path: str,
        *,
        overwrite: bool = False,
        ctx: CallContext = UI,
        tool: str = "save_as",
    ) -> dict[str, Any]:
        """Write the document to another file in scope, which becomes its file (the core's per-key save-as);
        an existing target needs `overwrite` (+ approval), and must still be the file seen then."""
        doc, target = self.save_as_target(doc_id, raw_path)
        existing = await asyncio.to_thread(diskio.identity_of, target)
        if existing is not None and not overwrite:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS,
                f"'{raw_path}' already exists",
                hint="Call md_save_current_document_as again with overwrite true (the person is asked first), "
                "or with another path.",
                data={"path": self.workspace.relative(target)},
            )
        shown = SHOWN_TARGET.get()
        # The person approved overwriting the file as `overwrite_question` read it; a file replaced or
        # written since then is not what they agreed to lose.
        if (
            existing is not None
            and is_ai(ctx)
            and shown is not None
            and shown[0] == target
            and shown[1] != (existing.device, existing.inode, existing.size, existing.mtime_ns)
        ):
            raise BridgeError(
                ErrorCode.TARGET_CHANGED,
                f"'{raw_path}' changed after the person was asked to overwrite it",
                hint="Call md_save_current_document_as again: the person is shown the file as it is now.",
                data={"path": self.workspace.relative(target)},
            )
        key = self._key(doc)
        out = await self.engine.save_key_as(
            key.key,
            target,
            workspace_id=key.workspace.id,
            overwrite=existing is not None,
            observed_identity=existing,
            caller=ctx.caller,
        )
        doc.external_change = None
        self.publish("doc", {"type": "saved", **self.describe(doc)})
        return {**self.describe(doc), "bytesWritten": out["identity"]["size"]}

    async def close(self, doc_id: str | None = None, *, discard: bool = False) -> dict[str, Any]:
        """Close a document (the core's per-key close: barrier, then dirty policy `reject` or `discard`);
        UNSAVED_CHANGES when it is dirty and `discard` is not given."""
        doc = self.get(doc_id)
        key = self._key(doc)
        try:
            await self.engine.close_key(
                key.key,
                workspace_id=key.workspace.id,
                dirty_policy=DirtyPolicy.DISCARD if discard else DirtyPolicy.REJECT,
            )
        except BridgeError as exc:
            if exc.code is not ErrorCode.UNSAVED_CHANGES:
                raise
            raise BridgeError(
                ErrorCode.UNSAVED_CHANGES,
                f"'{doc.name}' has unsaved changes",
                hint="Save it first, or close with discard true.",
                data={"docId": doc.doc_id},
            ) from exc
        for cache in (self._renderers, self._preview_cache, self._outline_cache):
            cache.pop(doc.doc_id, None)
        if self.current_id == doc.doc_id:
            self.current_id = next(iter(self.docs), None)
        self.publish("doc", {"type": "closed", "docId": doc.doc_id})
        return {"docId": doc.doc_id, "closed": True}

    def check_external_changes(self) -> list[str]:
        """Compare every open document with its file; mark and announce those changed on disk."""
        changed: list[str] = []
        for doc in list(self.docs.values()):
            if doc.path is None or doc.external_change is not None:
                continue
            known = doc.identity
            seen = diskio.outside_change(doc.path, known)
            if not seen.changed:
                if seen.identity is not known:
                    self._record_identity(doc, seen.identity)  # touched, same bytes: not a change
                continue
            self._mark_external(doc, gone=seen.gone)
            changed.append(doc.doc_id)
        return changed

    async def watch_disk(self, interval_s: float = 1.0) -> None:
        """Check open documents against their files every `interval_s` (one stat each; hashing only when the
        stat changed) and announce external changes. Run it as a task from the workspace's `start()`."""
        while True:
            try:
                self.check_external_changes()
            except Exception:  # a vanished folder or a permission error must not stop the watcher
                log.exception("markdown: checking files for external changes failed")
            await asyncio.sleep(interval_s)

    def _record_identity(
        self, doc: MarkdownDocument, identity: FileIdentity | None, *, saved_at: int | None = None
    ) -> None:
        """The document's file is `identity` now (the engine's one record); `saved_at`: and its content is
        the text at that engine revision (a reload), so the key is clean up to it."""
        key = self._key(doc)
        with self.engine.lock:
            if doc.doc_id not in self.docs:
                return
            key.workspace.key_identities[key.key] = identity
            if saved_at is not None:
                key.workspace.mark_keys_saved([key.key], saved_at)

    def _mark_external(self, doc: MarkdownDocument, *, gone: bool) -> None:
        doc.external_change = {"detectedAt": time.time(), "deleted": gone}
        self.publish(
            "doc",
            {"type": "external-change", "docId": doc.doc_id, "dirty": doc.dirty, "deleted": gone},
        )

    async def resolve_external(
        self, doc_id: str | None, action: str, *, ctx: CallContext = UI
    ) -> dict[str, Any]:
        """After another program changed the file: "reload" takes the file's text, "keep" keeps the editor's.

        The choice between two versions of a text belongs to the person (the editor's banner, caller `ui`):
        the tool is not offered to MCP clients (`ToolSpec.person_only`), and an AI caller reaching it another
        way is refused, so an agent never throws away the person's text or another program's write.
        """
        doc = self.get(doc_id)
        if action not in ("reload", "keep"):
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"action {action!r} is not one of: reload, keep",
                data={"allowed": ["reload", "keep"]},
            )
        if is_ai(ctx):
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"only the person can choose to {action} '{doc.name}' after an outside change",
                hint="Ask the person to choose Reload or Keep mine in the editor's banner; "
                "md_list_open_documents shows externalChange until they have.",
                data={"docId": doc.doc_id, "externalChange": doc.external_change is not None},
            )
        if action == "reload":
            return await self.reload_from_disk(doc.doc_id)
        return await self.keep_local(doc.doc_id)

    async def reload_from_disk(self, doc_id: str, *, encoding: str | None = None) -> dict[str, Any]:
        """Take the file's new content (the person chose "reload"): one update replacing the whole text.
        `encoding` reads it in another encoding than the document's, which it then has."""
        doc = self.get(doc_id)
        if doc.path is None:
            raise BridgeError(ErrorCode.SAVE_AS_REQUIRED, "this document has no file to reload from")
        # Reading, decoding and hashing the file happens in a worker thread (a 12 MB file takes a while).
        fresh, identity = await asyncio.to_thread(
            MarkdownDocument.load, doc.doc_id, doc.path, encoding or doc.encoding
        )
        with doc.collab.lock:  # the reload's update and the revision it is noted at belong together
            text = doc.text
            if fresh.text != text:
                doc.collab.apply("disk", [Edit(0, len(text), fresh.text)])
            revision = self._key(doc).workspace.revision
        if fresh.text != text:
            self._announce(doc, "disk")
        doc.newline, doc.bom, doc.encoding = fresh.newline, fresh.bom, fresh.encoding
        doc.mixed_endings = fresh.mixed_endings
        doc.external_change = None
        self._record_identity(doc, identity, saved_at=revision)
        self.publish("doc", {"type": "reloaded", **self.describe(doc)})
        return self.describe(doc)

    async def keep_local(self, doc_id: str) -> dict[str, Any]:
        """Keep the editor's text over the changed file (the person chose "keep"); the next save writes it."""
        doc = self.get(doc_id)
        if doc.path is not None:
            self._record_identity(doc, await asyncio.to_thread(diskio.identity_of, doc.path))
        doc.external_change = None
        self.publish("doc", {"type": "kept", **self.describe(doc)})
        return self.describe(doc)

    def _target(self, doc: MarkdownDocument) -> str:
        return self.workspace.relative(doc.path) if doc.path else doc.name

    def target_of(self, doc_id: str | None) -> str | None:
        """What a call on `doc_id` (None: the current document) acts on, for the audit; None when unknown."""
        try:
            return self._target(self.get(doc_id))
        except BridgeError:
            return doc_id
