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
