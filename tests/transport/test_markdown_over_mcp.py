"""The markdown kind served by `deskbridge serve`, driven by a real MCP client over HTTP: reads, guarded edits,
refusals, and approval through MCP elicitation when no browser is attached."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    (tmp_path / "README.md").write_text("# Notes\n\n## Intro\n\nHello world.\n", "utf-8")
    return tmp_path


def answer(approve: bool, seen: list[str]):
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


async def read(client: Any) -> dict[str, Any]:
    result = await client.call_tool("md_get_current_document", {})
    assert not result.is_error, result.structured_content
    return result.structured_content


@pytest.mark.parametrize(
    "mode", ["legacy", "auto"]
)  # a live elicitation request / the 2026 InputRequiredResult
@pytest.mark.parametrize("approve", [True, False])
async def test_edit_asks_through_elicitation_without_a_browser(notes: Path, approve: bool, mode: str) -> None:
    seen: list[str] = []
    async with (
        running_server(notes) as srv,
        srv.client(mode=mode, elicitation_callback=answer(approve, seen)) as client,
    ):
        doc = await read(client)
        result = await client.call_tool(
            "md_replace_text",
            {"oldText": "Hello world.", "newText": "Hello deskbridge.", "expectedRevision": doc["revision"]},
        )
        after = await read(client)
        audit = [r.to_dict() for r in srv.app.audit.recent() if r.tool == "md_replace_text"]
    assert seen, "the person was not asked"
    assert "-Hello world." in seen[-1] and "+Hello deskbridge." in seen[-1], (
        seen
    )  # the diff, not only a summary
    assert audit[-1]["approval"] == ("approved" if approve else "declined")
    if mode == "auto":  # the first round returned the question, the client's retry carried the answer
        assert [r["outcome"] for r in audit][-2] == "INPUT_REQUIRED"
    if approve:
        assert not result.is_error, result.structured_content
        assert "Hello deskbridge." in after["markdown"]
    else:
        assert result.is_error and result.structured_content["code"] == "APPROVAL_DECLINED"
        assert "Hello world." in after["markdown"]


async def test_stale_revision_is_refused_and_changes_nothing(notes: Path) -> None:
    async with running_server(notes) as srv:
        async with httpx2.AsyncClient() as http:  # the person turns approvals off in the settings panel
            off = await http.post(
                srv.base_url + "/api/settings", json={"require_approval": False}, headers=srv.ui_headers()
            )
            assert off.status_code == 200
        async with srv.client() as client:
            doc = await read(client)
            first = await client.call_tool(
                "md_replace_text",
                {"oldText": "Hello world.", "newText": "One.", "expectedRevision": doc["revision"]},
            )
            assert not first.is_error, first.structured_content
            stale = await client.call_tool(
                "md_replace_text", {"oldText": "One.", "newText": "Two.", "expectedRevision": doc["revision"]}
            )
            assert stale.is_error and stale.structured_content["code"] == "STALE_WORKSPACE"
            assert "One." in (await read(client))["markdown"]


async def test_outside_scope_open_is_refused(notes: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "secret.md"
    elsewhere.write_text("# secret\n", "utf-8")
    async with running_server(notes) as srv, srv.client() as client:
        result = await client.call_tool("md_open_document", {"path": str(elsewhere)})
        assert result.is_error
        assert result.structured_content["code"] in ("ACCESS_DENIED", "APPROVAL_DECLINED")
        traversal = await client.call_tool("md_open_document", {"path": "../../etc/passwd"})
        assert traversal.is_error and traversal.structured_content["code"] in (
            "ACCESS_DENIED",
            "INVALID_ARGUMENT",
        )


async def test_a_change_on_disk_is_noticed_while_serving(notes: Path) -> None:
    import anyio

    async with running_server(notes) as srv, srv.client() as client:
        await read(client)
        (notes / "README.md").write_text("# Changed elsewhere\n", "utf-8")
        for _ in range(50):
            doc = (await client.call_tool("md_list_open_documents", {})).structured_content["documents"][0]
            if doc.get("externalChange"):
                break
            await anyio.sleep(0.1)
        assert doc["externalChange"] is True


async def test_an_agent_without_an_editor_can_take_a_changed_file_it_has_not_edited(notes: Path) -> None:
    """With no editor open, nobody answers the reload/keep banner: an agent kept reading the old text and every
    save was refused. Opening the file again now takes its new text when nothing is unsaved; with unsaved
    changes the choice stays the person's."""
    async with running_server(notes) as srv, srv.client() as client:
        srv.app.update_settings({"require_approval": False})
        await read(client)
        (notes / "README.md").write_text("# Changed elsewhere\n", "utf-8")
        refused = await client.call_tool("md_save_current_document", {})
        assert refused.is_error and refused.structured_content["code"] == "SOURCE_CHANGED"
        assert "md_open_document" in refused.structured_content["hint"]
        opened = await client.call_tool("md_open_document", {"path": "README.md"})
        assert not opened.is_error and opened.structured_content["externalChange"] is False
        doc = await read(client)
        assert doc["markdown"] == "# Changed elsewhere\n"
        edit = await client.call_tool(
            "md_replace_text",
            {"oldText": "Changed elsewhere", "newText": "Mine now", "expectedRevision": doc["revision"]},
        )
        assert not edit.is_error, edit.structured_content
        saved = await client.call_tool("md_save_current_document", {})
        assert not saved.is_error, saved.structured_content
        assert (notes / "README.md").read_text("utf-8") == "# Mine now\n"
        # unsaved changes and another outside write: opening again keeps them (the person chooses)
        doc = await read(client)
        await client.call_tool(
            "md_replace_text",
            {"oldText": "Mine now", "newText": "Unsaved", "expectedRevision": doc["revision"]},
        )
        (notes / "README.md").write_text("# Third version\n", "utf-8")
        again = await client.call_tool("md_save_current_document", {})
        assert again.is_error and "reload or keep" in again.structured_content["hint"]
        await client.call_tool("md_open_document", {"path": "README.md"})
        assert (await read(client))["markdown"] == "# Unsaved\n"
