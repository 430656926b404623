"""The editor's file tools (kinds/markdown/file_tools.py) over the real server, called the way the page calls
them (POST /api/tools/{name}: App.invoke as caller `ui`, audited), and by an MCP client (the person is asked)."""

from __future__ import annotations

import base64
from pathlib import Path

import httpx2
import pytest

from .harness import make_bench, served

pytestmark = pytest.mark.anyio

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    # Send2Trash reads XDG_DATA_HOME once, when first imported (send2trash/plat_other.py): another test may have
    # imported it already, so point its module-level trash at this home too.
    import send2trash.plat_other as trash

    data = str(home / ".local" / "share")
    monkeypatch.setattr(trash, "XDG_DATA_HOME", data.encode())
    monkeypatch.setattr(trash, "HOMETRASH", f"{data}/Trash")
    monkeypatch.setattr(trash, "HOMETRASH_B", f"{data}/Trash".encode())
    return home


@pytest.fixture
def bench(tmp_path: Path):
    return make_bench(tmp_path / "notes", require_approval=True)


@pytest.fixture
async def http(bench):
    async with served(bench), httpx2.AsyncClient(base_url=bench.url, headers=bench.ui_headers()) as client:
        yield client


async def tool(http, name: str, **arguments):
    return await http.post(f"/api/tools/{name}", json={"arguments": arguments})


async def test_a_pasted_image_is_saved_beside_the_document_under_a_new_name(http, bench):
    data = base64.b64encode(PNG).decode()
    first = await tool(http, "md_save_image", dataBase64=data, fileName="my shot.png")
    assert first.status_code == 200, first.text
    assert first.json() == {"path": "my-shot.png", "markdown": "![my-shot](my-shot.png)"}
    assert (bench.root / "my-shot.png").read_bytes() == PNG
    second = (await tool(http, "md_save_image", dataBase64=data, fileName="my shot.png")).json()
    assert second["path"] == "my-shot-2.png"  # never over an existing file
    not_image = await tool(http, "md_save_image", dataBase64=base64.b64encode(b"<svg onload=x>").decode())
    assert not_image.status_code == 400 and not_image.json()["error"]["code"] == "INVALID_ARGUMENT"
    records = [r for r in bench.audit.recent() if r.tool == "md_save_image"]
    assert records and records[0].caller == "ui"  # audited once, as the person's call


async def test_new_rename_close_and_delete_to_the_trash(http, bench, home):
    created = await tool(http, "md_create_file", path="drafts.md")
    assert created.status_code == 200 and (bench.root / "drafts.md").read_text("utf-8") == "# drafts\n"
    assert (await tool(http, "md_create_file", path="drafts.md")).json()["error"]["code"] == "TARGET_EXISTS"
    renamed = await tool(http, "md_rename_file", path="drafts.md", newPath="plans.md")
    assert renamed.json()["path"] == "plans.md" and not (bench.root / "drafts.md").exists()
    taken = await tool(http, "md_rename_file", path="plans.md", newPath="ideas.md")
    assert taken.json()["error"]["code"] == "TARGET_EXISTS" and (bench.root / "plans.md").exists()
    # an open document is neither renamed nor deleted under the editor's feet
    opened = (await http.post("/api/markdown/open", json={"path": "plans.md"})).json()
    assert (await tool(http, "md_delete_file", path="plans.md")).json()["error"]["code"] == "INVALID_ARGUMENT"
    closed = await tool(http, "md_close_document", docId=opened["docId"])
    assert closed.json()["closed"] is True
    deleted = await tool(http, "md_delete_file", path="plans.md")
    assert deleted.json() == {"path": "plans.md", "trashed": True}
    assert not (bench.root / "plans.md").exists()
    trash = home / ".local" / "share" / "Trash"
    assert (trash / "files" / "plans.md").read_text("utf-8") == "# drafts\n"  # in the trash, not unlinked
    assert (trash / "info" / "plans.md.trashinfo").is_file()


async def test_an_ai_delete_asks_the_person_and_the_tools_stay_out_of_tools_list(http, bench, home):
    async with bench.srv.client() as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert not names & {"md_save_image", "md_create_file", "md_rename_file", "md_delete_file"}
        result = await client.call_tool("md_delete_file", {"path": "ideas.md"})
    # nobody could approve (no editor page, the client cannot elicit): declined, the file stays
    assert result.is_error and result.structured_content["code"] == "APPROVAL_DECLINED"
    assert (bench.root / "ideas.md").exists()


async def test_recent_files_are_kept_newest_first_and_an_ai_sees_only_its_scope(http, bench, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "private.md").write_text("# private\n", "utf-8")
    docs = (await http.get("/api/markdown/docs")).json()
    await tool(http, "md_remember_recent", docId=docs["current"])
    ideas = (await http.post("/api/markdown/open", json={"path": "ideas.md"})).json()
    await tool(http, "md_remember_recent", docId=ideas["docId"])
    private = (await http.post("/api/markdown/open", json={"path": str(outside / "private.md")})).json()
    await tool(http, "md_remember_recent", docId=private["docId"])
    listed = (await tool(http, "md_recent_files")).json()["files"]
    assert [f["name"] for f in listed] == ["private.md", "ideas.md", "notes.md"]
    assert [f["inWorkspace"] for f in listed] == [False, True, True]
    # kept between runs, owner-only
    saved = bench.app.dirs.config / "markdown-recent.json"
    assert saved.stat().st_mode & 0o077 == 0
    async with bench.srv.client() as client:
        seen = (await client.call_tool("md_recent_files", {})).structured_content["files"]
    assert [f["name"] for f in seen] == ["ideas.md", "notes.md"]  # not the folder outside its scope
