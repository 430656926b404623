"""Attacks on the markdown kind over the real transport (`deskbridge serve` in-process, a real MCP client, the
editor's HTTP routes with the UI credentials): hostile documents, export amplification, regex DoS, FIFOs.
Issue 8; each test performs the attack."""

from __future__ import annotations

import asyncio
import io
import os
import sys
import zipfile
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from deskbridge.kinds.markdown import export as export_mod
from deskbridge.testing import running_server

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kinds" / "markdown"))
from injection_corpus import Listener, assert_harmless, document

pytestmark = [pytest.mark.anyio, pytest.mark.security]

MD = "/api/markdown"


def approve_all():
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"approve": True})

    return callback


@pytest.fixture
def listener():
    with Listener() as lst:
        yield lst


@pytest.fixture
def hostile(tmp_path: Path, listener: Listener) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "evil.md").write_text(document(listener.port), "utf-8")
    return root


async def test_rendered_html_over_mcp_is_harmless(hostile: Path, listener: Listener) -> None:
    async with running_server(hostile / "evil.md") as srv, srv.client() as client:
        html, cursor = "", None
        while True:
            args = {"maxBytes": 4096, **({"cursor": cursor} if cursor else {})}
            page = await client.call_tool("md_get_rendered_html", args)
            assert not page.is_error, page.structured_content
            html += page.structured_content["html"]
            cursor = page.structured_content["nextCursor"]
            if not cursor:
                break
    assert "a fine link" in html and "https://example.org/" in html  # the control survives
    assert_harmless(html, where="md_get_rendered_html")
    assert listener.hits == []


async def test_every_export_format_makes_no_request_and_carries_no_script(
    hostile: Path, listener: Listener
) -> None:
    formats = ["HTML", "Word"] + (["PDF", "PNG"] if export_mod.chromium_available() else [])
    async with (
        running_server(hostile / "evil.md") as srv,
        srv.client(mode="legacy", elicitation_callback=approve_all()) as client,
    ):
        for fmt in formats:
            result = await client.call_tool("md_ui_export_current_document", {"format": fmt})
            assert not result.is_error, (fmt, result.structured_content)
    out = {p.suffix: p for p in hostile.iterdir() if p.name != "evil.md"}
    page = out[".html"].read_text("utf-8")
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    body = page.split("<body>", 1)[1]
    assert_harmless(body, where="export HTML", images="inline")
    with zipfile.ZipFile(io.BytesIO(out[".docx"].read_bytes())) as docx:
        rels = docx.read("word/_rels/document.xml.rels").decode("utf-8")
        xml = docx.read("word/document.xml").decode("utf-8")
    for bad in ("javascript:", "vbscript:", "file:", "\\\\evil", "//evil.example", "data:text"):
        assert bad not in rels, f"Word keeps a {bad} link"
    assert "a fine link" in xml and "https://example.org/" in rels
    if "PDF" in formats:
        assert out[".pdf"].read_bytes().startswith(b"%PDF") and out[".png"].stat().st_size > 1000
    await asyncio.sleep(0.3)
    assert listener.hits == [], f"an export reached out: {listener.hits[:3]}"


@pytest.mark.parametrize("target", export_mod.RICH_TARGETS)
async def test_rich_html_copies_are_sanitised(hostile: Path, listener: Listener, target: str) -> None:
    async with (
        running_server(hostile / "evil.md") as srv,
        httpx2.AsyncClient(base_url=srv.base_url, headers=srv.ui_headers()) as http,
    ):
        docs = (await http.get(f"{MD}/docs")).json()
        r = await http.get(f"{MD}/docs/{docs['current']}/rich", params={"target": target})
    assert r.status_code == 200
    assert_harmless(
        r.json()["html"], where=f"rich {target}", images="remote-ok", formula_svg=target == "wechat"
    )


async def test_a_document_cannot_start_exports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Export amplification: GETs (a document's <img>) start nothing; POSTs run one at a time, queue bounded."""
    (tmp_path / "a.md").write_text("# A\n", "utf-8")
    running = {"now": 0, "max": 0}

    async def slow_export(*args: Any, **kwargs: Any) -> bytes:
        running["now"] += 1
        running["max"] = max(running["max"], running["now"])
        await asyncio.sleep(0.2)
        running["now"] -= 1
        return b"<html></html>"

    monkeypatch.setattr("deskbridge.kinds.markdown.web.export_bytes", slow_export)
    async with running_server(tmp_path / "a.md") as srv:  # noqa: SIM117 - the client needs srv's URL
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=srv.ui_headers(), timeout=30) as http:
            doc = (await http.get(f"{MD}/docs")).json()["current"]
            url = f"{MD}/docs/{doc}/export"
            assert (await http.get(url, params={"format": "pdf"})).status_code == 405
            assert (await http.post(url, json={"format": "pdf"})).status_code == 403
            answers = await asyncio.gather(
                *(
                    http.post(url, json={"format": "html"}, headers={"x-deskbridge-request": "export"})
                    for _ in range(12)
                )
            )
    codes = sorted(r.status_code for r in answers)
    assert running["max"] == 1, "two exports ran at once"
    assert codes.count(200) == 1 + export_mod.EXPORTS_QUEUED_MAX and set(codes) == {200, 413}
    refused = [r for r in answers if r.status_code != 200]
    assert refused and all(r.json()["error"]["code"] == "LIMIT_EXCEEDED" for r in refused)


@pytest.mark.parametrize("pattern", ["(a+)+$", "(a|aa)+$", "(?:a|a)+$"])
async def test_a_catastrophic_regex_neither_blocks_the_server_nor_runs_unbounded(
    tmp_path: Path, pattern: str
) -> None:
    """`(a+)+$` is the issue's pattern (the `regex` engine answers it at once); `(a|aa)+$` backtracks without
    end there too, so it shows the time limit; both while other requests keep being answered."""
    crafted = ("a" * 40 + "!\n") * 200
    (tmp_path / "crafted.md").write_text(crafted, "utf-8")
    async with running_server(tmp_path / "crafted.md") as srv, srv.client() as client, srv.client() as other:
        search = asyncio.ensure_future(client.call_tool("md_search", {"query": pattern, "regex": True}))
        await asyncio.sleep(0.3)
        # while the pattern backtracks, other requests are answered: they finish before the search does
        for _ in range(5):
            status = await other.call_tool("md_get_app_status", {})
            assert not status.is_error
        answered_while_searching = not search.done()
        result = await search
    if pattern == "(a+)+$":
        assert not result.is_error and result.structured_content["matches"] == []
    else:
        assert answered_while_searching, "the search held the event loop"
        # bounded: the engine's time limit stopped it, and it says so
        assert result.is_error and "longer than" in str(result.content[0].text), result.content


async def test_a_fifo_named_like_a_document_does_not_hang_search_or_open(tmp_path: Path) -> None:
    (tmp_path / "real.md").write_text("hello world\n", "utf-8")
    os.mkfifo(tmp_path / "x.md")
    async with running_server(tmp_path) as srv, srv.client() as client:
        with anyio_fail_after(10):
            found = await client.call_tool("md_search", {"query": "hello"})
            opened = await client.call_tool("md_open_document", {"path": "x.md"})
    assert not found.is_error and [m["path"] for m in found.structured_content["matches"]] == ["real.md"]
    assert found.structured_content["skippedFiles"] == ["x.md"]
    assert opened.is_error  # refused at once (no such document), never a blocked open()


def anyio_fail_after(seconds: float):
    import anyio

    return anyio.fail_after(seconds)
