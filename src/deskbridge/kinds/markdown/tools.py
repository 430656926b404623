"""The `md_*` document tools an MCP client uses on the open Markdown documents (seed §7, §16.2, issue #3).

What each tool is (name, title, description, argument models below); its handler lives in read_tools.py or
edit_tools.py and the rules it applies in the service (documents.py, editing.py, views.py). Offsets are Unicode code points of the current text (docs/markdown.md "Offsets"); every edit
carries `expectedRevision`, offset edits carry `expectedText`. The Vex names (`vex_get_current_document`,
`vex.get_current_document`) are accepted as aliases. `App.invoke` audits every call once (core audit).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final, Literal

from pydantic import Field, PrivateAttr, field_validator

from deskbridge.core import limits
from deskbridge.core.audit import set_audit_target
from deskbridge.core.tools import CallContext, NoArgs, ToolArgs, ToolSpec
from deskbridge.kinds.markdown import edit_tools, read_tools
from deskbridge.kinds.markdown.approvals import AUDIT_KEEP
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.views import HTML_MAX_BYTES

READ_MAX_BYTES: Final = 256 * 1024
"""Bytes of document text one read returns at most (well under the response cap); the rest is paginated."""

READ_DEFAULT_BYTES: Final = 30_000
"""Bytes of a page when the caller does not say: ≤ 10 k tokens for English or CJK text (issue 10)."""

HTML_DEFAULT_BYTES: Final = 30_000
"""Bytes of a rendered-HTML page when the caller does not say (whole top-level blocks; `nextCursor`)."""

REPLACE_MAX_CHARS: Final = limits.REQUEST_BODY_MAX_BYTES
"""Characters a whole-document replacement may have: the transport's request limit (core.limits), so the schema
never promises a call the server cannot take."""

_DOC_ID = Field(
    None,
    alias="docId",
    description="Document id (md_list_open_documents); default: the current one.",
)
_REVISION = Field(
    alias="expectedRevision",
    description="`revision` from your last read; STALE_WORKSPACE if the text changed since.",
)
_REASON = Field("", max_length=500, description="One line for the person approving the change.")


# --- argument models -------------------------------------------------------------------------------------


class DocArgs(ToolArgs):
    doc_id: str | None = _DOC_ID


class ReadDocumentArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    start_line: int = Field(1, alias="startLine", ge=1, description="First line to return (1-based).")
    start_column: int = Field(
        1,
        alias="startColumn",
        ge=1,
        description="Column of startLine to start at (1-based, code points); pass nextStartColumn when a page gave one.",
    )
    end_line: int | None = Field(
        None,
        alias="endLine",
        ge=1,
        description="Last line to return (inclusive); default: to the end, within maxBytes.",
    )
    max_bytes: int = Field(
        READ_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=READ_MAX_BYTES,
        description="Cap on returned text (UTF-8 bytes); the answer says `truncated` and `nextStartLine` (and `nextStartColumn` inside a very long line).",
    )


class OutlineArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    cursor: str | None = Field(None, description="nextCursor from the previous page of headings.")
    limit: int = Field(1000, ge=1, le=2000, description="Headings per page.")
    max_level: int = Field(6, alias="maxLevel", ge=1, le=6, description="Only headings up to this level.")


class ReadSectionArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    heading_path: str = Field(
        alias="headingPath",
        min_length=1,
        max_length=2000,
        description="Heading titles from outside in, separated by '>', e.g. 'Intro > Setup'. Outer levels may be left out when the rest is unique.",
    )
    max_bytes: int = Field(
        READ_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=READ_MAX_BYTES,
        description="Cap on returned text (UTF-8 bytes); go on with md_get_current_document from nextStartLine.",
    )


class HtmlArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    cursor: str | None = Field(None, description="nextCursor from the previous page of HTML.")
    max_bytes: int = Field(
        HTML_DEFAULT_BYTES,
        alias="maxBytes",
        ge=1024,
        le=HTML_MAX_BYTES,
        description="Cap on one page (UTF-8 bytes); pages end between top-level blocks.",
    )


class AuditArgs(ToolArgs):
    limit: int = Field(AUDIT_KEEP, ge=1, le=AUDIT_KEEP, description="How many records (newest first).")


class ListArgs(ToolArgs):
    cursor: str | None = Field(None, description="nextCursor from the previous page of files.")
    limit: int = Field(100, ge=1, le=1000, description="Files per page.")


class SearchArgs(ToolArgs):
    query: str = Field(
        min_length=1, max_length=500, description="Text to find (or a regular expression with regex true)."
    )
    regex: bool = Field(False, description="Treat query as a Python regular expression.")
    case_sensitive: bool = Field(False, alias="caseSensitive", description="Match case exactly.")
    whole_word: bool = Field(False, alias="wholeWord", description="Match whole words only.")
    cursor: str | None = Field(None, description="nextCursor from the previous page.")
    limit: int = Field(50, ge=1, le=500, description="Matches per page.")


class EditArgs(ToolArgs):
    """Arguments of an edit tool; `_plan` carries the edit its approval prepared to the handler (edit_tools.py)."""

    _plan: Any = PrivateAttr(default=None)

    @field_validator("*", mode="after")
    @classmethod
    def _lf_line_breaks(cls, value: Any) -> Any:
        # The document's text has '\n' line breaks only (its file's own come back on save): a '\r\n' an agent
        # sent stayed in the text and was written as '\r\r\n', and its oldText/expectedText never matched.
        if isinstance(value, str) and "\r" in value:
            return value.replace("\r\n", "\n").replace("\r", "\n")
        return value


class ReplaceDocumentArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    markdown: str = Field(max_length=REPLACE_MAX_CHARS, description="The complete new Markdown text.")
    expected_revision: str = _REVISION
    reason: str = _REASON


class TextEditArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    start_offset: int | None = Field(
        None, alias="startOffset", ge=0, description="Start, in Unicode code points of the current text."
    )
    length: int | None = Field(None, ge=0, description="Code points to replace from startOffset (default 0).")
    end_offset: int | None = Field(
        None, alias="endOffset", ge=0, description="Alternative to length: end offset (exclusive)."
    )
    start_line: int | None = Field(
        None, alias="startLine", ge=1, description="Alternative to offsets: 1-based line."
    )
    start_column: int | None = Field(
        None, alias="startColumn", ge=1, description="1-based column in code points (default 1)."
    )
    end_line: int | None = Field(None, alias="endLine", ge=1, description="With startLine: 1-based end line.")
    end_column: int | None = Field(
        None, alias="endColumn", ge=1, description="With endLine: end column in code points (exclusive)."
    )
    replacement: str = Field(max_length=REPLACE_MAX_CHARS, description="The new text for the range.")
    expected_text: str = Field(
        alias="expectedText",
        max_length=REPLACE_MAX_CHARS,
        description='The exact text now in the range ("" for a pure insertion); a mismatch is refused with the current text around it.',
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class InsertArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    text: str = Field(max_length=REPLACE_MAX_CHARS, description="Text to insert.")
    offset: int | None = Field(
        None,
        ge=0,
        description="Where, in code points; default: the person's cursor (start of their selection).",
    )
    line: int | None = Field(None, ge=1, description="Alternative to offset: 1-based line.")
    column: int | None = Field(
        None, ge=1, description="With line: 1-based column in code points (default 1)."
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class ReplaceSelectionArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    text: str = Field(max_length=REPLACE_MAX_CHARS, description="Replacement for the selected text.")
    expected_text: str | None = Field(
        None,
        alias="expectedText",
        description="The selected text you expect (from md_get_selection); refused if different.",
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class ReplaceTextArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    old_text: str = Field(
        alias="oldText",
        min_length=1,
        max_length=REPLACE_MAX_CHARS,
        description="Exact text to find (whitespace included).",
    )
    new_text: str = Field(alias="newText", max_length=REPLACE_MAX_CHARS, description="Replacement.")
    expected_occurrences: int = Field(
        1,
        alias="expectedOccurrences",
        ge=1,
        le=10_000,
        description="How many times oldText occurs; all are replaced, and a different count is refused.",
    )
    expected_revision: str = _REVISION
    reason: str = _REASON


class PatchSectionArgs(EditArgs):
    doc_id: str | None = _DOC_ID
    heading_path: str = Field(
        alias="headingPath",
        min_length=1,
        max_length=2000,
        description="E.g. 'Intro > Setup' (see md_get_document_outline).",
    )
    operation: Literal["replace", "append", "prepend"] = Field(
        description="replace the section's body (under the heading, subsections included), append at its end, or prepend right under the heading."
    )
    content: str = Field(max_length=REPLACE_MAX_CHARS, description="Markdown to put there.")
    expected_revision: str = _REVISION
    reason: str = _REASON


class OpenArgs(ToolArgs):
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="Path of a .md/.markdown/.mdown/.txt file, relative to the workspace folder or absolute.",
    )
    encoding_name: str | None = Field(
        None, alias="encodingName", description="Text encoding (default utf-8)."
    )


class SaveAsArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    path: str = Field(
        min_length=1,
        max_length=4096,
        description="New file path inside the workspace (.md/.markdown/.mdown/.txt).",
    )
    overwrite: bool = Field(False, description="Replace an existing file (asks the person, shows the diff).")


class ResolveExternalArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    action: Literal["reload", "keep"] = Field(
        description="reload: take the file's text; keep: keep the editor's (the next save writes it)."
    )


class ExportArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    format: Literal["HTML", "PDF", "PNG", "Word"] = Field(description="Export format.")
    file_name: str | None = Field(
        None,
        alias="fileName",
        max_length=255,
        description="File name in the document's folder; default: the document's name with the format's extension (a free name is chosen, nothing is overwritten).",
    )


class CopyRichHtmlArgs(ToolArgs):
    doc_id: str | None = _DOC_ID
    target: Literal["wechat", "zhihu", "juejin"] = Field(description="Platform the rich HTML is styled for.")


# --- helpers ---------------------------------------------------------------------------------------------


def _aliases(short: str) -> tuple[str, ...]:
    return (f"vex_{short}", f"vex.{short}")


# --- tools ----------------------------------------------------------------------------------------------


def markdown_tools(service: MarkdownService) -> list[ToolSpec]:
    """The document tools of the markdown kind (the md-ui engineer's `markdown_ui_tools` adds `md_ui_*`)."""

    def targeted(
        fn: Callable[[MarkdownService, CallContext, Any], Awaitable[dict[str, Any]]],
        target_of: Callable[[Any], str | None] | None = None,
    ) -> Callable[[CallContext, Any], Awaitable[dict[str, Any]]]:
        """The handler, naming the document it acted on for the call's one audit record (App.invoke)."""

        async def handler(ctx: CallContext, args: Any) -> dict[str, Any]:
            try:
                return await fn(service, ctx, args)
            finally:
                set_audit_target(
                    target_of(args) if target_of else service.target_of(getattr(args, "doc_id", None))
                )

        return handler

    def spec(
        name: str,
        title: str,
        description: str,
        args: type[ToolArgs],
        fn: Any,
        *,
        read_only: bool = False,
        destructive: bool = False,
        idempotent: bool = False,
        vex: str | None = None,
        target_of: Callable[[Any], str | None] | None = None,
        person_only: bool = False,
        operation: str | None = None,
        approval: Callable[[Any], Any] | None = None,
    ) -> ToolSpec:
        planner = getattr(fn, "planner", None)
        return ToolSpec(
            name,
            title,
            description,
            args,
            targeted(edit_tools.edit_handler(planner, name) if planner else fn, target_of),
            read_only=read_only,
            destructive=destructive,
            idempotent=idempotent or read_only,
            aliases=_aliases(vex) if vex else (),
            person_only=person_only,
            # approved centrally (App.invoke) from the declared operation: an edit with the diff its planner
            # prepared (a no-op asks nothing); opening outside, overwriting, export and copy with their question
            operation=operation or ("edit" if planner else None),
            approval_summary=approval or (edit_tools.edit_approval(service, planner) if planner else None),
        )

    specs = [
        spec(
            "md_get_current_document",
            "Read the current document",
            "The Markdown text (paginated by lines, capped in bytes) with docId, revision, dirty flag and "
            "encoding. Pass the revision back as expectedRevision when you edit.",
            ReadDocumentArgs,
            read_tools.get_current_document,
            read_only=True,
            vex="get_current_document",
        ),
        spec(
            "md_get_document_outline",
            "Outline of a document",
            "Headings with level, title, line, endLine and the heading path to use with md_read_section and "
            "md_patch_section; paginated (nextCursor), maxLevel filters.",
            OutlineArgs,
            read_tools.get_outline,
            read_only=True,
            vex="get_document_outline",
        ),
        spec(
            "md_read_section",
            "Read one section",
            "The text of the section under a heading path (heading line to the next heading of the same or "
            "higher level), with its line range.",
            ReadSectionArgs,
            read_tools.read_section,
            read_only=True,
        ),
        spec(
            "md_get_selection",
            "The person's selection",
            "The text the person has selected in the editor, its code-point offset and length.",
            DocArgs,
            read_tools.get_selection,
            read_only=True,
            vex="get_selection",
        ),
        spec(
            "md_list_open_documents",
            "List documents",
            "Open documents (docId, path, dirty, revision) and a page of the Markdown files in scope.",
            ListArgs,
            read_tools.list_open_documents,
            read_only=True,
            vex="list_open_documents",
        ),
        spec(
            "md_get_rendered_html",
            "Rendered HTML",
            "The document rendered to HTML by the same renderer as the preview (math as KaTeX-ready markup).",
            HtmlArgs,
            read_tools.get_rendered_html,
            read_only=True,
            vex="get_rendered_html",
        ),
        spec(
            "md_get_app_status",
            "Editor status",
            "Version, workspace, scope, current file and whether it is dirty, theme and typography.",
            NoArgs,
            read_tools.get_app_status,
            read_only=True,
            vex="get_app_status",
        ),
        spec(
            "md_get_operation_audit",
            "Recent MCP operations",
            "The last 100 markdown tool calls: time, client, tool, target, approval, outcome (never content).",
            AuditArgs,
            read_tools.get_operation_audit,
            read_only=True,
            vex="get_operation_audit",
        ),
        spec(
            "md_search",
            "Search the documents in scope",
            "Find text (or a regex) across the Markdown files in the access scope, open documents in their "
            "unsaved state; paginated with nextCursor.",
            SearchArgs,
            read_tools.search,
            read_only=True,
            target_of=lambda a: None,  # a search query is content: never in the audit
        ),
        spec(
            "md_replace_current_document",
            "Replace the whole document",
            "Replace the entire text (asks the person, with a diff). Prefer md_replace_text or md_patch_section "
            "for local changes.",
            ReplaceDocumentArgs,
            edit_tools.EditTool(edit_tools.plan_replace_document),
            destructive=True,
            vex="replace_current_document",
        ),
        spec(
            "md_apply_text_edit",
            "Edit a range",
            "Replace the text in a range given by code-point offsets (startOffset + length/endOffset) or "
            "line/column; expectedText must equal the current text there.",
            TextEditArgs,
            edit_tools.EditTool(edit_tools.plan_text_edit),
            destructive=True,
            vex="apply_text_edit",
        ),
        spec(
            "md_insert_text",
            "Insert text",
            "Insert at a code-point offset, a line/column, or the person's cursor.",
            InsertArgs,
            edit_tools.EditTool(edit_tools.plan_insert_text),
            vex="insert_text",
        ),
        spec(
            "md_replace_selection",
            "Replace the selection",
            "Replace the text the person has selected (optionally checking it is expectedText).",
            ReplaceSelectionArgs,
            edit_tools.EditTool(edit_tools.plan_replace_selection),
            destructive=True,
            vex="replace_selection",
        ),
        spec(
            "md_replace_text",
            "Replace exact text",
            "Replace every occurrence of oldText (exact, whitespace included) with newText when it occurs "
            "exactly expectedOccurrences times; otherwise says how often it occurs or where the nearest "
            "near-miss is.",
            ReplaceTextArgs,
            edit_tools.EditTool(edit_tools.plan_replace_text),
            destructive=True,
        ),
        spec(
            "md_patch_section",
            "Patch a section",
            "Replace, append to, or prepend to the section under a heading path such as 'Intro > Setup'.",
            PatchSectionArgs,
            edit_tools.EditTool(edit_tools.plan_patch_section),
            destructive=True,
        ),
        spec(
            "md_open_document",
            "Open a document",
            "Open a .md/.markdown/.mdown/.txt file in the access scope (outside it: asks the person).",
            OpenArgs,
            edit_tools.open_document,
            operation="open_outside",
            approval=edit_tools.open_approval(service),
            vex="open_document",
            target_of=lambda a: a.path,
        ),
        spec(
            "md_save_current_document",
            "Save",
            "Save the document to its file (no approval needed). Refused with SOURCE_CHANGED if another "
            "program changed the file.",
            DocArgs,
            edit_tools.save,
            destructive=True,  # it replaces the file on disk with the buffer
            idempotent=True,
            vex="save_current_document",
        ),
        spec(
            "md_save_current_document_as",
            "Save as",
            "Save to a new path in scope; an existing file needs overwrite true and the person's approval.",
            SaveAsArgs,
            edit_tools.save_as,
            operation="overwrite",
            approval=edit_tools.save_as_approval(service),
            destructive=True,  # with overwrite true it replaces an existing file
            vex="save_current_document_as",
            target_of=lambda a: a.path,
        ),
        spec(
            "md_resolve_external_change",
            "Reload or keep after an outside change",
            "After another program changed the file (externalChange): reload takes the file's text, keep "
            "keeps the editor's and the next save writes it. The person's choice in the editor's banner: "
            "not offered to MCP clients.",
            ResolveExternalArgs,
            edit_tools.resolve_external_change,
            destructive=True,  # reload replaces the editor's text, keep lets the next save replace the file
            person_only=True,
        ),
        spec(
            "md_ui_export_current_document",
            "Export",
            "Export as HTML (self-contained), PDF, PNG or Word into the document's folder under a free name "
            "(asks the person; never overwrites).",
            ExportArgs,
            edit_tools.export_document,
            operation="export",
            approval=edit_tools.export_approval(service),
            vex="ui_export_current_document",
        ),
        spec(
            "md_ui_copy_rendered_html",
            "Copy rich HTML for a platform",
            "Style the rendered document for WeChat, Zhihu or Juejin (inline styles) and put it on the "
            "person's clipboard through the editor (asks the person first).",
            CopyRichHtmlArgs,
            edit_tools.copy_rich_html,
            operation="copy_rich_html",
            approval=edit_tools.copy_approval(service),
            vex="ui_copy_rendered_html",
        ),
    ]
    return specs


__all__ = ["markdown_tools"]
