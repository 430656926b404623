"""`deskbridge bundle`: the .mcpb Claude Desktop installs (MCPB manifest 0.4, `uv` server type) really starts
the bridge, and the committed `server.json` for the MCP Registry matches this version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from deskbridge.integrations.bundle import manifest, readme_names_registry, server_json

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    out = tmp_path / "deskbridge.mcpb"
    proc = subprocess.run(
        [sys.executable, "-m", "deskbridge", "bundle", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr
    return out


def test_the_manifest_has_what_the_spec_requires(built: Path) -> None:
    with zipfile.ZipFile(built) as zf:
        names = set(zf.namelist())
        data = json.loads(zf.read("manifest.json"))
        pyproject = zf.read("pyproject.toml").decode()
    for field in ("manifest_version", "name", "version", "description", "author", "server"):
        assert field in data, field
    assert data["manifest_version"] == "0.4" and data["server"]["type"] == "uv"
    assert data["server"]["entry_point"] in names and "src/deskbridge/cli.py" in names
    assert not [
        n for n in names if n.startswith(("server/lib/", "server/venv/", ".venv/")) or "__pycache__" in n
    ]
    assert "${user_config.project}" in data["server"]["mcp_config"]["args"]
    assert data["user_config"]["project"]["type"] == "directory"
    assert '"mcp' in pyproject and "playwright" not in pyproject  # the lean install, no export extra
    assert data == manifest()


@pytest.mark.anyio
async def test_the_bundle_starts_the_bridge(built: Path, tmp_path: Path) -> None:
    unpacked = tmp_path / "installed"
    with zipfile.ZipFile(built) as zf:
        zf.extractall(unpacked)
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("from the bundle", "utf-8")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(unpacked / "server.py"), "--project", str(ws), "--kind", "probe"],
        env=env,
        cwd=str(tmp_path),
    )
    async with Client(params) as client:
        result = await client.call_tool("probe_read_file", {"path": "a.txt"})
    assert result.structured_content["text"] == "from the bundle"


def test_committed_server_json_matches_this_version() -> None:
    committed = json.loads((ROOT / "server.json").read_text("utf-8"))
    assert committed == server_json(), "run `deskbridge bundle --server-json server.json`"
    package = committed["packages"][0]
    assert package["registryType"] == "pypi" and package["transport"] == {"type": "stdio"}
    assert len(committed["description"]) <= 100
    assert readme_names_registry((ROOT / "README.md").read_text("utf-8"), committed["name"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
