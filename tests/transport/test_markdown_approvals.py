"""Markdown's file and export tools are approved centrally (`ToolSpec.operation`, asked by `App.invoke`), over
the real transport: each asks the person exactly once, a "no" changes nothing and is audited as declined, an
unanswered question is audited as timed out, and the browser's dialog is told which operation it asks about."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    d = tmp_path / "notes"
    d.mkdir()
    (d / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")
    (d / "old.md").write_text("# Old\n\nkept unless approved\n", "utf-8")
    (d / "copy.md").write_text("# Copy\n\nwhat overwriting loses\n", "utf-8")
    return d


def answering(approve: bool, seen: list[str]):
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


@pytest.mark.parametrize("approve", [True, False])
async def test_file_and_export_tools_ask_once_centrally_and_declines_are_audited(
    notes: Path, tmp_path_factory: pytest.TempPathFactory, approve: bool
) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "outside.md"
    elsewhere.write_text("# Outside\n", "utf-8")
    seen: list[str] = []
    calls = [
        ("md_open_document", {"path": str(elsewhere)}, "outside"),
        ("md_save_current_document_as", {"path": "copy.md", "overwrite": True}, "overwrite copy.md"),
        ("md_ui_export_current_document", {"format": "HTML"}, "as HTML"),
        ("md_rename_file", {"path": "old.md", "newPath": "renamed.md"}, "rename to renamed.md"),
        ("md_delete_file", {"path": "renamed.md" if approve else "old.md"}, "to the trash"),
    ]
    async with (
        running_server(notes) as srv,
        srv.client(mode="legacy", elicitation_callback=answering(approve, seen)) as client,
    ):
        for name, args, asked_about in calls:
            before = len(seen)
            result = await client.call_tool(name, args)
            assert len(seen) == before + 1, (name, seen[before:])  # asked once, by App.invoke
            assert asked_about in seen[-1] and name in seen[-1]
            record = [r for r in srv.app.audit.recent() if r.tool == name][-1]
            assert record.to_dict()["approval"] == ("approved" if approve else "declined"), name
            if approve:
                assert not result.is_error, (name, result.structured_content)
            else:
                assert result.is_error and result.structured_content["code"] == "APPROVAL_DECLINED", name
                assert record.outcome == "APPROVAL_DECLINED"
            if name == "md_open_document" and approve:
                # back to the workspace's document for the tools that act on the current one
                await client.call_tool("md_open_document", {"path": "README.md"})
        # inside the scope nothing is asked: opening a document there, and save-as to a new file
        before = len(seen)
        assert not (await client.call_tool("md_open_document", {"path": "README.md"})).is_error
        assert not (await client.call_tool("md_save_current_document_as", {"path": "new.md"})).is_error
        assert len(seen) == before
    if approve:
        assert (notes / "copy.md").read_text("utf-8").startswith("# Notes")
        assert (notes / "copy.html").is_file()  # the document saved as copy.md, exported
        assert not (notes / "old.md").exists() and not (notes / "renamed.md").exists()  # in the trash
    else:
        assert (notes / "copy.md").read_text("utf-8") == "# Copy\n\nwhat overwriting loses\n"
        assert not list(notes.glob("*.html")) and (notes / "old.md").is_file()


async def test_the_browser_dialog_is_told_the_operation_and_an_unanswered_one_times_out(notes: Path) -> None:
    requests: list[dict[str, Any]] = []
    answer_them = True
    async with running_server(notes) as srv, srv.client() as client, httpx2.AsyncClient(timeout=30) as http:

        async def browser() -> None:  # an open page: its event stream attaches it; it answers (or not)
            async with http.stream("GET", srv.base_url + "/api/events", headers=srv.ui_headers()) as events:
                async for line in events.aiter_lines():
                    if line.startswith("data:") and '"requested"' in line:
                        request = json.loads(line[5:])["request"]
                        requests.append(request)
                        if answer_them:
                            r = await http.post(
                                srv.base_url + f"/api/approvals/{request['id']}",
                                json={"approved": True},
                                headers=srv.ui_headers(),
                            )
                            assert r.status_code == 200

        async with anyio.create_task_group() as tg:
            tg.start_soon(browser)
            while not srv.app.approvals.ui_attached:
                await anyio.sleep(0.01)
            copied = await client.call_tool("md_ui_copy_rendered_html", {"target": "wechat"})
            assert not copied.is_error, copied.structured_content
            exported = await client.call_tool("md_ui_export_current_document", {"format": "HTML"})
            assert not exported.is_error, exported.structured_content
            assert [r["operation"] for r in requests] == ["copy_rich_html", "export"]
            # nobody answers: the question times out, which the audit records as such (not as a "no")
            answer_them = False
            srv.app.approvals.timeout_s = 0.5
            timed_out = await client.call_tool("md_ui_export_current_document", {"format": "PNG"})
            tg.cancel_scope.cancel()
    assert timed_out.is_error and timed_out.structured_content["code"] == "APPROVAL_DECLINED"
    assert timed_out.structured_content["data"]["decision"] == "timed_out"
    assert len(requests) == 3 and requests[-1]["operation"] == "export"
    record = [r for r in srv.app.audit.recent() if r.tool == "md_ui_export_current_document"][-1]
    assert record.to_dict()["approval"] == "timed_out" and record.outcome == "APPROVAL_DECLINED"
    assert not (notes / "README.png").exists()
