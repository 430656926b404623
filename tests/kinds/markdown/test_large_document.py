"""A large document (30,000 lines of the stress generator): every read stays under the response cap and pages."""

from __future__ import annotations

import asyncio
import json

import pytest

from deskbridge.core.limits import RESPONSE_MAX_BYTES
from deskbridge.core.tools import CallContext
from deskbridge.kinds.markdown.demo import make_stress_document
from deskbridge.kinds.markdown.service import MarkdownService
from deskbridge.kinds.markdown.tools import markdown_tools

AI = CallContext(caller="mcp:big", client_name="test")


@pytest.fixture(scope="module")
def call(tmp_path_factory):
    folder = tmp_path_factory.mktemp("big")
    (folder / "big.md").write_text(make_stress_document(30_000), encoding="utf-8")
    service = MarkdownService(folder / "big.md", approval_settings={"enabled": False})
    specs = {s.name: s for s in markdown_tools(service)}

    def invoke(name, **arguments):
        spec = specs[name]
        result = asyncio.run(spec.handler(AI, spec.args.model_validate(arguments)))
        assert len(json.dumps(result, ensure_ascii=False)) <= RESPONSE_MAX_BYTES, name
        return result

    return invoke


def test_whole_document_reads_page_by_lines(call):
    seen, start, total = 0, 1, None
    while True:
        page = call("md_get_current_document", startLine=start)
        seen += page["endLine"] - page["startLine"] + 1
        total = page["totalLines"]
        if not page["truncated"]:
            break
        start = page["nextStartLine"]
    # like the editor, a text ending in '\n' has an empty last line after it
    assert seen == total == 30_001


def test_outline_pages(call):
    first = call("md_get_document_outline")
    assert first["truncated"] and len(first["items"]) == 1000
    rest = call("md_get_document_outline", cursor=first["nextCursor"], limit=2000)
    assert rest["items"][0]["line"] > first["items"][-1]["line"]
    assert len(call("md_get_document_outline", maxLevel=1)["items"]) < first["total"]


def test_rendered_html_is_capped_and_says_so(call):
    html = call("md_get_rendered_html")
    assert html["truncated"] and html["html"].startswith("<h")


def test_edit_far_down_and_read_it_back(call):
    page = call("md_get_current_document", startLine=25_000, endLine=25_000)
    line = page["markdown"]
    rev = page["revision"]
    call(
        "md_apply_text_edit",
        startLine=25_000,
        startColumn=1,
        endLine=25_000,
        endColumn=len(line.rstrip("\n")) + 1,
        expectedText=line.rstrip("\n"),
        replacement="EDITED 😀",
        expectedRevision=rev,
    )
    assert call("md_get_current_document", startLine=25_000, endLine=25_000)["markdown"] == "EDITED 😀\n"
