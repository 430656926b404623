"""The person keeps typing while an AI edit waits for approval: the edit lands on top, or is refused — and
no character either side typed is ever lost."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.collab import Edit, edits_to_changes
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools

from .central import approved_run

AI = CallContext(caller="mcp:ai", client_name="Claude")
TEXT = "# Plan\n\nalpha beta gamma delta\n\nepsilon zeta eta theta\n"


class SlowPerson:
    """Approves after the browser has typed a little (the typing happens while the dialog is open)."""

    def __init__(self, while_deciding) -> None:
        self.while_deciding = while_deciding

    async def require(self, request, elicit=None):
        await self.while_deciding()


def browser_type(service: MarkdownService, at: int, s: str) -> None:
    doc = service.get()
    changes = edits_to_changes([Edit(at, at, s)], doc.text)
    assert service.push(doc.doc_id, doc.version, [{"clientID": "tab", "changes": changes}])["ok"]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    (tmp_path / "plan.md").write_text(TEXT, encoding="utf-8")
    return tmp_path / "plan.md"


def _tool(service, name):
    return {s.name: s for s in markdown_tools(service)}[name]


def test_typing_elsewhere_during_approval_keeps_both(path):
    service: MarkdownService

    async def type_at_top():
        browser_type(service, 0, "TOP ")

    service = MarkdownService(path, policy=SlowPerson(type_at_top))
    tool = _tool(service, "md_replace_text")
    rev = service.get().revision
    args = tool.args.model_validate({"oldText": "zeta", "newText": "ZETA", "expectedRevision": rev})
    asyncio.run(approved_run(service, tool, AI, args))
    assert service.get().text == "TOP # Plan\n\nalpha beta gamma delta\n\nepsilon ZETA eta theta\n"


def test_typing_inside_the_edited_text_during_approval_refuses_the_edit(path):
    service: MarkdownService

    async def type_inside():
        browser_type(service, service.get().text.index("zeta") + 2, "X")

    service = MarkdownService(path, policy=SlowPerson(type_inside))
    tool = _tool(service, "md_replace_text")
    args = tool.args.model_validate(
        {"oldText": "zeta", "newText": "ZETA", "expectedRevision": service.get().revision}
    )
    with pytest.raises(BridgeError) as err:
        asyncio.run(approved_run(service, tool, AI, args))
    assert err.value.code is ErrorCode.STALE_WORKSPACE
    assert err.value.data["currentText"] == "zeXta"
    assert "zeXta" in service.get().text


@pytest.mark.parametrize("seed", range(25))
def test_random_interleavings_lose_nothing(path, seed):
    rnd = random.Random(seed)
    service: MarkdownService
    typed: list[str] = []

    async def type_randomly():
        for _ in range(rnd.randint(0, 3)):
            ch = chr(0x4E00 + len(typed))  # one character nobody else writes
            browser_type(service, rnd.randint(0, len(service.get().text)), ch)
            typed.append(ch)
            await asyncio.sleep(0)

    service = MarkdownService(path, policy=SlowPerson(type_randomly))
    offset_tool = _tool(service, "md_apply_text_edit")
    replaced = []
    for word in ("alpha", "gamma", "eta", "theta"):
        doc = service.get()
        at = doc.text.find(word)
        if at == -1:
            continue
        stale_rev = doc.revision
        if rnd.random() < 0.5:
            asyncio.run(type_randomly())  # the AI acts on an older revision
        args = offset_tool.args.model_validate(
            {
                "startOffset": at,
                "length": len(word),
                "expectedText": word,
                "replacement": word.upper(),
                "expectedRevision": stale_rev,
            }
        )
        try:
            asyncio.run(approved_run(service, offset_tool, AI, args))
            replaced.append(word)
        except BridgeError as exc:
            assert exc.code in (ErrorCode.STALE_WORKSPACE, ErrorCode.EXPECTED_TEXT_MISMATCH)
    text = service.get().text
    for ch in typed:
        assert ch in text
    without_typing = "".join(c for c in text if c not in typed)
    for word in replaced:
        assert word.upper() in without_typing  # rebased onto the right words, not misplaced
    assert (
        without_typing.replace("ALPHA", "alpha")
        .replace("GAMMA", "gamma")
        .replace("ETA", "eta")
        .replace("THeta", "theta")
        .replace("THETA", "theta")
        == TEXT
    )
