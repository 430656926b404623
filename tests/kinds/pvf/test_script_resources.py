"""The script API topics as MCP resources `deskbridge://pvf/script-api/<topic>`, read by a real MCP client over
Streamable HTTP (`deskbridge serve`, both protocol eras) and over stdio (`deskbridge mcp`, a subprocess)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, MCPError, StdioServerParameters

from deskbridge.kinds.pvf.scripting.help import TOPICS
from deskbridge.kinds.pvf.synth import synth
from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio

URI = "deskbridge://pvf/script-api/"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def archive(tmp_path: Path) -> Path:
    path = tmp_path / "Script.pvf"
    synth(path, family="classic", files=20, seed=1)
    return path


async def check(client: Any) -> None:
    listed = {str(r.uri): r for r in (await client.list_resources()).resources}
    assert set(listed) == {URI + topic for topic in TOPICS}
    assert listed[URI + "types"].mime_type == "application/typescript"
    templates = (await client.list_resource_templates()).resource_templates
    assert [t.uri_template for t in templates] == [URI + "{topic}"]
    for topic, text in TOPICS.items():
        contents = (await client.read_resource(URI + topic)).contents
        assert len(contents) == 1 and contents[0].text == text and str(contents[0].uri) == URI + topic
    assert "interface PvfApi" in (await client.read_resource(URI + "types")).contents[0].text
    # the tool serves the same text, for clients without resources
    tool = await client.call_tool("pvf_script_help", {"topic": "pitfalls"})
    assert tool.structured_content["text"] == TOPICS["pitfalls"]
    for unknown in (URI + "nope", URI + "types/../api", "deskbridge://pvf/other", "file:///etc/passwd"):
        with pytest.raises(MCPError) as err:
            await client.read_resource(unknown)
        assert err.value.error.code == -32602, unknown  # MCP spec 2026-07-28: an unknown resource


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_script_api_resources_over_http(archive: Path, mode: str) -> None:
    async with running_server(archive) as srv, srv.client(mode=mode) as client:
        await check(client)


async def test_script_api_resources_over_stdio(archive: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "deskbridge", "mcp", str(archive)], env=dict(os.environ)
    )
    async with Client(params) as client:
        await check(client)


async def test_a_kind_without_resources_lists_none(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Notes\n", "utf-8")
    async with running_server(tmp_path) as srv, srv.client() as client:
        assert (await client.list_resources()).resources == []
        assert (await client.list_resource_templates()).resource_templates == []
        with pytest.raises(MCPError) as err:
            await client.read_resource(URI + "types")
        assert err.value.error.code == -32602
