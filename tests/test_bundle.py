"""`deskbridge bundle`: the .mcpb Claude Desktop installs (MCPB manifest 0.4, `uv` server type) really starts
the bridge, and the committed `server.json` for the MCP Registry matches this version."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from deskbridge.integrations.bundle import (
    REGISTRY_NAME_RE,
    REPOSITORY,
    manifest,
    readme_names_registry,
    registry_name,
    server_json,
)

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


def test_registry_name_is_the_github_namespace_of_the_repository() -> None:
    # The registry lets a GitHub-authenticated publisher use only io.github.<owner>/* names
    # (modelcontextprotocol.io/registry/authentication); the owner is the one in the package's repository URL.
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["urls"]
    assert urls["Repository"] == REPOSITORY
    owner, repo = REPOSITORY.removeprefix("https://github.com/").split("/")
    committed = json.loads((ROOT / "server.json").read_text("utf-8"))
    assert committed["name"] == f"io.github.{owner}/{repo}" == registry_name(urls["Repository"])
    assert REGISTRY_NAME_RE.match(committed["name"])
    assert committed["repository"] == {"url": REPOSITORY, "source": "github"}
    assert registry_name("https://github.com/Some-Org/my.server.git") == "io.github.Some-Org/my.server"
    for wrong in (
        "https://gitlab.com/a/b",
        "https://github.com/a",
        "http://github.com/a/b",
        "https://github.com/a/b/c",
    ):
        with pytest.raises(ValueError):
            registry_name(wrong)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
