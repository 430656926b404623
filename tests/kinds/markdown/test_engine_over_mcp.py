"""Markdown on the shared core (issue 10 "One engine"), over a real MCP client and the HTTP server."""

from __future__ import annotations

from pathlib import Path

import pytest

from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _heading_doc(folder: Path) -> Path:
    folder.mkdir()
    body = "".join(f"## Heading {i}\n\ntext {i}\n\n" for i in range(120))
    (folder / "README.md").write_text("# Top\n\n" + body, encoding="utf-8")
    for i in range(5):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\nhello {i}\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("md_get_document_outline", {"limit": 5}),
        ("md_list_open_documents", {"limit": 2}),
        ("md_search", {"query": "hello", "limit": 1}),
        ("md_get_rendered_html", {"maxBytes": 1024}),
    ],
)
async def test_a_bad_cursor_errors_with_the_restart_hint(tmp_path: Path, tool: str, args: dict) -> None:
    folder = _heading_doc(tmp_path / "notes")
    async with running_server(folder) as srv, srv.client() as client:
        first = await client.call_tool(tool, args)
        assert not first.is_error, first.structured_content
        cursor = first.structured_content["nextCursor"]
        assert cursor, first.structured_content
        second = await client.call_tool(tool, {**args, "cursor": cursor})
        assert not second.is_error, second.structured_content
        # Two of these tools used to start again at page 1 on a cursor they could not read.
        for bad in ("5", cursor[:-3] + "zzz", "garbage!"):
            res = await client.call_tool(tool, {**args, "cursor": bad})
            assert res.is_error, (tool, bad, res.structured_content)
            err = res.structured_content
            assert err["code"] == "INVALID_ARGUMENT", err
            assert tool in err["hint"] and "without cursor" in err["hint"], err
