"""The markdown kind's service: open documents, their collab state, edits, selection, drafts, save and close.

This is the single source of truth the web routes (md-ui's `web.py`), the MCP tools (`tools.py`, `ui_tools.py`)
and the CLI all call. Callers named `mcp:<client>` are AI clients: their edits, overwrites and opens outside
the workspace ask the person first (approvals.py) and every call is audited; the browser (`ui`) and the CLI act
for the person and are not asked.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from deskbridge import __version__
from deskbridge.core import files
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.lifecycle import run_uninterruptible
from deskbridge.core.paths import OUTSIDE_ROOTS
from deskbridge.core.policy import ApprovalRules
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown import diskio
from deskbridge.kinds.markdown.approvals import (
    Approvals,
    approval_rules,
    edits_diff,
    unified_diff,
)
from deskbridge.kinds.markdown.collab import Edit, map_position, map_range
from deskbridge.kinds.markdown.document import DOCUMENT_MAX_BYTES, MarkdownDocument, encode_text
from deskbridge.kinds.markdown.drafts import DraftTracker
from deskbridge.kinds.markdown.edits import REFINE_MIN_CHARS, context_around, refine_edits
from deskbridge.kinds.markdown.outline import Heading, outline
from deskbridge.kinds.markdown.render import PreviewRenderer
from deskbridge.kinds.markdown.scope import AccessScope, Workspace

log = logging.getLogger(__name__)

OPEN_DOCUMENTS_MAX = 64
"""Documents open at once; opening more asks to close one first."""


UI = CallContext(caller="ui", client_name="deskbridge web UI")
"""The person acting through the browser: never asked for approval, not audited as an AI operation."""


def is_ai(ctx: CallContext) -> bool:
    return ctx.caller.startswith("mcp:")


def _map_loosely(start: int, end: int, later: list[list[Edit]]) -> tuple[int, int]:
    """Where a range went through later updates, widened to cover text inserted into or over it (to show
    the person's and the AI's view of "the text there now" in a refusal)."""
    for edits in later:
        new_start = map_position(start, edits, assoc=-1)
        new_end = map_position(end, edits, assoc=1)
        if new_start is None:
            hit = next(e for e in edits if e.start < start < e.end)
            new_start = map_position(hit.start, edits, assoc=-1) or 0
        if new_end is None:
            hit = next(e for e in edits if e.start < end < e.end)
            new_end = (map_position(hit.start, edits, assoc=-1) or 0) + len(hit.insert)
        start, end = new_start, max(new_start, new_end)
    return start, end


class MarkdownService:
    """All open Markdown documents of one workspace (a document or a folder) and what may be done to them."""

    def __init__(
        self,
        root: Path,
        *,
        scope: AccessScope | str = AccessScope.CURRENT_FOLDER,
        custom_folder: Path | None = None,
        policy: Any | None = None,
        events: Any | None = None,
        audit: Any | None = None,
        approval_settings: ApprovalRules | Mapping[str, Any] | None = None,
    ) -> None:
        self.workspace = Workspace.create(Path(root), scope, custom_folder)
        self.events = events
        self.approvals = Approvals(policy, approval_rules(approval_settings))
        self.audit = audit
        """The core audit log (`App.invoke` records every tool call in it once); None outside a server."""
        self.drafts = DraftTracker(self.publish)
        self.docs: dict[str, MarkdownDocument] = {}
        self.current_id: str | None = None
        self._ids = itertools.count(1)
        self._write_lock = asyncio.Lock()
        self._render_lock = threading.Lock()
        self._renderers: dict[str, PreviewRenderer] = {}
        self._preview_cache: dict[str, tuple[int, str]] = {}
        self._outline_cache: dict[str, tuple[int, list[Heading]]] = {}
        self.ui_state: Any | None = None
        """Set by the md-ui side (`ui_state.py`) so status tools can report theme/layout."""
        if self.workspace.document is not None:
            self.open_path(self.workspace.document)

    # --- events ----------------------------------------------------------------------------------------

    def publish(self, topic: str, data: dict[str, Any]) -> None:
        """Send an event to the browser (SSE) through the core bus; sync or async buses both work."""
        if self.events is None:
            return
        fn = getattr(self.events, "publish", self.events)
        try:
            result = fn(topic, data)
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                task.add_done_callback(lambda t: t.exception())
        except Exception:  # an event that cannot be delivered must not fail the edit
            log.exception("markdown: publishing %s failed", topic)

    # --- documents -------------------------------------------------------------------------------------

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
        """Open (or return the already open) document at a resolved path; no scope or approval checks."""
        existing = self.find_open(path)
        if existing is not None:
            if make_current:
                self.set_current(existing.doc_id)
            return existing
        if len(self.docs) >= OPEN_DOCUMENTS_MAX:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"{OPEN_DOCUMENTS_MAX} documents are open; close one before opening another",
            )
        doc = self._adopt(MarkdownDocument.load("", path, encoding), make_current=make_current)
        return doc

    def _adopt(self, doc: MarkdownDocument, *, make_current: bool = True) -> MarkdownDocument:
        """Give a loaded document its id and make it one of the open ones."""
        if len(self.docs) >= OPEN_DOCUMENTS_MAX:
            raise BridgeError(
                ErrorCode.LIMIT_EXCEEDED,
                f"{OPEN_DOCUMENTS_MAX} documents are open; close one before opening another",
            )
        doc.doc_id = self._new_id()
        self.docs[doc.doc_id] = doc
        self.publish("doc", {"type": "opened", **self.describe(doc)})
        if make_current or self.current_id is None:
            self.set_current(doc.doc_id)
        return doc

    def new_document(self, text: str = "") -> MarkdownDocument:
        """An untitled document (saved later with save-as)."""
        doc = MarkdownDocument.new(self._new_id(), text)
        self.docs[doc.doc_id] = doc
        self.publish("doc", {"type": "opened", **self.describe(doc)})
        self.set_current(doc.doc_id)
        return doc

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
        }

    def list_open(self) -> list[dict[str, Any]]:
        return [self.describe(d) for d in self.docs.values()]

    def read(self, doc_id: str | None = None) -> dict[str, Any]:
        """Text plus metadata, taken at one version (the web API's document shape)."""
        doc = self.get(doc_id)
        text, version = doc.collab.snapshot()
        return {**self.describe(doc), "text": text, "version": version, "revision": f"{version}-{doc.epoch}"}

    # --- derived views (cached per document version) ------------------------------------------------

    def preview_html(self, doc_id: str | None = None) -> tuple[str, int]:
        """The preview HTML of the current text and the version it shows (only changed sections re-render).

        The web UI's preview route and `md_get_rendered_html` both use this, so there is one renderer and
        one cache per document."""
        doc = self.get(doc_id)
        with self._render_lock:  # the web UI renders from worker threads; one render at a time per service
            text, version, offsets = doc.collab.snapshot_with_offsets()
            cached = self._preview_cache.get(doc.doc_id)
            if cached is not None and cached[0] == version:
                return cached[1], version
            renderer = self._renderers.setdefault(doc.doc_id, PreviewRenderer())
            html = renderer.render(text, offsets.newline_positions)
            self._preview_cache[doc.doc_id] = (version, html)
            return html, version

    def outline(self, doc_id: str | None = None) -> tuple[list[Heading], int]:
        """The heading outline of the current text and its version (cached until the next update)."""
        doc = self.get(doc_id)
        text, version = doc.collab.snapshot()
        cached = self._outline_cache.get(doc.doc_id)
        if cached is not None and cached[0] == version:
            return cached[1], version
        heads = outline(text)
        self._outline_cache[doc.doc_id] = (version, heads)
        return heads, version

    # --- collab (browser) ------------------------------------------------------------------------------

    def push(self, doc_id: str, version: int, updates: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """A browser pushes its updates on top of `version`; `ok: False` means pull and rebase first."""
        doc = self.get(doc_id)
        if not doc.collab.push(version, updates):
            return {"ok": False, "version": doc.version}
        if updates:
            self._announce(doc, str(updates[-1].get("clientID")))
        return {"ok": True, "version": doc.version}

    async def pull(self, doc_id: str, version: int, timeout: float = 25.0) -> dict[str, Any]:
        doc = self.get(doc_id)
        found = await doc.collab.pull(version, timeout)
        return {"updates": [u.to_wire() for u in found], "version": version + len(found)}

    def _announce(self, doc: MarkdownDocument, client_id: str) -> None:
        self.publish(
            "doc",
            {
                "type": "update",
                "docId": doc.doc_id,
                "version": doc.version,
                "revision": doc.revision,
                "clientID": client_id,
                "dirty": doc.dirty,
            },
        )

    # --- selection and drafts (browser reports) -------------------------------------------------------

    def report_selection(self, doc_id: str, anchor: int, head: int, version: int | None = None) -> None:
        """The browser's selection in UTF-16 offsets of the document at `version` (default: current)."""
        doc = self.get(doc_id)
        _text, current = doc.collab.snapshot()
        om = doc.collab.offsets
        # Offsets of an older version are converted against the current text: exact for BMP-only text, and
        # the browser re-reports on every selection change anyway.
        a = om.utf16_to_cp(min(max(anchor, 0), om.length_utf16))
        h = om.utf16_to_cp(min(max(head, 0), om.length_utf16))
        doc.set_selection(a, h, current if version is None else min(version, current))

    def selection(self, doc_id: str | None = None) -> dict[str, Any]:
        doc = self.get(doc_id)
        sel = doc.current_selection()
        if sel is None:
            return {
                "docId": doc.doc_id,
                "text": "",
                "startOffset": 0,
                "length": 0,
                "reported": False,
                "revision": doc.revision,
            }
        start, end = sel
        om = doc.collab.offsets
        line, col = om.cp_to_line_col(start)
        return {
            "docId": doc.doc_id,
            "text": doc.text[start:end],
            "startOffset": start,
            "length": end - start,
            "line": line,
            "column": col,
            "reported": True,
            "revision": doc.revision,
        }

    def report_drafts(self, doc_id: str, client_id: str, pending: int) -> None:
        self.get(doc_id)
        self.drafts.report(doc_id, client_id, pending)

    # --- edits -----------------------------------------------------------------------------------------

    async def apply_edits(
        self,
        doc_id: str | None,
        edits: list[Edit],
        *,
        ctx: CallContext = UI,
        tool: str = "edit",
        base_version: int,
        summary: str = "",
    ) -> dict[str, Any]:
        """Apply code-point edits computed against the text at `base_version` (ascending, non-overlapping).

        Edits are rebased over every update accepted since `base_version` (the person keeps typing while an
        approval is open); if any of those touched an edited range the edit is refused with STALE_WORKSPACE,
        so neither side loses a character. AI callers are asked for approval with the unified diff.
        """
        doc = self.get(doc_id)
        edits = self._rebase(doc, edits, base_version)
        if is_ai(ctx) and any(e.end - e.start >= REFINE_MIN_CHARS and e.insert for e in edits):
            # unchanged lines inside a big replacement stay retained: the person's typing there keeps its place
            edits = refine_edits(doc.text, edits)
        text_now = (
            doc.text if edits and sum(e.end - e.start + len(e.insert) for e in edits) < 1 << 20 else None
        )
        if text_now is not None and all(text_now[e.start : e.end] == e.insert for e in edits):
            edits = []  # replacing text with itself changes nothing
        if not edits:
            # a no-op (a patch that replaces text with itself, a command with nothing to do) asks nothing
            return {
                **self.describe(doc),
                "previousLength": doc.collab.length,
                "currentLength": doc.collab.length,
                "changes": [],
                "unchanged": True,
            }
        if is_ai(ctx):
            seen_version = doc.version
            if self.approvals.needed("edit"):
                diff = self._diff(doc, doc.text, edits)
                await self.approvals.ask(ctx, "edit", tool, self._target(doc), summary or tool, diff)
            # the person may have typed while deciding: rebase again over what arrived meanwhile
            edits = self._rebase(doc, edits, seen_version)
        before_len = doc.collab.length
        client_id = ctx.caller if is_ai(ctx) else f"server:{ctx.caller}"
        update = doc.collab.apply(client_id, edits)
        self._announce(doc, update.client_id)
        result = {
            **self.describe(doc),
            "previousLength": before_len,
            "currentLength": doc.collab.length,
            "changes": [
                {"startOffset": e.start, "removedLength": e.end - e.start, "insertedLength": len(e.insert)}
                for e in edits[:20]
            ],
        }
        return result

    def _diff(self, doc: MarkdownDocument, text: str, edits: list[Edit]) -> str:
        return edits_diff(text, [(e.start, e.end, e.insert) for e in edits], doc.name)

    def _rebase(self, doc: MarkdownDocument, edits: list[Edit], base_version: int) -> list[Edit]:
        if base_version == doc.version:
            return edits
        later = doc.collab.edits_since(base_version)
        out = edits
        moved_all: list[list[Edit]] = []
        for update_edits in later:
            moved: list[Edit] = []
            for e in out:
                r = map_range(e.start, e.end, update_edits)
                if r is None:
                    start, end = _map_loosely(
                        e.start, e.end, doc.collab.edits_since(base_version)[len(moved_all) :]
                    )
                    raise self._stale(doc, start, end, "the text at this range changed since your revision")
                moved.append(Edit(r[0], r[1], e.insert))
            out = moved
            moved_all.append(update_edits)
        return out

    def _stale(self, doc: MarkdownDocument, start: int, end: int, why: str) -> BridgeError:
        return BridgeError(
            ErrorCode.STALE_WORKSPACE,
            f"{why}; read it again and retry with revision {doc.revision}",
            data={
                "revision": doc.revision,
                **context_around(doc.text, min(start, len(doc.text)), min(end, len(doc.text))),
            },
        )

    # --- save / save as / close / reload ---------------------------------------------------------------

    async def save(
        self, doc_id: str | None = None, *, ctx: CallContext = UI, tool: str = "save"
    ) -> dict[str, Any]:
        """Write the document to its file; SOURCE_CHANGED when another program changed the file meanwhile."""
        doc = self.get(doc_id)
        if doc.path is None:
            raise BridgeError(
                ErrorCode.SAVE_AS_REQUIRED,
                f"'{doc.name}' has never been saved",
                hint="Use save-as with a path inside the workspace.",
            )
        await self.drafts.barrier(doc.doc_id)
        async with self._write_lock:
            text, version = doc.collab.snapshot()
            path, known = doc.path, doc.identity
            encoding, newline, bom = doc.encoding, doc.newline, doc.bom

            def write() -> tuple[diskio.FileIdentity | None, int | None]:
                # Hashing and writing a 12 MB file takes a quarter of a second: in a worker thread, never on
                # the event loop, and seen through to the end even if the caller goes away (the saved state
                # must match what is on disk, as core.lifecycle does for every kind).
                on_disk = diskio.identity_of(path)
                if not diskio.same_content(on_disk, known):
                    return on_disk, None
                data = encode_text(text, encoding, newline, bom)
                identity = diskio.atomic_write(path, data, on_disk)
                doc.mark_saved(text, version, identity)
                return identity, len(data)

            on_disk, written = await run_uninterruptible(write)
            if written is None:
                self._mark_external(doc, on_disk)
                raise BridgeError(
                    ErrorCode.SOURCE_CHANGED,
                    f"'{doc.name}' was changed on disk by another program since it was opened; "
                    "nothing was written",
                    hint="Ask the person to reload or keep their text in the editor (the banner above it), "
                    "then call md_save_current_document again.",
                    data={"docId": doc.doc_id, "path": str(doc.path)},
                )
        self.publish("doc", {"type": "saved", **self.describe(doc)})
        return {**self.describe(doc), "bytesWritten": written}

    async def save_as(
        self,
        doc_id: str | None,
        raw_path: str,
        *,
        overwrite: bool = False,
        ctx: CallContext = UI,
        tool: str = "save_as",
    ) -> dict[str, Any]:
        """Write the document to another file in scope; an existing target needs `overwrite` (+ approval)."""
        doc = self.get(doc_id)
        target = self.workspace.resolve(raw_path, must_exist=False, check_scope=True)
        target_name = self.workspace.relative(target)
        if doc.path is not None and target == doc.path:
            raise BridgeError(ErrorCode.SAME_AS_SOURCE, f"'{raw_path}' is the open file itself")
        if self.find_open(target) is not None:
            raise BridgeError(
                ErrorCode.TARGET_EXISTS,
                f"'{raw_path}' is open as another document; close it first",
                hint="Pick another path for md_save_current_document_as; md_list_open_documents shows the open ones.",
            )
        await self.drafts.barrier(doc.doc_id)
        text, version = doc.collab.snapshot()
        encoding, newline, bom = doc.encoding, doc.newline, doc.bom
        existing = await asyncio.to_thread(diskio.identity_of, target)
        if existing is not None:
            if not overwrite:
                raise BridgeError(
                    ErrorCode.TARGET_EXISTS,
                    f"'{raw_path}' already exists",
                    hint="Call md_save_current_document_as again with overwrite true (the person is asked first), "
                    "or with another path.",
                    data={"path": target_name},
                )
            if is_ai(ctx) and self.approvals.needed("overwrite"):
                raw = await asyncio.to_thread(
                    files.read_regular_file, target, max_bytes=DOCUMENT_MAX_BYTES, shown_as=raw_path
                )
                old = raw.decode("utf-8", "replace").replace("\r\n", "\n")
                await self.approvals.ask(
                    ctx,
                    "overwrite",
                    tool,
                    target_name,
                    f"overwrite {target.name} with {doc.name}",
                    unified_diff(old, text, target.name),
                )

        def write() -> tuple[diskio.FileIdentity, int]:
            data = encode_text(text, encoding, newline, bom)
            if existing is not None:
                identity = diskio.atomic_write(target, data, existing, target_changed=True)
            else:
                identity = diskio.publish_new(target, data)
            doc.path = target
            doc.mark_saved(text, version, identity)
            return identity, len(data)

        async with self._write_lock:
            _identity, written = await run_uninterruptible(write)
        self.publish("doc", {"type": "saved", **self.describe(doc)})
        return {**self.describe(doc), "bytesWritten": written}

    async def open(
        self, raw_path: str, *, encoding: str | None = None, ctx: CallContext = UI, tool: str = "open"
    ) -> dict[str, Any]:
        """Open a document by path; for AI callers a path outside the scope asks the person first."""
        try:
            target = self.workspace.resolve(raw_path, must_exist=True, check_scope=True)
        except BridgeError as exc:
            outside = exc.data.get("reason") == OUTSIDE_ROOTS or "scope" in exc.data
            if exc.code is not ErrorCode.ACCESS_DENIED or "UNC" in exc.message or not outside:
                raise  # a malformed path ('..', device, UNC) is refused outright, never asked about
            if is_ai(ctx) and not self.approvals.needed("open_outside"):
                raise  # approval switched off must not widen the scope silently
            if is_ai(ctx):
                # Ask before looking: whether something exists out there, what it is and where a link leads
                # stay unknown to the caller until the person allowed it (the same answer either way).
                await self.approvals.ask(
                    ctx,
                    "open_outside",
                    tool,
                    raw_path,
                    f"open {raw_path!r}, which is outside the workspace ({self.workspace.scope_description()})",
                )
            target = self.workspace.resolve(raw_path, must_exist=True, check_scope=False)
        if self.find_open(target) is None:
            # Reading, decoding and hashing a large file happens in a worker thread; adopting it here.
            loaded = await asyncio.to_thread(MarkdownDocument.load, "", target, encoding)
            if self.find_open(target) is None:  # nobody opened it meanwhile
                self._adopt(loaded)
        doc = self.open_path(target, encoding=encoding)
        return self.describe(doc)

    async def close(self, doc_id: str | None = None, *, discard: bool = False) -> dict[str, Any]:
        """Close a document; UNSAVED_CHANGES when it is dirty and `discard` is not given."""
        doc = self.get(doc_id)
        await self.drafts.barrier(doc.doc_id)
        if doc.dirty and not discard:
            raise BridgeError(
                ErrorCode.UNSAVED_CHANGES,
                f"'{doc.name}' has unsaved changes",
                hint="Save it first, or close with discard true.",
            )
        del self.docs[doc.doc_id]
        self.drafts.forget(doc.doc_id)
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
            if diskio.quick_unchanged(doc.path, doc.identity):
                continue
            now = diskio.identity_of(doc.path)
            if diskio.same_content(now, doc.identity):
                doc.identity = now
                continue
            self._mark_external(doc, now)
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

    def _mark_external(self, doc: MarkdownDocument, now: diskio.FileIdentity | None) -> None:
        doc.external_change = {"detectedAt": time.time(), "deleted": now is None}
        self.publish(
            "doc",
            {"type": "external-change", "docId": doc.doc_id, "dirty": doc.dirty, "deleted": now is None},
        )

    def reload_from_disk(self, doc_id: str) -> dict[str, Any]:
        """Take the file's new content (the person chose "reload"): one update replacing the whole text."""
        doc = self.get(doc_id)
        if doc.path is None:
            raise BridgeError(ErrorCode.SAVE_AS_REQUIRED, "this document has no file to reload from")
        fresh = MarkdownDocument.load(doc.doc_id, doc.path, doc.encoding)
        text = doc.text
        if fresh.text != text:
            doc.collab.apply("disk", [Edit(0, len(text), fresh.text)])
            self._announce(doc, "disk")
        doc.newline, doc.bom = fresh.newline, fresh.bom
        doc.mark_saved(doc.text, doc.version, fresh.identity)
        self.publish("doc", {"type": "reloaded", **self.describe(doc)})
        return self.describe(doc)

    def keep_local(self, doc_id: str) -> dict[str, Any]:
        """Keep the editor's text over the changed file (the person chose "keep"); the next save writes it."""
        doc = self.get(doc_id)
        if doc.path is not None:
            doc.identity = diskio.identity_of(doc.path)
        doc.external_change = None
        self.publish("doc", {"type": "kept", **self.describe(doc)})
        return self.describe(doc)

    # --- audit ---------------------------------------------------------------------------------------

    def _target(self, doc: MarkdownDocument) -> str:
        return self.workspace.relative(doc.path) if doc.path else doc.name

    def target_of(self, doc_id: str | None) -> str | None:
        """What a call on `doc_id` (None: the current document) acts on, for the audit; None when unknown."""
        try:
            return self._target(self.get(doc_id))
        except BridgeError:
            return doc_id

    def status(self) -> dict[str, Any]:
        current = None
        if self.current_id in self.docs:
            current = self.describe(self.docs[self.current_id])
        ui = {}
        if self.ui_state is not None:
            snap = getattr(self.ui_state, "snapshot", None)
            ui = snap() if callable(snap) else {}
        return {
            "version": __version__,
            "workspace": str(self.workspace.root),
            "scope": self.workspace.scope.value,
            "openDocuments": len(self.docs),
            "currentFilePath": current["absolutePath"] if current else None,
            "isDirty": bool(current and current["dirty"]),
            "requireApproval": self.approvals.rules.enabled,
            **{k: ui[k] for k in ("theme", "typography", "cultureName") if k in ui},
        }
