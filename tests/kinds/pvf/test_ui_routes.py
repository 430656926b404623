"""The PVF UI's own web routes over the real HTTP server: the saved-script library (`/api/pvf/scripts…`: save,
list, load, overwrite only with the sha it was loaded at, delete; names that would leave the folder are refused)
and the history panel's commit diff (`/api/pvf/history/{id}`)."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
import pytest

from deskbridge.kinds.pvf.synth import synth
from deskbridge.testing import running_server

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_save_list_load_overwrite_delete(tmp_path: Path, deskbridge_home: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=30, seed=1)
    async with running_server(archive) as srv, httpx2.AsyncClient(headers=srv.ui_headers()) as http:
        base = f"{srv.base_url}/api/pvf/scripts"
        assert (await http.get(base)).json()["scripts"] == []
        saved = await http.put(f"{base}/raise.pvf.js", json={"source": "pvf.log(1);\n"})
        assert saved.status_code == 200 and saved.json()["created"] is True
        on_disk = deskbridge_home / "config" / "pvf-scripts" / "raise.pvf.js"
        assert on_disk.read_text("utf-8") == "pvf.log(1);\n"
        listed = (await http.get(base)).json()["scripts"]
        assert [s["name"] for s in listed] == ["raise.pvf.js"]
        loaded = (await http.get(f"{base}/raise.pvf.js")).json()
        assert loaded["source"] == "pvf.log(1);\n"
        # another tab saved meanwhile: a save with the old sha is refused, nothing is overwritten
        other = await http.put(f"{base}/raise.pvf.js", json={"source": "pvf.log(2);\n"})
        assert other.status_code == 200
        stale = await http.put(
            f"{base}/raise.pvf.js", json={"source": "pvf.log(3);\n", "expectedSha256": loaded["sha256"]}
        )
        assert stale.status_code == 409 and stale.json()["error"]["code"] == "TARGET_CHANGED"
        assert on_disk.read_text("utf-8") == "pvf.log(2);\n"
        deleted = await http.delete(f"{base}/raise.pvf.js")
        assert deleted.status_code == 200 and not on_disk.exists()
        missing = await http.get(f"{base}/raise.pvf.js")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"


@pytest.mark.security
@pytest.mark.parametrize("name", ["..%2F..%2Fsecret.pvf.js", ".hidden.pvf.js", "x.js", "a%00b.pvf.js"])
async def test_names_that_leave_the_folder_are_refused(
    tmp_path: Path, deskbridge_home: Path, name: str
) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=30, seed=1)
    async with running_server(archive) as srv, httpx2.AsyncClient(headers=srv.ui_headers()) as http:
        r = await http.put(f"{srv.base_url}/api/pvf/scripts/{name}", json={"source": "x"})
        assert r.status_code in (400, 404), r.text
        if r.status_code == 400:
            assert r.json()["error"]["code"] == "INVALID_ARGUMENT"
    assert not list(deskbridge_home.rglob("secret.pvf.js"))
    assert not (deskbridge_home / "config" / "pvf-scripts").exists()


async def test_the_library_needs_the_ui_secret(tmp_path: Path, deskbridge_home: Path) -> None:
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=30, seed=1)
    async with running_server(archive) as srv, httpx2.AsyncClient() as http:
        r = await http.put(f"{srv.base_url}/api/pvf/scripts/a.pvf.js", json={"source": "x"})
        assert r.status_code == 401
    assert not (deskbridge_home / "config" / "pvf-scripts").exists()


async def test_the_commit_diff_route_answers_unknown_ids_and_workspaces(tmp_path: Path) -> None:
    # The history panel's diff route (GET /api/pvf/history/{id}): the page's happy path is in
    # tests/e2e/pvf_history_settings_browser_test.py; here the answers to a wrong commit or workspace.
    archive = tmp_path / "Script.pvf"
    synth(archive, family="classic", files=30, seed=1)
    async with running_server(archive) as srv, httpx2.AsyncClient(headers=srv.ui_headers()) as http:
        async with srv.client() as client:
            for _ in range(200):
                info = (await client.call_tool("pvf_workspace_info", {})).structured_content
                if info["open"] and info["lifecycle"] is None:
                    break
                await anyio.sleep(0.05)
        base = f"{srv.base_url}/api/pvf/history"
        unknown = await http.get(f"{base}/0123456789ab", params={"workspaceId": info["workspaceId"]})
        assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "NOT_FOUND"
        assert "pvf_history" in unknown.json()["error"]["hint"]
        stale = await http.get(f"{base}/0123456789ab", params={"workspaceId": "ws-gone"})
        assert stale.json()["error"]["code"] == "STALE_WORKSPACE"
