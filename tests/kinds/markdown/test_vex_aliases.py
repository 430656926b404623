"""Vex's tool names (`vex_*`, `vex.*`) over a real MCP client: answered, and without the client's "Tool … not
listed by server" warning (the SDK re-lists and finds them), while a session that never used one sees only the
short list (AGENT-TOKENS)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp_types import Implementation

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_vex_name_answers_without_a_client_warning(tmp_path: Path, caplog) -> None:
    (tmp_path / "README.md").write_text("# Notes\n\nHello.\n", "utf-8")
    caplog.set_level(logging.WARNING, logger="mcp")
    async with running_server(tmp_path / "README.md") as srv:
        async with srv.client() as plain:
            names = {tool.name for tool in (await plain.list_tools()).tools}
            assert "md_get_current_document" in names
            assert not any(name.startswith("vex") for name in names)  # the model's list stays short
        async with srv.client() as vex:
            for name in ("vex_get_current_document", "vex.get_current_document"):
                result = await vex.call_tool(name, {})
                assert not result.is_error and result.structured_content["fileName"] == "README.md"
            listed = {tool.name: tool for tool in (await vex.list_tools()).tools}
            assert {"vex_get_current_document", "vex.get_current_document", "vex_ui_set_theme"} <= set(listed)
            assert "md_get_current_document" in listed["vex_get_current_document"].description
        # Another client is not affected (callers are sessions, or client names where the protocol era has none).
        async with srv.client(client_info=Implementation(name="another-client", version="1")) as other:
            assert not any(t.name.startswith("vex") for t in (await other.list_tools()).tools)
    warnings = [r.getMessage() for r in caplog.records if "not listed" in r.getMessage()]
    assert warnings == []
