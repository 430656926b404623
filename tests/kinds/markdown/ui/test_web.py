"""The editor's JSON API as the browser uses it, on the real server (platform middleware and UI secret included):
load, push/pull, preview, selection, the draft barrier, save, UI state."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2
import pytest

from deskbridge.core.errors import ErrorCode

from .harness import make_bench, served

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def bench(tmp_path: Path):
    return make_bench(tmp_path / "notes", require_approval=False)


@pytest.fixture
async def http(bench):
    async with served(bench), httpx2.AsyncClient(base_url=bench.url, headers=bench.ui_headers()) as client:
        yield client


MD = "/api/markdown"


async def open_doc(http) -> dict:
    docs = (await http.get(f"{MD}/docs")).json()["docs"]
    return (await http.get(f"{MD}/docs/{docs[0]['docId']}")).json()


async def test_the_editor_loads_the_open_document_and_lists_the_folder(http):
    doc = await open_doc(http)
    assert doc["text"].startswith("# Field notes")
    assert doc["version"] == 0 and doc["dirty"] is False
    files = (await http.get(f"{MD}/files")).json()
    assert [f["path"] for f in files["files"]] == ["ideas.md", "notes.md"]


async def test_a_push_is_accepted_then_pulled_back_by_every_editor(http, bench):
    doc = await open_doc(http)
    length = len(doc["text"])  # ASCII + BMP only: UTF-16 length equals len()
    changes = [[0, "Hello ", ""], length]  # insert "Hello \n" at the start
    r = await http.post(
        f"{MD}/docs/{doc['docId']}/push",
        json={"version": 0, "updates": [{"clientID": "tab-a", "changes": changes}]},
    )
    assert r.status_code == 200 and r.json() == {"ok": True, "version": 1}
    pulled = (await http.get(f"{MD}/docs/{doc['docId']}/pull", params={"version": 0, "wait": 0})).json()
    assert pulled["updates"] == [{"clientID": "tab-a", "changes": changes}]
    assert bench.service.read(doc["docId"])["text"].startswith("Hello \n# Field notes")


async def test_a_push_on_an_old_version_is_409_with_the_current_version(http):
    doc = await open_doc(http)
    n = len(doc["text"])
    ok = await http.post(
        f"{MD}/docs/{doc['docId']}/push",
        json={"version": 0, "updates": [{"clientID": "a", "changes": [[0, "x"], n]}]},
    )
    assert ok.status_code == 200
    stale = await http.post(
        f"{MD}/docs/{doc['docId']}/push",
        json={"version": 0, "updates": [{"clientID": "b", "changes": [[0, "y"], n]}]},
    )
    assert stale.status_code == 409
    assert stale.json()["version"] == 1


async def test_a_malformed_change_set_is_a_400_and_changes_nothing(http, bench):
    doc = await open_doc(http)
    r = await http.post(
        f"{MD}/docs/{doc['docId']}/push", json={"version": 0, "updates": [{"clientID": "a", "changes": [5]}]}
    )
    assert r.status_code == 400
    assert r.json()["error"]["code"] == ErrorCode.INVALID_ARGUMENT
    assert bench.service.read(doc["docId"])["version"] == 0


async def test_browser_updates_cannot_pretend_to_be_an_ai(http):
    doc = await open_doc(http)
    r = await http.post(
        f"{MD}/docs/{doc['docId']}/push",
        json={"version": 0, "updates": [{"clientID": "mcp:evil", "changes": [[0, "x"], len(doc["text"])]}]},
    )
    assert r.status_code == 403


async def test_a_long_poll_returns_as_soon_as_an_ai_edit_lands(http, bench):
    doc = await open_doc(http)
    pull = asyncio.create_task(http.get(f"{MD}/docs/{doc['docId']}/pull", params={"version": 0}))
    await asyncio.sleep(0.05)
    assert not pull.done()
    await bench.ai_edit("the same", "one shared")
    body = (await asyncio.wait_for(pull, 5)).json()
    assert [u["clientID"] for u in body["updates"]] == ["mcp:pytest"]
    assert body["version"] == 1


async def test_the_preview_is_the_servers_html_with_math_left_for_katex(http):
    doc = await open_doc(http)
    body = (await http.get(f"{MD}/docs/{doc['docId']}/preview")).json()
    assert body["version"] == 0
    assert "<h1" in body["html"] and "Field notes" in body["html"]
    assert 'class="math inline"' in body["html"] and 'class="math block"' in body["html"]
    assert "<table" in body["html"] and "checkbox" in body["html"]


async def test_the_reported_selection_is_what_md_get_selection_reads(http, bench):
    doc = await open_doc(http)
    start = doc["text"].index("Deskbridge")
    r = await http.post(
        f"{MD}/docs/{doc['docId']}/selection",
        json={"anchor": start, "head": start + len("Deskbridge"), "version": 0},
    )
    assert r.status_code == 200
    assert bench.service.selection(doc["docId"])["text"] == "Deskbridge"


async def _prepare_events(http, editor: str, seen: asyncio.Queue) -> None:
    """An editor's event stream (it is registered with the draft barrier while this is open)."""
    async with http.stream("GET", f"/api/events?editor={editor}", timeout=None) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                if data.get("event") == "prepare":
                    await seen.put(data)


async def test_a_save_asks_every_open_editor_and_holds_while_one_has_drafts(http, bench, tmp_path):
    """The core draft barrier over the platform's one wire protocol: registered while the stream is open,
    `prepare` on topic ui, `POST /api/editors/ack`; a draft refuses the save, no answer does too."""
    doc = await open_doc(http)
    n = len(doc["text"])
    await http.post(
        f"{MD}/docs/{doc['docId']}/push",
        json={"version": 0, "updates": [{"clientID": "tab", "changes": [[0, "A"], n]}]},
    )
    prepares: asyncio.Queue = asyncio.Queue()
    listener = asyncio.create_task(_prepare_events(http, "tab", prepares))
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while bench.service.drafts.clients() != ["tab"]:
            assert asyncio.get_running_loop().time() < deadline, "the editor's stream never registered"
            await asyncio.sleep(0.02)

        async def save_with(answer: bool):
            save = asyncio.create_task(http.post(f"{MD}/docs/{doc['docId']}/save"))
            prepare = await asyncio.wait_for(prepares.get(), 10)
            assert prepare["docId"] == doc["docId"] and prepare["clients"] == ["tab"]
            assert not save.done()  # the barrier waits for the editor's answer
            ack = {"operationId": prepare["operationId"], "clientId": "tab", "hasDrafts": answer}
            assert (await http.post("/api/editors/ack", json=ack)).status_code == 200
            return await asyncio.wait_for(save, 10)

        held = await save_with(True)
        assert held.status_code != 200 and held.json()["error"]["code"] == "UI_DRAFT_PENDING"
        assert (tmp_path / "notes" / "notes.md").read_text("utf-8").startswith("# Field notes")
        r = await save_with(False)
        assert r.status_code == 200 and r.json()["dirty"] is False
        assert (tmp_path / "notes" / "notes.md").read_text("utf-8").startswith("A# Field notes")
        # an editor that does not answer refuses the save (it never passes on silence)
        bench.service.drafts.timeout_s = 0.2
        silent = await http.post(f"{MD}/docs/{doc['docId']}/save")
        assert silent.json()["error"]["code"] == "UI_NOT_READY"
    finally:
        listener.cancel()
    # the stream closed: the editor is no longer asked, and a save goes through at once
    deadline = asyncio.get_running_loop().time() + 10
    while bench.service.drafts.clients():
        assert asyncio.get_running_loop().time() < deadline, "a closed stream kept its editor registered"
        await asyncio.sleep(0.02)
    assert (await http.post(f"{MD}/docs/{doc['docId']}/save")).status_code == 200


async def test_external_change_reload_takes_the_disk_text(http, bench, tmp_path):
    doc = await open_doc(http)
    (tmp_path / "notes" / "notes.md").write_text("# Changed elsewhere\n", encoding="utf-8")
    assert bench.service.check_external_changes() == [doc["docId"]]
    assert (await http.get(f"{MD}/docs/{doc['docId']}")).json()["externalChange"] is True
    r = await http.post(f"{MD}/docs/{doc['docId']}/external", json={"action": "reload"})
    assert r.status_code == 200 and r.json()["externalChange"] is False
    assert bench.service.read(doc["docId"])["text"] == "# Changed elsewhere\n"


async def test_external_change_action_must_be_reload_or_keep(http):
    doc = await open_doc(http)
    r = await http.post(f"{MD}/docs/{doc['docId']}/external", json={"action": "merge"})
    assert r.status_code == 400 and r.json()["error"]["data"]["allowed"] == ["reload", "keep"]


async def test_opening_another_file_makes_it_current(http):
    r = await http.post(f"{MD}/open", json={"path": "ideas.md"})
    assert r.status_code == 200
    body = r.json()
    assert body["fileName"] == "ideas.md" and body["current"] is True
    docs = (await http.get(f"{MD}/docs")).json()
    assert docs["current"] == body["docId"]


async def test_opening_outside_the_folder_is_refused(http):
    r = await http.post(f"{MD}/open", json={"path": "../../etc/passwd"})
    assert r.status_code in (400, 403, 404)
    assert r.json()["error"]["code"] in (
        ErrorCode.ACCESS_DENIED,
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.NOT_FOUND,
    )


async def test_ui_state_changes_are_validated_and_published(http, bench):
    sub = bench.bus.subscribe("ui")
    r = await http.post(f"{MD}/ui", json={"theme": "dusk", "isPreviewVisible": False})
    assert r.status_code == 200 and r.json()["theme"] == "dusk" and r.json()["isPreviewVisible"] is False
    event = await sub.get(timeout=1)
    assert event.data["kind"] == "state" and event.data["changed"] == ["isPreviewVisible", "theme"]
    bad = await http.post(f"{MD}/ui", json={"theme": "neon"})
    assert bad.status_code == 400 and "dusk" in bad.json()["error"]["data"]["allowed"]
    assert (await http.get(f"{MD}/ui")).json()["theme"] == "dusk"


async def test_export_downloads_with_the_documents_name(http, bench):
    (bench.root / "中文笔记.md").write_text("# 标题\n\nBody $x^2$\n", encoding="utf-8")
    opened = (await http.post(f"{MD}/open", json={"path": "中文笔记.md"})).json()
    url = f"{MD}/docs/{opened['docId']}/export"
    intent = {"x-deskbridge-request": "export"}
    # a GET (what a document's <img> would send) and a POST without the editor's header start nothing
    assert (await http.get(url, params={"format": "HTML"})).status_code == 405
    assert (await http.post(url, json={"format": "HTML"})).status_code == 403
    r = await http.post(url, json={"format": "HTML"}, headers=intent)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "filename*=UTF-8''%E4%B8%AD%E6%96%87%E7%AC%94%E8%AE%B0.html" in r.headers["content-disposition"]
    page = r.content.decode("utf-8")
    assert "<h1" in page and "标题" in page and "<math" in page  # self-contained: math as MathML
    bad = await http.post(url, json={"format": "exe"}, headers=intent)
    assert bad.status_code == 400 and bad.json()["error"]["data"]["allowed"] == ["html", "pdf", "png", "docx"]


async def test_rich_html_for_a_platform_has_inline_styles(http):
    doc = await open_doc(http)
    r = await http.get(f"{MD}/docs/{doc['docId']}/rich", params={"target": "wechat"})
    body = r.json()
    assert r.status_code == 200 and body["target"] == "wechat"
    assert 'style="' in body["html"] and "Field notes" in body["html"]
    bad = await http.get(f"{MD}/docs/{doc['docId']}/rich", params={"target": "weibo"})
    assert bad.status_code == 400


async def test_a_bad_body_is_a_clear_400(http):
    r = await http.post(f"{MD}/ui", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 400 and "not JSON" in r.json()["error"]["message"]
    doc = await open_doc(http)
    r = await http.get(f"{MD}/docs/{doc['docId']}/pull", params={"version": "x"})
    assert r.status_code == 400
    assert json.loads(r.text)["error"]["code"] == ErrorCode.INVALID_ARGUMENT


async def test_an_unknown_document_is_404(http):
    r = await http.get(f"{MD}/docs/nope")
    assert r.status_code == 404


async def test_a_large_document_is_previewed_a_window_of_whole_blocks_at_a_time(tmp_path):
    lines = []
    for n in range(6000):
        lines += [f"## Part {n}", "", "text " * 8, ""]
    lines[4001:4001] = ["```", "code inside a fence", "```"]
    bench = make_bench(tmp_path / "big", text="\n".join(lines) + "\n", require_approval=False)
    async with served(bench), httpx2.AsyncClient(base_url=bench.url, headers=bench.ui_headers()) as http:
        doc = await open_doc(http)
        whole = (await http.get(f"{MD}/docs/{doc['docId']}/preview")).json()
        assert whole["window"]["from"] == 1 and whole["window"]["total"] == len(lines) + 1
        assert whole["window"]["to"] < 2000
        part = (await http.get(f"{MD}/docs/{doc['docId']}/preview", params={"from": 4003, "to": 4100})).json()
        assert part["window"]["from"] == 4002  # moved back to the fence's opening line
        assert "<pre" in part["html"] and "code inside a fence" in part["html"]
        assert (
            'data-source-line="1"' in part["html"]
        )  # lines are relative to the window; the browser shifts them


def test_block_window_keeps_paragraphs_and_fences_whole():
    from deskbridge.kinds.markdown.views import block_window

    lines = ["para one", "still para one", "", "```", "a", "", "b", "```", "", "last"]
    assert block_window(lines, 2, 2) == (1, 3)
    assert block_window(lines, 6, 6) == (4, 9)  # inside the fence: opening to closing (+ blank)
    assert block_window(lines, 10, 10) == (10, 10)


async def test_local_images_are_served_for_the_preview_and_nothing_else(http, bench):
    (bench.root / "img").mkdir()
    png = b"\x89PNG\r\n\x1a\n" + b"0" * 16
    (bench.root / "img" / "pic.png").write_bytes(png)
    (bench.root / "img" / "x.svg").write_text(
        "<svg xmlns='http://www.w3.org/2000/svg'><script>1</script></svg>"
    )
    doc = await open_doc(http)
    base = f"{MD}/docs/{doc['docId']}/asset"
    r = await http.get(f"{base}/img/pic.png")
    assert r.status_code == 200 and r.content == png and r.headers["content-type"] == "image/png"
    svg = await http.get(f"{base}/img/x.svg")
    assert "default-src 'none'" in svg.headers["content-security-policy"]  # its script can never run
    assert (await http.get(f"{base}/notes.md")).status_code == 403  # not an image
    assert (await http.get(f"{base}/img/missing.png")).status_code == 404
    outside = tmp_outside = bench.root.parent / "secret.png"
    tmp_outside.write_bytes(png)
    assert (await http.get(f"{base}/..%2Fsecret.png")).status_code in (403, 404)
    assert (await http.get(f"{base}/{outside}")).status_code in (403, 404)


async def test_the_settings_panel_learns_the_default_approval_rules(http):
    body = (await http.get(f"{MD}/approval-rules")).json()
    assert body["defaults"]["edit"] is True and body["defaults"]["save"] is False
    assert body["enabled"] is False  # the bench starts with approvals off


async def test_a_documents_image_or_link_gets_nothing_from_the_editors_routes_but_its_pictures(http, bench):
    """Requests a browser makes for an element of a page (Fetch Metadata `Sec-Fetch-Dest`) are refused, so a
    document's `<img src=…/pull>` cannot hold the browser's connections to this server (25 s each) nor read or
    start anything; the editor's own fetches (`empty`) and the document's pictures (`image`) are answered."""
    (bench.root / "pic.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 16)
    doc = await open_doc(http)
    base = f"{MD}/docs/{doc['docId']}"
    for dest in ("image", "iframe", "document", "script", "style"):
        pulled = await http.get(f"{base}/pull", params={"version": 0}, headers={"sec-fetch-dest": dest})
        assert pulled.status_code == 403 and pulled.json()["error"]["code"] == "ACCESS_DENIED", dest
        assert (await http.get(f"{base}/preview", headers={"sec-fetch-dest": dest})).status_code == 403
    own = await http.get(
        f"{base}/pull", params={"version": 0, "wait": 0}, headers={"sec-fetch-dest": "empty"}
    )
    assert own.status_code == 200
    for dest in ("image", "empty"):
        pic = await http.get(f"{base}/asset/pic.png", headers={"sec-fetch-dest": dest})
        assert pic.status_code == 200 and pic.headers["content-type"] == "image/png", dest
    for dest in ("document", "iframe", "object", "embed"):  # a picture is never a page (an SVG could be one)
        assert (await http.get(f"{base}/asset/pic.png", headers={"sec-fetch-dest": dest})).status_code == 403
