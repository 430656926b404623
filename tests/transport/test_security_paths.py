"""REL-ATTACK, files and approvals over the real transport (issue 8): error data leaks, FIFOs, who approved.

* errors name the path as the caller gave it — never where a link leads (`/proc/self/environ`) — and give the
  same answer whether or not something exists outside the roots (probe kind and a markdown workspace);
* a FIFO in the workspace is refused at once instead of hanging the server;
* `approvals_via_client`: with it on, a client's elicitation may approve; off, only the browser can; the audit
  and the tool result say which path approved.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pytest

from deskbridge.testing import running_server

pytestmark = [pytest.mark.anyio, pytest.mark.security]


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A workspace with links leading out of it (to an existing and a missing file, to /proc) and a FIFO."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    (ws / "README.md").write_text("# Notes\n\nHello world.\n", "utf-8")
    (outside / "secret.md").write_text("top secret\n", "utf-8")
    os.symlink("/proc/self/environ", ws / "env.md")
    os.symlink(outside / "secret.md", ws / "exists.md")
    os.symlink(outside / "missing.md", ws / "missing.md")
    os.symlink(outside, ws / "outdir")
    os.mkfifo(ws / "fifo.md")
    return ws, outside


# (a path to an outside file that exists, the same path to one that does not)
PAIRS = [
    ("exists.md", "missing.md"),
    ("outdir/secret.md", "outdir/nope.md"),
    ("{outside}/secret.md", "{outside}/nope.md"),
]


def _shape(error: dict[str, Any], given: str) -> str:
    return json.dumps(error, sort_keys=True).replace(json.dumps(given)[1:-1], "<path>")


async def _refusals(client: Any, tool: str, outside: Path) -> list[tuple[str, str, dict[str, Any]]]:
    seen = []
    for pair in PAIRS:
        for raw in pair:
            given = raw.format(outside=outside)
            with anyio.fail_after(10):
                result = await client.call_tool(tool, {"path": given})
            assert result.is_error, (tool, given, result.structured_content)
            seen.append((raw, given, result.structured_content))
    return seen


def _assert_no_leak(refusals: list[tuple[str, str, dict[str, Any]]], outside: Path, pid: int) -> None:
    by_raw = {raw: (given, error) for raw, given, error in refusals}
    for exists, missing in PAIRS:
        # The same answer whether or not the outside file exists.
        assert _shape(by_raw[exists][1], by_raw[exists][0]) == _shape(by_raw[missing][1], by_raw[missing][0])
    for _raw, given, error in refusals:
        text = json.dumps(error).replace(
            json.dumps(given)[1:-1], "<path>"
        )  # what we add to the caller's words
        assert "top secret" not in text and "environ" not in text and f"/proc/{pid}" not in text
        if str(outside) not in given:  # the caller did not name the outside folder: we must not either
            assert str(outside) not in text, text


async def test_probe_errors_name_the_given_path_and_do_not_reveal_the_outside(
    layout: tuple[Path, Path],
) -> None:
    ws, outside = layout
    async with running_server(ws, kind="probe") as srv, srv.client() as client:
        refusals = await _refusals(client, "probe_read_file", outside)
        for given in ("env.md", "/proc/self/environ"):
            result = await client.call_tool("probe_read_file", {"path": given})
            refusals.append((given, given, result.structured_content))
            assert result.is_error and result.structured_content["code"] == "ACCESS_DENIED"
            assert result.structured_content["message"] == f"{given!r} is outside the allowed folders"
    _assert_no_leak(refusals, outside, os.getpid())


async def test_markdown_errors_name_the_given_path_and_do_not_reveal_the_outside(
    layout: tuple[Path, Path],
) -> None:
    ws, outside = layout
    async with running_server(ws) as srv, srv.client() as client:
        refusals = await _refusals(client, "md_open_document", outside)
        refusals += await _refusals(client, "md_save_current_document_as", outside)
        for given in ("env.md", "/proc/self/environ"):
            result = await client.call_tool("md_open_document", {"path": given})
            assert result.is_error
            refusals.append((given, given, result.structured_content))
    _assert_no_leak(refusals, outside, os.getpid())


async def test_a_fifo_is_refused_at_once_not_waited_on(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    async with running_server(ws, kind="probe") as srv, srv.client() as client:
        with anyio.fail_after(5):  # opening a FIFO for reading used to block the whole server
            result = await client.call_tool("probe_read_file", {"path": "fifo.md"})
            echo = await client.call_tool("probe_echo", {"text": "still serving"})
        assert result.is_error and result.structured_content["code"] == "ACCESS_DENIED"
        assert "not a regular file" in result.structured_content["message"]
        assert not echo.is_error


def _answer(approve: bool, seen: list[str]):
    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params.message)
        return types.ElicitResult(action="accept", content={"approve": approve})

    return callback


async def _edit(client: Any, old: str, new: str) -> Any:
    doc = await client.call_tool("md_get_current_document", {})
    return await client.call_tool(
        "md_replace_text",
        {"oldText": old, "newText": new, "expectedRevision": doc.structured_content["revision"]},
    )


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_approvals_via_client_can_be_switched_off(layout: tuple[Path, Path], mode: str) -> None:
    ws, _ = layout
    seen: list[str] = []
    async with (
        running_server(ws) as srv,
        srv.client(mode=mode, elicitation_callback=_answer(True, seen)) as client,
    ):
        assert srv.app.settings.approvals_via_client is True  # the default: the client may ask its person
        result = await _edit(client, "Hello world.", "Hello client.")
        assert not result.is_error, result.structured_content
        assert seen and result.structured_content["approval"] == {"decision": "approved", "via": "client"}
        record = [r for r in srv.app.audit.recent() if r.tool == "md_replace_text"][-1]
        assert record.approval == "approved" and record.approved_via == "client"

        async with httpx2.AsyncClient() as http:  # the person chooses "require the browser"
            r = await http.post(
                srv.base_url + "/api/settings", json={"approvals_via_client": False}, headers=srv.ui_headers()
            )
            assert r.status_code == 200 and r.json()["approvals_via_client"] is False
        asked = len(seen)
        refused = await _edit(client, "Hello client.", "Hello scripted self-approval.")
        assert len(seen) == asked, "the client was asked although approvals need the browser"
        assert refused.is_error and refused.structured_content["code"] == "APPROVAL_DECLINED"
        assert "browser" in refused.structured_content["hint"]
        doc = await client.call_tool("md_get_current_document", {})
        assert "scripted" not in doc.structured_content["markdown"]


async def test_the_browser_path_is_recorded_as_such(layout: tuple[Path, Path]) -> None:
    ws, _ = layout
    async with running_server(ws) as srv, srv.client() as client, httpx2.AsyncClient(timeout=30) as http:
        answered = anyio.Event()

        async def browser() -> None:  # a page: its event stream attaches it, it answers through the API
            async with http.stream("GET", srv.base_url + "/api/events", headers=srv.ui_headers()) as events:
                async for line in events.aiter_lines():
                    if line.startswith("data:") and '"requested"' in line:
                        request = json.loads(line[5:])["request"]
                        r = await http.post(
                            srv.base_url + f"/api/approvals/{request['id']}",
                            json={"approved": True},
                            headers=srv.ui_headers(),
                        )
                        assert r.status_code == 200
                        answered.set()
                        return

        async with anyio.create_task_group() as tg:
            tg.start_soon(browser)
            while not srv.app.approvals.ui_attached:
                await anyio.sleep(0.01)
            result = await _edit(client, "Hello world.", "Hello browser.")
            await answered.wait()
        assert not result.is_error, result.structured_content
        assert result.structured_content["approval"] == {"decision": "approved", "via": "browser"}
        record = [r for r in srv.app.audit.recent() if r.tool == "md_replace_text"][-1]
        assert record.approved_via == "browser" and record.to_dict()["approved_via"] == "browser"
