"""Editing a markdown document: the browser's collab push/pull, its selection, and AI edits rebased over the
person's typing (one reason to change: how two writers change one text without losing a character).

Part of `MarkdownService` (service.py). The collab authority (collab.py) keeps the document's update log;
an AI edit computed at an older version is mapped through every update since, or refused when one touched it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.policy import ApprovalText
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.approvals import Approvals, edits_diff
from deskbridge.kinds.markdown.callers import UI, is_ai
from deskbridge.kinds.markdown.collab import Edit, map_position, map_range
from deskbridge.kinds.markdown.document import MarkdownDocument
from deskbridge.kinds.markdown.edits import (
    REFINE_MIN_CHARS,
    Range,
    check_expected_text,
    context_around,
    refine_edits,
)


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


class Editing:
    """Changes to a document's text; the service's state is set up by `MarkdownService.__init__`."""

    approvals: Approvals

    if TYPE_CHECKING:  # provided by the other parts of MarkdownService

        def get(self, doc_id: str | None = None) -> MarkdownDocument: ...

        def describe(self, doc: MarkdownDocument) -> dict[str, Any]: ...

        def publish(self, topic: str, data: dict[str, Any]) -> None: ...

        def _target(self, doc: MarkdownDocument) -> str: ...

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

    async def apply_edits(
        self,
        doc_id: str | None,
        edits: list[Edit],
        *,
        ctx: CallContext = UI,
        tool: str = "edit",
        base_version: int,
        summary: str = "",
        ask: bool = True,
    ) -> dict[str, Any]:
        """Apply code-point edits computed against the text at `base_version` (ascending, non-overlapping).

        Edits are rebased over every update accepted since `base_version` (the person keeps typing while an
        approval is open); if any of those touched an edited range the edit is refused with STALE_WORKSPACE,
        so neither side loses a character. AI callers are asked for approval with the unified diff — here when
        `ask` (a change only known inside the handler: an editor command), else already by `App.invoke` from
        the tool's declared operation (`ToolSpec.operation`, `approval_summary`: edit_tools.py).
        """
        doc = self.get(doc_id)
        edits, seen_version = self.prepare_edits(doc, edits, base_version, ai=is_ai(ctx))
        if not edits:
            # a no-op (a patch that replaces text with itself, a command with nothing to do) asks nothing
            return {
                **self.describe(doc),
                "previousLength": doc.collab.length,
                "currentLength": doc.collab.length,
                "changes": [],
                "unchanged": True,
            }
        if ask and is_ai(ctx) and self.approvals.needed("edit"):
            diff = self._diff(doc, doc.text, edits)
            await self.approvals.ask(ctx, "edit", tool, self._target(doc), summary or tool, diff)
        # the person may have typed while deciding (here or in App.invoke): rebase over what arrived meanwhile
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

    def prepare_edits(
        self, doc: MarkdownDocument, edits: list[Edit], base_version: int, *, ai: bool
    ) -> tuple[list[Edit], int]:
        """Edits computed at `base_version` as they apply to the current text, and that text's version: rebased
        over every update since (refused when one touched an edited range), big AI replacements refined to what
        differs, and nothing at all for a no-op (text replaced by itself)."""
        with doc.collab.lock:  # the edits and the version they apply to belong together
            edits = self._rebase(doc, edits, base_version)
            version = doc.version
            if ai and any(e.end - e.start >= REFINE_MIN_CHARS and e.insert for e in edits):
                # unchanged lines inside a big replacement stay retained: the person's typing there keeps its place
                edits = refine_edits(doc.text, edits)
            text_now = (
                doc.text if edits and sum(e.end - e.start + len(e.insert) for e in edits) < 1 << 20 else None
            )
            if text_now is not None and all(text_now[e.start : e.end] == e.insert for e in edits):
                edits = []  # replacing text with itself changes nothing
        return edits, version

    def edit_approval(self, doc: MarkdownDocument, edits: list[Edit], summary: str) -> ApprovalText:
        """What the person is asked about an AI edit (prepared with `prepare_edits`): the summary, the document
        and the unified diff of exactly the change that will be applied."""
        return ApprovalText(summary=summary, target=self._target(doc), diff=self._diff(doc, doc.text, edits))

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

    # --- the edit rules the md_* tools share ------------------------------------------------------------

    def require_current(self, doc_id: str | None, revision: str) -> MarkdownDocument:
        """The document, if `revision` is its current one; STALE_WORKSPACE otherwise."""
        doc = self.get(doc_id)
        if doc.version_of(revision) != doc.version:
            raise BridgeError(
                ErrorCode.STALE_WORKSPACE,
                f"the document changed since revision {revision} (now {doc.revision}); read it again",
                data={"revision": doc.revision},
            )
        return doc

    @staticmethod
    def whole_text_edits(old: str, new: str) -> list[Edit]:
        """Replacing `old` by `new` as one edit over the part that differs only (so the person's cursor and
        undo history stay useful); none when they are equal. Line breaks of `new` are normalised to '\\n'."""
        new = new.replace("\r\n", "\n").replace("\r", "\n")
        if old == new:
            return []
        prefix = 0
        limit = min(len(old), len(new))
        while prefix < limit and old[prefix] == new[prefix]:
            prefix += 1
        suffix = 0
        while suffix < limit - prefix and old[len(old) - 1 - suffix] == new[len(new) - 1 - suffix]:
            suffix += 1
        return [Edit(prefix, len(old) - suffix, new[prefix : len(new) - suffix])]

    def range_now(self, doc: MarkdownDocument, base: int, start: int, end: int, expected_text: str) -> Range:
        """Where the range [start, end) of the text at version `base` is now.

        Refused (STALE_WORKSPACE, with the text there now) when a later update touched it; the text inside an
        untouched range is the text it had at `base`, which must be `expected_text`."""
        if end - start != len(expected_text):
            raise BridgeError(
                ErrorCode.EXPECTED_TEXT_MISMATCH,
                f"the range has {end - start} code points but expectedText has {len(expected_text)}",
            )
        mapped: tuple[int, int] | None = (start, end)
        for edits in doc.collab.edits_since(base):
            mapped = map_range(mapped[0], mapped[1], edits)
            if mapped is None:
                raise self._stale(
                    doc,
                    min(start, len(doc.text)),
                    min(end, len(doc.text)),
                    "the text at this range changed since your revision",
                )
        rng = Range(*mapped)
        check_expected_text(doc.text, rng, expected_text)
        return rng

    def insertion_point(
        self,
        doc: MarkdownDocument,
        revision: str,
        *,
        offset: int | None,
        line: int | None,
        column: int | None,
    ) -> tuple[int, int]:
        """`(offset, version it is an offset of)` for an insertion: at a code-point offset of the text at
        `revision`, at a line/column of the current text, or at the person's cursor."""
        base = doc.version_of(revision)
        if offset is not None:
            length_then = len(doc.text) - sum(
                len(e.insert) - (e.end - e.start) for edits in doc.collab.edits_since(base) for e in edits
            )
            if offset > length_then:
                raise BridgeError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"offset {offset} is past the end of the document at that revision ({length_then})",
                )
            return offset, base
        if line is not None:
            self.require_current(doc.doc_id, revision)
            return doc.collab.offsets.line_col_to_cp(line, column or 1), doc.version
        sel = doc.current_selection()
        if sel is None:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                "no offset given and the editor has not reported a cursor; pass offset or line",
            )
        return sel[0], doc.version
