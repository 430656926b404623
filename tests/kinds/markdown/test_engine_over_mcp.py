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

    from deskbridge.kinds.markdown.store import MarkdownStore

    folder = tmp_path / "big"
    folder.mkdir()
    line = "一行中文 and English text, repeated to make a large document.\n"
    (folder / "README.md").write_text(line * (12 * 1024 * 1024 // len(line.encode())), encoding="utf-8")
    entered, release = threading.Event(), threading.Event()
    released_by_test: list[bool] = []
    real_write = MarkdownStore.serialize_key

    def gated_write(*args, **kwargs):  # runs inside the core's atomic write of the document's file
        entered.set()
        released_by_test.append(release.wait(60))
        return real_write(*args, **kwargs)

    monkeypatch.setattr(MarkdownStore, "serialize_key", gated_write)
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


MD = "/api/markdown"


def _records(srv, tool: str, caller: str | None = None) -> list:
    return [r for r in srv.app.audit.recent() if r.tool == tool and (caller is None or r.caller == caller)]


async def test_saves_and_opens_from_the_editor_are_audited_exactly_once(tmp_path: Path, monkeypatch) -> None:
    """The editor's save/open/export routes used to skip App.invoke: saves and exports were not audited."""
    import httpx2

    async def fake_export(*args, **kwargs) -> bytes:  # the route, not the HTML renderer, is under test
        return b"<html></html>"

    monkeypatch.setattr("deskbridge.kinds.markdown.web.export_bytes", fake_export)
    folder = _heading_doc(tmp_path / "notes")
    async with running_server(folder) as srv, srv.client() as client:
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=srv.ui_headers(), timeout=30) as http:
            doc_id = (await http.get(f"{MD}/docs")).json()["current"]
            saved = await http.post(f"{MD}/docs/{doc_id}/save")
            assert saved.status_code == 200, saved.text
            assert saved.json()["bytesWritten"] > 0
            opened = await http.post(f"{MD}/open", json={"path": "note1.md"})
            assert opened.status_code == 200 and opened.json()["fileName"] == "note1.md"
            exported = await http.post(
                f"{MD}/docs/{doc_id}/export",
                json={"format": "html"},
                headers={"x-deskbridge-request": "export"},
            )
            assert exported.status_code == 200
            # a refused save (the file changed elsewhere) is audited once too, with its error code
            (folder / "note1.md").write_text("# changed elsewhere\n", encoding="utf-8")
            note1 = opened.json()["docId"]
            refused = await http.post(f"{MD}/docs/{note1}/save")
            assert refused.status_code != 200 and refused.json()["error"]["code"] == "SOURCE_CHANGED"
        saves = _records(srv, "md_save_current_document", "ui")
        assert [(r.target, r.outcome) for r in saves] == [("README.md", "ok"), ("note1.md", "SOURCE_CHANGED")]
        assert [r.target for r in _records(srv, "md_open_document", "ui")] == ["note1.md"]
        assert [r.target for r in _records(srv, "md.export_download", "ui")] == ["README.md"]
        # and md_get_operation_audit reads that same (core) audit: one record per call
        shown = (await client.call_tool("md_get_operation_audit", {"limit": 20})).structured_content[
            "records"
        ]
        tools = [(r["tool"], r["caller"]) for r in shown]
        assert tools.count(("md_save_current_document", "ui")) == 2
        assert tools.count(("md.export_download", "ui")) == 1


async def test_the_operation_audit_is_the_core_audit_without_search_queries(tmp_path: Path) -> None:
    folder = _heading_doc(tmp_path / "notes")
    async with running_server(folder) as srv, srv.client() as client:
        found = await client.call_tool("md_search", {"query": "SECRETWORD"})
        assert not found.is_error
        rev = (await client.call_tool("md_get_current_document", {})).structured_content["revision"]
        # nobody can answer (no editor open, no elicitation): declined, and audited as no_one_to_ask
        declined = await client.call_tool(
            "md_replace_text", {"oldText": "text 1\n", "newText": "SECRETEDIT\n", "expectedRevision": rev}
        )
        assert declined.is_error and declined.structured_content["code"] == "APPROVAL_DECLINED"
        shown = (await client.call_tool("md_get_operation_audit", {})).structured_content["records"]
        assert [r["tool"] for r in shown[:3]] == ["md_replace_text", "md_get_current_document", "md_search"]
        edit = shown[0]
        assert edit["approval"] == "no_one_to_ask" and edit["error"] == "APPROVAL_DECLINED"
        assert edit["target"] == "README.md" and edit["caller"].startswith("mcp:")
        assert len(_records(srv, "md_search")) == 1  # once: no second (kind) ring any more
        everything = str(shown) + str([r.to_dict() for r in srv.app.audit.recent()])
        assert "SECRETWORD" not in everything and "SECRETEDIT" not in everything


async def test_reload_or_keep_after_an_outside_change_runs_as_a_tool_and_is_audited(tmp_path: Path) -> None:
    """`/docs/{id}/external` called the service directly: the person's reload/keep was never audited."""
    import httpx2

    from deskbridge.core.tools import CallContext

    folder = _heading_doc(tmp_path / "notes")
    note = folder / "note1.md"
    async with running_server(folder) as srv, srv.client() as client:
        srv.app.update_settings({"require_approval": False})
        async with httpx2.AsyncClient(base_url=srv.base_url, headers=srv.ui_headers(), timeout=30) as http:
            opened = await http.post(f"{MD}/open", json={"path": "note1.md"})
            doc_id = opened.json()["docId"]
            rev = (await client.call_tool("md_get_current_document", {})).structured_content["revision"]
            edited = await client.call_tool(
                "md_insert_text", {"text": "mine ", "offset": 0, "expectedRevision": rev}
            )
            assert not edited.is_error, edited.structured_content
            note.write_text("# Theirs\n", encoding="utf-8")
            refused = await client.call_tool("md_save_current_document", {})
            assert refused.structured_content["code"] == "SOURCE_CHANGED"
            # the agent may not choose for the person: the tool is neither listed nor callable over MCP …
            listed = {t.name for t in (await client.list_tools()).tools}
            assert "md_resolve_external_change" not in listed
            denied = await client.call_tool("md_resolve_external_change", {"docId": doc_id, "action": "keep"})
            assert denied.is_error and denied.structured_content["code"] == "NOT_FOUND"
            # … and an AI caller reaching App.invoke another way is refused with the next step
            ai = CallContext(caller="mcp:other", client_name="other")
            with pytest.raises(Exception) as err:
                await srv.app.invoke("md_resolve_external_change", {"docId": doc_id, "action": "reload"}, ai)
            assert getattr(err.value, "code", None) == "ACCESS_DENIED"
            assert "md_list_open_documents" in err.value.hint
            # the person keeps their text in the editor's banner; the next save writes it
            kept = await http.post(f"{MD}/docs/{doc_id}/external", json={"action": "keep"})
            assert kept.status_code == 200 and kept.json()["externalChange"] is False, kept.text
            saved = await client.call_tool("md_save_current_document", {})
            assert not saved.is_error, saved.structured_content
            assert note.read_text(encoding="utf-8").startswith("mine # Note 1")
            # changed elsewhere again; this time the person reloads
            note.write_text("# Theirs again\n", encoding="utf-8")
            reloaded = await http.post(f"{MD}/docs/{doc_id}/external", json={"action": "reload"})
            assert reloaded.status_code == 200, reloaded.text
            text = (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
            assert text == "# Theirs again\n"
        records = _records(srv, "md_resolve_external_change")
        assert [(r.caller, r.target, r.outcome) for r in records] == [
            ("mcp:other", "note1.md", "ACCESS_DENIED"),
            ("ui", "note1.md", "ok"),
            ("ui", "note1.md", "ok"),
        ]
