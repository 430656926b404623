"""The markdown kind served by `deskbridge serve`: a real MCP client reads, edits (with approval), saves."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from deskbridge.kinds.markdown.demo import make_sample_notes
from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_read_edit_approve_and_save_over_http(tmp_path: Path) -> None:
    notes = make_sample_notes(tmp_path / "notes")
    async with running_server(notes) as srv, srv.client() as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"md_get_current_document", "md_replace_text", "md_patch_section", "md_search"} <= names
        doc = await client.call_tool("vex_get_current_document", {})
        assert not doc.is_error and doc.structured_content["fileName"] == "README.md"
        rev = doc.structured_content["revision"]

        # Nobody can answer yet (no editor attached, the client has no elicitation): declined, nothing changes.
        declined = await client.call_tool(
            "md_replace_text", {"oldText": "Write the design", "newText": "Design", "expectedRevision": rev}
        )
        assert declined.is_error and declined.structured_content["code"] == "APPROVAL_DECLINED"

        # With the editor open, the person approves the diff they are shown.
        broker = srv.app.approvals
        broker.attach_ui()
        subscription = srv.app.events.subscribe("approval")
        call = asyncio.create_task(
            client.call_tool(
                "md_replace_text",
                {"oldText": "Write the design", "newText": "Design", "expectedRevision": rev},
            )
        )
        event = await subscription.get(timeout=60)  # generous: CI machines are shared
        assert "+- [ ] Design" in event.data["request"]["diff"]
        broker.answer(event.data["request"]["id"], True)
        done = await call
        assert not done.is_error, done.structured_content
        saved = await client.call_tool("md_save_current_document", {})
        assert not saved.is_error
    assert "- [ ] Design\n" in (notes / "README.md").read_text(encoding="utf-8")


async def test_opening_an_open_document_in_another_encoding_reads_it_again_or_says_why_not(
    tmp_path: Path,
) -> None:
    """A wrong guess (GB18030 bytes read as latin-1, which decodes anything) must be correctable: asking again
    with the right encoding reads the file again, never returns the mojibake as if it were GB18030."""
    from deskbridge.settings import Settings, save_settings

    save_settings(Settings(require_approval=False))
    (tmp_path / "notes.md").write_text("# Notes\n", encoding="utf-8")
    (tmp_path / "gbk.md").write_bytes("# 中文笔记\n\n你好世界\n".encode("gb18030"))
    async with running_server(tmp_path) as srv, srv.client() as client:
        refused = await client.call_tool("md_open_document", {"path": "gbk.md"})
        assert refused.is_error and refused.structured_content["code"] == "ENCODING_MISMATCH"
        assert "encodingName" in refused.structured_content["hint"]
        assert "gb18030" in refused.structured_content["hint"]

        wrong = await client.call_tool("md_open_document", {"path": "gbk.md", "encodingName": "latin-1"})
        assert not wrong.is_error and wrong.structured_content["encoding"] == "latin-1"

        unknown = await client.call_tool("md_open_document", {"path": "gbk.md", "encodingName": "ebcdic"})
        assert unknown.is_error and unknown.structured_content["code"] == "INVALID_ARGUMENT"
        assert "gb18030" in unknown.structured_content["message"]

        right = await client.call_tool("md_open_document", {"path": "gbk.md", "encodingName": "GB18030"})
        assert not right.is_error, right.structured_content
        assert right.structured_content["encoding"] == "gb18030"
        doc = await client.call_tool("md_get_current_document", {})
        assert doc.structured_content["markdown"] == "# 中文笔记\n\n你好世界\n"
        assert doc.structured_content["encoding"] == "gb18030"

        # Not valid in the one asked for: refused, and the document stays as it was.
        bad = await client.call_tool("md_open_document", {"path": "gbk.md", "encodingName": "utf-8"})
        assert bad.is_error and bad.structured_content["code"] == "ENCODING_MISMATCH"
        doc = await client.call_tool("md_get_current_document", {})
        assert doc.structured_content["markdown"] == "# 中文笔记\n\n你好世界\n"

        # With unsaved changes it is not read again (that would replace them), and says so.
        rev = doc.structured_content["revision"]
        edit = await client.call_tool(
            "md_replace_text", {"oldText": "你好", "newText": "再见", "expectedRevision": rev}
        )
        assert not edit.is_error, edit.structured_content
        dirty = await client.call_tool("md_open_document", {"path": "gbk.md", "encodingName": "big5"})
        assert dirty.is_error and dirty.structured_content["code"] == "UNSAVED_CHANGES"
        doc = await client.call_tool("md_get_current_document", {})
        assert doc.structured_content["markdown"] == "# 中文笔记\n\n再见世界\n"
        saved = await client.call_tool("md_save_current_document", {})
        assert not saved.is_error, saved.structured_content
    assert (tmp_path / "gbk.md").read_bytes() == "# 中文笔记\n\n再见世界\n".encode("gb18030")


@pytest.mark.parametrize(
    "mode", ["legacy", "auto"]
)  # a live elicitation request / the 2026 InputRequiredResult
@pytest.mark.parametrize("answer", ["false", "no", 1, None])
async def test_only_a_boolean_yes_through_the_client_approves_an_edit(
    tmp_path: Path, answer: object, mode: str
) -> None:
    """The approval form asks for a boolean; a client that sent "false" as text had the edit applied."""
    import mcp_types as types

    from deskbridge.settings import Settings, save_settings

    save_settings(Settings(require_approval=True))
    (tmp_path / "notes.md").write_text("# Notes\n\nalpha beta\n", encoding="utf-8")
    seen: list[str] = []

    async def person(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": answer})

    async with (
        running_server(tmp_path / "notes.md") as srv,
        srv.client(mode=mode, elicitation_callback=person) as client,
    ):
        rev = (await client.call_tool("md_get_current_document", {})).structured_content["revision"]
        edit = await client.call_tool(
            "md_replace_text", {"oldText": "alpha", "newText": "ALPHA", "expectedRevision": rev}
        )
        assert seen, "the person was not asked"
        assert edit.is_error and edit.structured_content["code"] == "APPROVAL_DECLINED"
        doc = await client.call_tool("md_get_current_document", {})
        assert doc.structured_content["markdown"] == "# Notes\n\nalpha beta\n"


async def test_an_agents_crlf_text_is_written_with_the_files_own_line_breaks(tmp_path: Path) -> None:
    """An agent on Windows sends '\r\n': it stayed in the text and a CRLF file got '\r\r\n' lines on save."""
    from deskbridge.settings import Settings, save_settings

    save_settings(Settings(require_approval=False))
    (tmp_path / "notes.md").write_bytes(b"# Notes\r\n\r\nalpha\r\n")
    async with running_server(tmp_path / "notes.md") as srv, srv.client() as client:

        async def edit(tool: str, arguments: dict) -> None:
            rev = (await client.call_tool("md_get_current_document", {})).structured_content["revision"]
            done = await client.call_tool(tool, {**arguments, "expectedRevision": rev})
            assert not done.is_error, done.structured_content

        await edit("md_replace_text", {"oldText": "alpha", "newText": "one\r\ntwo"})
        await edit("md_insert_text", {"text": "top\r\n", "offset": 0})
        await edit("md_patch_section", {"headingPath": "Notes", "operation": "append", "content": "end\r\n"})
        text = (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
        at = text.index("one")
        await edit(
            "md_apply_text_edit",
            {"startOffset": at, "length": 7, "expectedText": "one\r\ntwo", "replacement": "1\r\n2"},
        )
        text = (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
        assert "\r" not in text
        assert not (await client.call_tool("md_save_current_document", {})).is_error
    data = (tmp_path / "notes.md").read_bytes()
    assert b"\r\r" not in data and data.count(b"\n") == data.count(b"\r\n")
    assert data.startswith(b"top\r\n# Notes\r\n") and b"1\r\n2\r\n" in data and b"end\r\n" in data
