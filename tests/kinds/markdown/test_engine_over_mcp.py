"""Markdown on the shared core (issue 10 "One engine"), over a real MCP client and the HTTP server."""

from __future__ import annotations

import asyncio
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


async def test_a_12_mb_save_runs_off_the_event_loop(tmp_path: Path, monkeypatch) -> None:
    """While a big save is writing, another request is answered (the save held the loop for 242 ms before).

    The write is held at a gate until the other request has been answered: if the save ran on the event
    loop, nothing else could be answered while it waits, and the gate would be released by its timeout
    instead of by this test.
    """
    import threading

    import anyio

    from deskbridge.kinds.markdown import diskio

    folder = tmp_path / "big"
    folder.mkdir()
    line = "一行中文 and English text, repeated to make a large document.\n"
    (folder / "README.md").write_text(line * (12 * 1024 * 1024 // len(line.encode())), encoding="utf-8")
    entered, release = threading.Event(), threading.Event()
    released_by_test: list[bool] = []
    real_write = diskio.atomic_write

    def gated_write(*args, **kwargs):
        entered.set()
        released_by_test.append(release.wait(60))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(diskio, "atomic_write", gated_write)
    async with running_server(folder) as srv, srv.client() as client:
        save = asyncio.create_task(client.call_tool("md_save_current_document", {}))
        assert await anyio.to_thread.run_sync(entered.wait, 60)
        status = await client.call_tool("md_get_app_status", {})
        assert not status.is_error and not save.done()
        release.set()
        saved = await save
        assert not saved.is_error, saved.structured_content
        assert saved.structured_content["bytesWritten"] > 12_000_000
    assert released_by_test == [True]


async def test_a_file_replaced_by_another_program_is_not_overwritten(tmp_path: Path) -> None:
    import os

    folder = tmp_path / "notes"
    folder.mkdir()
    target = folder / "README.md"
    target.write_text("# Mine\n", encoding="utf-8")
    async with running_server(folder) as srv, srv.client() as client:
        doc = await client.call_tool("md_get_current_document", {})
        assert doc.structured_content["markdown"] == "# Mine\n"
        # Another program saves the way editors do: write a temp file, rename it over the original.
        other = folder / ".README.md.tmp"
        other.write_text("# Theirs\n", encoding="utf-8")
        os.replace(other, target)
        res = await client.call_tool("md_save_current_document", {})
        assert res.is_error and res.structured_content["code"] == "SOURCE_CHANGED", res.structured_content
        assert "md_save_current_document" in res.structured_content["hint"]
    assert target.read_text(encoding="utf-8") == "# Theirs\n"
