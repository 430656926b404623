"""The md_* tools as an MCP client calls them: read with a revision, edit with checks, see clear failures."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.events import EventBus
from deskbridge.core.policy import ApprovalBroker
from deskbridge.core.tools import TOOL_NAME_PATTERN, CallContext
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools

from .central import approved_run

AI = CallContext(caller="mcp:sess1", client_name="Claude")

NOTES = """# Intro

Hello 😀 world.

## Setup

- install
- run

## Usage

Use it daily.
"""


class Client:
    """Calls tools by name (or alias) the way the platform's App.invoke does."""

    def __init__(self, service: MarkdownService) -> None:
        self.service = service
        self.specs = {}
        for spec in markdown_tools(service):
            for name in (spec.name, *spec.aliases):
                self.specs[name] = spec

    def __call__(self, name: str, **arguments):
        spec = self.specs[name]
        return asyncio.run(approved_run(self.service, spec, AI, spec.args.model_validate(arguments)))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "notes.md").write_text(NOTES, encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "todo.md").write_text("# Todo\n\n- hello again\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def service(folder: Path) -> MarkdownService:
    svc = MarkdownService(folder / "notes.md", approval_settings={"enabled": False})
    return svc


@pytest.fixture
def call(service) -> Client:
    return Client(service)


def test_tool_names_and_vex_aliases(service):
    specs = markdown_tools(service)
    names = {s.name for s in specs}
    assert all(TOOL_NAME_PATTERN.match(n) and n.startswith("md_") for n in names)
    assert {"md_replace_text", "md_patch_section", "md_search", "md_read_section"} <= names
    aliases = {a for s in specs for a in s.aliases}
    assert {"vex_get_current_document", "vex.get_current_document", "vex_apply_text_edit"} <= aliases


def test_read_then_edit_by_offset_with_expected_text(call):
    doc = call("vex.get_current_document")
    at = doc["markdown"].index("world")
    res = call(
        "md_apply_text_edit",
        startOffset=at,
        length=5,
        expectedText="world",
        replacement="there",
        expectedRevision=doc["revision"],
    )
    assert "Hello 😀 there." in call("md_get_current_document")["markdown"]
    assert res["revision"] != doc["revision"]


def test_offset_edit_with_wrong_expected_text_shows_the_current_text(call):
    doc = call("md_get_current_document")
    with pytest.raises(BridgeError) as err:
        call(
            "md_apply_text_edit",
            startOffset=0,
            length=5,
            expectedText="# Out",
            replacement="x",
            expectedRevision=doc["revision"],
        )
    assert err.value.code is ErrorCode.EXPECTED_TEXT_MISMATCH
    assert err.value.data["currentText"] == "# Int"
    assert err.value.data["line"] == 1


def test_edit_with_an_invented_revision_is_stale(call):
    with pytest.raises(BridgeError) as err:
        call("md_insert_text", offset=0, text="x", expectedRevision="99-zzzzzz")
    assert err.value.code is ErrorCode.STALE_WORKSPACE
    assert "revision" in err.value.data


def test_line_column_edit(call):
    doc = call("md_get_current_document")
    call(
        "md_apply_text_edit",
        startLine=3,
        startColumn=1,
        endLine=3,
        endColumn=6,
        expectedText="Hello",
        replacement="Hi",
        expectedRevision=doc["revision"],
    )
    assert call("md_get_current_document")["markdown"].splitlines()[2] == "Hi 😀 world."


def test_replace_text_counts_occurrences_and_points_at_near_misses(call):
    rev = call("md_get_current_document")["revision"]
    with pytest.raises(BridgeError) as err:
        call("md_replace_text", oldText="Use  it daily.", newText="x", expectedRevision=rev)
    assert err.value.code is ErrorCode.NOT_FOUND
    assert err.value.data["nearMiss"]["line"] == 12
    assert "line 12" in err.value.message
    with pytest.raises(BridgeError) as err:
        call("md_replace_text", oldText="#", newText="=", expectedRevision=rev)
    assert err.value.code is ErrorCode.EXPECTED_TEXT_MISMATCH and err.value.data["occurrences"] == 5
    res = call("md_replace_text", oldText="- run", newText="- run tests", expectedRevision=rev)
    assert res["replacedOccurrences"] == 1


def test_patch_section_appends_under_a_heading_path(call):
    rev = call("md_get_current_document")["revision"]
    call(
        "md_patch_section",
        headingPath="Intro > Setup",
        operation="append",
        content="- enjoy",
        expectedRevision=rev,
    )
    section = call("md_read_section", headingPath="## Setup")
    assert section["markdown"] == "## Setup\n\n- install\n- run\n- enjoy\n\n"
    assert section["startLine"] == 5


def test_ambiguous_or_missing_heading_paths_are_refused(call, service):
    rev = call("md_get_current_document")["revision"]
    with pytest.raises(BridgeError) as err:
        call("md_patch_section", headingPath="Nope", operation="append", content="x", expectedRevision=rev)
    assert err.value.code is ErrorCode.NOT_FOUND


def test_outline_lists_heading_paths(call):
    items = call("md_get_document_outline")["items"]
    assert [(i["level"], i["path"], i["line"], i["endLine"]) for i in items] == [
        (1, "Intro", 1, 12),
        (2, "Intro > Setup", 5, 9),
        (2, "Intro > Usage", 10, 12),
    ]


def test_search_across_the_folder_is_paginated(call):
    first = call("md_search", query="hello", limit=1)
    assert first["truncated"] and first["nextCursor"]
    second = call("md_search", query="hello", limit=1, cursor=first["nextCursor"])
    assert {first["matches"][0]["path"], second["matches"][0]["path"]} == {"notes.md", "sub/todo.md"}
    assert (
        call("md_search", query="hello", limit=1, cursor=second["nextCursor"])["matches"] == []
        if second["nextCursor"]
        else True
    )


def test_reads_are_paginated_by_lines_with_a_byte_cap(service, call):
    doc = service.get()
    big = "".join(f"line {i} " + "x" * 100 + "\n" for i in range(5000))
    call("md_replace_current_document", markdown=big, expectedRevision=doc.revision)
    page = call("md_get_current_document", maxBytes=4096)
    assert page["truncated"] and page["nextStartLine"] == page["endLine"] + 1
    assert len(page["markdown"].encode()) <= 4096
    nxt = call("md_get_current_document", startLine=page["nextStartLine"], maxBytes=4096)
    assert nxt["markdown"].startswith(f"line {page['endLine']} ")


def test_selection_reported_by_the_browser_can_be_replaced(service, call):
    text = service.read()["text"]
    at = text.index("world")
    service.report_selection("d1", at + 1, at + 6)  # UTF-16: the emoji before counts twice
    sel = call("md_get_selection")
    assert sel["text"] == "world"
    call("md_replace_selection", text="planet", expectedText="world", expectedRevision=sel["revision"])
    assert "Hello 😀 planet." in service.read()["text"]


def test_edits_ask_the_person_through_the_core_broker(folder):
    bus = EventBus()
    broker = ApprovalBroker(bus, timeout_s=5)
    service = MarkdownService(folder / "notes.md", policy=broker, events=bus)
    spec = {s.name: s for s in markdown_tools(service)}["md_replace_text"]

    async def scenario():
        sub = bus.subscribe("approval")
        broker.attach_ui()
        rev = service.get().revision
        args = spec.args.model_validate({"oldText": "daily", "newText": "weekly", "expectedRevision": rev})
        task = asyncio.create_task(approved_run(service, spec, AI, args))
        event = await sub.get(timeout=5)
        request = event.data["request"]
        assert "-Use it daily." in request["diff"] and "+Use it weekly." in request["diff"]
        assert request["client"] == "Claude" and request["tool"] == "md_replace_text"
        broker.answer(request["id"], True)
        return await task

    asyncio.run(scenario())
    assert "weekly" in service.get().text


def test_without_anyone_to_ask_edits_are_declined(folder):
    service = MarkdownService(folder / "notes.md", policy=ApprovalBroker(EventBus(), timeout_s=1))
    call = Client(service)
    rev = call("md_get_current_document")["revision"]
    with pytest.raises(BridgeError) as err:
        call("md_insert_text", offset=0, text="x", expectedRevision=rev)
    assert err.value.code is ErrorCode.APPROVAL_DECLINED
    # how the audit records it ("no_one_to_ask", not "declined"): test_engine_over_mcp.py


def test_an_approval_nobody_answered_is_declined_as_not_in_time(folder):
    broker = ApprovalBroker(EventBus(), timeout_s=0.2)
    broker.attach_ui()
    service = MarkdownService(folder / "notes.md", policy=broker)
    call = Client(service)
    rev = call("md_get_current_document")["revision"]
    with pytest.raises(BridgeError) as err:
        call("md_insert_text", offset=0, text="x", expectedRevision=rev)
    assert err.value.code is ErrorCode.APPROVAL_DECLINED and "in time" in err.value.message


def test_a_patch_that_changes_nothing_asks_nothing(folder):
    service = MarkdownService(folder / "notes.md", policy=ApprovalBroker(EventBus(), timeout_s=1))
    call = Client(service)
    doc = call("md_get_current_document")
    result = call("md_replace_text", oldText="daily", newText="daily", expectedRevision=doc["revision"])
    assert result["unchanged"] is True and call("md_get_current_document")["revision"] == doc["revision"]


def test_edit_tools_declare_their_operation_and_the_diff_is_asked_centrally(folder):
    """App.invoke asks from `ToolSpec.operation`; the tool's approval_summary carries the diff (or None)."""
    service = MarkdownService(folder / "notes.md")
    specs = {s.name: s for s in markdown_tools(service)}
    edits = [
        "md_replace_current_document",
        "md_apply_text_edit",
        "md_insert_text",
        "md_replace_selection",
        "md_replace_text",
        "md_patch_section",
    ]
    assert all(specs[n].operation == "edit" and specs[n].approval_summary for n in edits)
    spec = specs["md_replace_text"]
    rev = service.get().revision
    args = spec.args.model_validate({"oldText": "daily", "newText": "weekly", "expectedRevision": rev})
    text = spec.approval_summary(args)
    assert "-Use it daily." in text.diff and "+Use it weekly." in text.diff and text.target == "notes.md"
    # the handler applies what was shown (planned once), without asking again
    out = asyncio.run(spec.handler(AI, args))
    assert out["replacedOccurrences"] == 1 and "weekly" in service.get().text
    same = spec.args.model_validate(
        {"oldText": "weekly", "newText": "weekly", "expectedRevision": service.get().revision}
    )
    assert spec.approval_summary(same) is None  # a no-op: nothing to ask
