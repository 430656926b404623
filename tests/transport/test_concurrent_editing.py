"""REL-CONC over the real transports: a browser client (collab push) and two MCP clients edit one document at the
same time, in randomised interleavings. Every accepted edit must survive; every refused one must change nothing.

An MCP edit based on an older revision is rebased over the changes made since when its own range is untouched
(so an agent appending while the person types is not refused needlessly); when the range itself changed it is
refused with STALE_WORKSPACE.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import httpx2
import pytest

from deskbridge.testing import RunningServer, running_server

pytestmark = pytest.mark.anyio

ROUNDS = 12


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


async def browser(srv: RunningServer, doc_id: str, rng: random.Random, accepted: list[str]) -> None:
    """Types tokens at the end, the way the editor pushes: against its version, pulling again when behind."""
    base = f"{srv.base_url}/api/markdown/docs/{doc_id}"
    async with httpx2.AsyncClient(headers=srv.ui_headers()) as http:
        for i in range(ROUNDS):
            token = f"[ui{i}]"
            while True:
                doc = (await http.get(base)).json()
                await asyncio.sleep(rng.random() * 0.01)
                text = doc["markdown"] if "markdown" in doc else doc["text"]
                change = [utf16_len(text), [0, token]]
                r = await http.post(
                    f"{base}/push",
                    json={"version": doc["version"], "updates": [{"clientID": "ui-test", "changes": change}]},
                )
                if r.status_code == 200:
                    accepted.append(token)
                    break
                assert r.status_code == 409, r.text


async def agent(
    srv: RunningServer, name: str, rng: random.Random, accepted: list[str], refused: list[str]
) -> None:
    """Appends tokens with md_insert_text against the revision it read; on STALE_WORKSPACE reads again."""
    async with srv.client() as client:
        for i in range(ROUNDS):
            token = f"[{name}{i}]"
            while True:
                doc = (await client.call_tool("md_get_current_document", {})).structured_content
                await asyncio.sleep(rng.random() * 0.01)
                result = await client.call_tool(
                    "md_insert_text",
                    {"text": token, "offset": len(doc["markdown"]), "expectedRevision": doc["revision"]},
                )
                if not result.is_error:
                    accepted.append(token)
                    break
                assert result.structured_content["code"] == "STALE_WORKSPACE", result.structured_content
                refused.append(token)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_no_lost_update_between_a_browser_and_two_agents(tmp_path: Path, seed: int) -> None:
    (tmp_path / "README.md").write_text("start:", "utf-8")
    async with running_server(tmp_path) as srv:
        srv.app.update_settings({"require_approval": False})
        async with srv.client() as client:
            doc_id = (await client.call_tool("md_get_current_document", {})).structured_content["docId"]
        rng = random.Random(seed)
        accepted: list[str] = []
        refused: list[str] = []
        await asyncio.gather(
            browser(srv, doc_id, random.Random(rng.random()), accepted),
            agent(srv, "a", random.Random(rng.random()), accepted, refused),
            agent(srv, "b", random.Random(rng.random()), accepted, refused),
        )
        async with srv.client() as client:
            final = (await client.call_tool("md_get_current_document", {})).structured_content["markdown"]
    assert len(accepted) == 3 * ROUNDS
    for token in accepted:
        assert final.count(token) == 1, f"{token} lost or duplicated in {final!r}"
    assert final.startswith("start:")
    assert len(final) == len("start:") + sum(len(t) for t in accepted)


async def test_an_agent_edit_of_text_the_person_just_changed_is_refused(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("start:abc", "utf-8")
    async with running_server(tmp_path) as srv:
        srv.app.update_settings({"require_approval": False})
        async with srv.client() as client, httpx2.AsyncClient(headers=srv.ui_headers()) as http:
            before = (await client.call_tool("md_get_current_document", {})).structured_content
            base = f"{srv.base_url}/api/markdown/docs/{before['docId']}"
            doc = (await http.get(base)).json()
            typed = await http.post(
                f"{base}/push",
                json={
                    "version": doc["version"],
                    "updates": [{"clientID": "ui-test", "changes": [6, [3, "xyz"]]}],
                },
            )
            assert typed.status_code == 200
            late = await client.call_tool(
                "md_apply_text_edit",
                {
                    "startOffset": 6,
                    "length": 3,
                    "replacement": "AI",
                    "expectedText": "abc",
                    "expectedRevision": before["revision"],
                },
            )
            assert late.is_error
            assert late.structured_content["code"] in ("STALE_WORKSPACE", "EXPECTED_TEXT_MISMATCH")
            after = (await client.call_tool("md_get_current_document", {})).structured_content
            assert after["markdown"] == "start:xyz"
