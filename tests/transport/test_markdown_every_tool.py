"""Every `md_*` tool, called once by a real MCP client over Streamable HTTP against `deskbridge serve`.

The list of calls must cover exactly the tools the server lists, so a new tool cannot ship without going through
the real transport here. Tools that act on the editor's view answer UI_NOT_READY when no browser is open.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio

NEEDS_EDITOR = {
    "md_ui_open_panel",
    "md_ui_refresh_preview",
    "md_ui_apply_editor_command",
    "md_ui_copy_rendered_html",
}


async def test_every_markdown_tool_answers_over_http(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Notes\n\n## Intro\n\nHello world.\n", "utf-8")
    (tmp_path / "other.md").write_text("# Other\n\nSecond file.\n", "utf-8")
    async with running_server(tmp_path) as srv, srv.client() as client:
        srv.app.update_settings({"require_approval": False})
        listed = {tool.name for tool in (await client.list_tools()).tools}

        async def call(name: str, args: dict[str, Any] | None = None) -> dict[str, Any]:
            result = await client.call_tool(name, args or {})
            content = result.structured_content
            if name in NEEDS_EDITOR:
                assert result.is_error and content["code"] == "UI_NOT_READY", (name, content)
            else:
                assert not result.is_error, (name, content)
            called.add(name)
            return content

        async def revision() -> str:
            return (await client.call_tool("md_get_current_document", {})).structured_content["revision"]

        called: set[str] = set()
        await call("md_get_app_status")
        await call("md_list_open_documents")
        doc = await call("md_get_current_document")
        assert "Hello world." in doc["markdown"]
        await call("md_get_document_outline")
        await call("md_read_section", {"headingPath": "Notes > Intro"})
        await call("md_get_rendered_html")
        await call("md_get_selection")
        await call("md_search", {"query": "file"})
        await call(
            "md_replace_text",
            {"oldText": "Hello world.", "newText": "Hello there.", "expectedRevision": await revision()},
        )
        await call(
            "md_apply_text_edit",
            {
                "startOffset": 0,
                "length": 1,
                "replacement": "#",
                "expectedText": "#",
                "expectedRevision": await revision(),
            },
        )
        await call(
            "md_insert_text",
            {
                "text": "\nAppended.\n",
                "offset": len((await call("md_get_current_document"))["markdown"]),
                "expectedRevision": await revision(),
            },
        )
        await call(
            "md_patch_section",
            {
                "headingPath": "Intro",
                "operation": "append",
                "content": "More.\n",
                "expectedRevision": await revision(),
            },
        )
        async with httpx2.AsyncClient(
            headers=srv.ui_headers()
        ) as http:  # the person puts the cursor at the start
            reported = await http.post(
                f"{srv.base_url}/api/markdown/docs/{doc['docId']}/selection", json={"anchor": 0, "head": 0}
            )
            assert reported.status_code == 200
        await call("md_replace_selection", {"text": "Start. ", "expectedRevision": await revision()})
        await call("md_save_current_document")
        await call("md_save_current_document_as", {"path": "copy.md"})
        assert (tmp_path / "copy.md").read_text("utf-8").startswith("Start. # Notes")
        await call("md_open_document", {"path": "other.md"})
        await call(
            "md_replace_current_document", {"markdown": "# Rewritten\n", "expectedRevision": await revision()}
        )
        await call("md_ui_get_state")
        await call("md_ui_set_theme", {"themeKey": "dark"})
        await call("md_ui_set_typography", {"typographyKey": "Simple"})
        await call("md_ui_set_language", {"cultureName": "ja-JP"})
        await call("md_ui_set_layout", {})
        await call("md_ui_show_sidebar_tab", {"tab": "outline"})
        await call("md_ui_open_panel", {"panel": "about"})
        await call("md_ui_refresh_preview")
        await call("md_ui_apply_editor_command", {"command": "bold"})
        await call("md_ui_copy_rendered_html", {"target": "zhihu"})
        exported = await call("md_ui_export_current_document", {"format": "HTML"})
        assert exported
        audit = await call("md_get_operation_audit")
        assert any(r["tool"] == "md_replace_text" for r in audit["records"])
    assert called == {name for name in listed if name.startswith("md_")}, listed ^ called


async def test_view_tools_reach_an_open_editor(tmp_path: Path) -> None:
    import anyio

    (tmp_path / "README.md").write_text("# Notes\n", "utf-8")
    async with running_server(tmp_path) as srv, srv.client() as client:
        srv.app.update_settings({"require_approval": False})  # copying rich HTML would wait for the person
        seen: list[bytes] = []

        async def editor() -> None:  # an open editor page is an open event stream
            async with (
                httpx2.AsyncClient(headers=srv.ui_headers(), timeout=None) as http,
                http.stream("GET", srv.base_url + "/api/events") as stream,
            ):
                async for chunk in stream.aiter_bytes():
                    seen.append(chunk)

        async with anyio.create_task_group() as tg:
            tg.start_soon(editor)
            while not srv.app.approvals.ui_attached:
                await anyio.sleep(0.02)
            for name, args in (
                ("md_ui_open_panel", {"panel": "about"}),
                ("md_ui_refresh_preview", {}),
                ("md_ui_apply_editor_command", {"command": "selectAll"}),  # text-changing commands: tests/e2e
                ("md_ui_copy_rendered_html", {"target": "wechat"}),
            ):
                result = await client.call_tool(name, args)
                assert not result.is_error, (name, result.structured_content)
            await anyio.sleep(0.2)
            tg.cancel_scope.cancel()
    assert b"event: ui" in b"".join(seen)
