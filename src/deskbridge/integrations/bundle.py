"""`deskbridge bundle`: an MCP Bundle (`.mcpb`) for one-click install in Claude Desktop, and `server.json` for the
MCP Registry.

The bundle uses the MCPB `uv` server type (manifest 0.4, modelcontextprotocol/mcpb MANIFEST.md): it carries
deskbridge's source and a `pyproject.toml` with its dependencies, and the host installs them with uv — no
Python of the person's own is needed. The person picks the workspace folder at install (`user_config.project`);
the bundle runs `deskbridge mcp --project <that folder>`, the same bridge `deskbridge setup` configures.
"""

from __future__ import annotations

import json
import re
import zipfile
from importlib import metadata
from pathlib import Path
from typing import Any, Final

from deskbridge import __version__

MANIFEST_VERSION: Final = "0.4"
REPOSITORY: Final = "https://github.com/deskbridge/deskbridge"
"""Where deskbridge's source is published — the same URL as `[project.urls] Repository` in pyproject.toml (a test
checks they agree). The owner of the GitHub account or organisation in it publishes to the MCP Registry."""
REGISTRY_NAME_RE: Final = re.compile(r"^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$")
"""The `name` pattern of the registry's server.json schema (modelcontextprotocol/registry,
docs/reference/server-json/server.schema.json): one slash between the namespace and the server's name."""


def registry_name(repository: str = REPOSITORY) -> str:
    """The server's MCP Registry name for a GitHub repository: `io.github.<owner>/<repo>`.

    The registry's published rule (modelcontextprotocol.io/registry/authentication): a publisher who logs in
    with GitHub (`mcp-publisher login github`, or `github-oidc` from Actions) may publish only names of the form
    `io.github.<username>/*` or `io.github.<orgname>/*`; a domain login would own `com.example/*` instead,
    and deskbridge has no domain of its own."""
    m = re.fullmatch(r"https://github\.com/([A-Za-z0-9-]+)/([A-Za-z0-9._-]+?)(?:\.git)?/?", repository)
    if m is None:
        raise ValueError(f"not a GitHub repository URL: {repository!r}")
    name = f"io.github.{m.group(1)}/{m.group(2)}"
    if not REGISTRY_NAME_RE.match(name) or not 3 <= len(name) <= 200:
        raise ValueError(f"{name!r} does not fit the registry's name pattern")
    return name


REGISTRY_NAME: Final = registry_name()
"""The server's name in the MCP Registry (the GitHub namespace `REPOSITORY` gives its owner)."""
SERVER_SCHEMA: Final = "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
DESCRIPTION: Final = "Let AI agents work safely and live on PVF archives, Markdown notes and SAGE mods."
PACKAGE_DIR: Final = Path(__file__).resolve().parents[1]

SERVER_PY: Final = '''\
"""Entry point of the deskbridge MCP bundle: `deskbridge mcp --project <the folder chosen at install>`."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "src"))

from deskbridge.cli import main  # noqa: E402

sys.argv = ["deskbridge", "mcp", *sys.argv[1:]]
main()
'''


def runtime_requirements() -> list[str]:
    """deskbridge's own dependencies, without the optional extras (export, test)."""
    try:
        requires = metadata.requires("deskbridge") or []
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        requires = []
    return [r for r in requires if "extra ==" not in r]


def manifest() -> dict[str, Any]:
    return {
        "manifest_version": MANIFEST_VERSION,
        "name": "deskbridge",
        "display_name": "deskbridge",
        "version": __version__,
        "description": DESCRIPTION,
        "long_description": (
            "deskbridge serves the workspace you open - a DNF Script.pvf archive, Markdown notes, or a Red Alert 3 "
            "/ C&C3 mod - to your AI client as MCP tools. Every write is checked against the revision the agent "
            "read, risky changes ask you first, and when `deskbridge serve` runs for the same folder the agent "
            "shares the session you see in your browser."
        ),
        "author": {"name": "deskbridge contributors"},
        "license": "MIT",
        "keywords": ["markdown", "pvf", "sage", "red-alert-3", "mod", "editor"],
        "server": {
            "type": "uv",
            "entry_point": "server.py",
            "mcp_config": {
                "command": "uv",
                "args": [
                    "run",
                    "--directory",
                    "${__dirname}",
                    "server.py",
                    "--project",
                    "${user_config.project}",
                ],
                "env": {},
            },
        },
        "user_config": {
            "project": {
                "type": "directory",
                "title": "Workspace",
                "description": "The Markdown folder, mod folder or folder holding the Script.pvf to work on.",
                "required": True,
            }
        },
        "tools_generated": True,
        "compatibility": {
            "platforms": ["darwin", "win32", "linux"],
            "runtimes": {"python": ">=3.11"},
        },
    }


def bundle_pyproject() -> str:
    deps = ",\n".join(f"    {json.dumps(r)}" for r in runtime_requirements())
    return (
        "# Dependencies of the deskbridge MCP bundle; the host installs them with uv (nothing is built).\n"
        "[project]\n"
        'name = "deskbridge-bundle"\n'
        f'version = "{__version__}"\n'
        'requires-python = ">=3.11"\n'
        f"dependencies = [\n{deps}\n]\n\n"
        "[tool.uv]\npackage = false\n"
    )


def write_bundle(out: Path) -> Path:
    """Write the `.mcpb` (a zip) and return its path."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("manifest.json", json.dumps(manifest(), indent=2) + "\n")
        zf.writestr("pyproject.toml", bundle_pyproject())
        zf.writestr("server.py", SERVER_PY)
        zf.writestr(".mcpbignore", ".venv/\n__pycache__/\n")
        for path in sorted(PACKAGE_DIR.rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            zf.write(path, f"src/deskbridge/{path.relative_to(PACKAGE_DIR).as_posix()}")
    tmp.replace(out)
    return out


def server_json(name: str = REGISTRY_NAME) -> dict[str, Any]:
    """The MCP Registry entry: the PyPI package, run with uvx over stdio as `deskbridge mcp --project PATH`."""
    return {
        "$schema": SERVER_SCHEMA,
        "name": name,
        "title": "deskbridge",
        "description": DESCRIPTION,
        "version": __version__,
        "repository": {"url": REPOSITORY, "source": "github"},
        "packages": [
            {
                "registryType": "pypi",
                "identifier": "deskbridge",
                "version": __version__,
                "runtimeHint": "uvx",
                "transport": {"type": "stdio"},
                "packageArguments": [
                    {"type": "positional", "value": "mcp"},
                    {
                        "type": "named",
                        "name": "--project",
                        "description": "The workspace: a Markdown folder, a mod folder or a Script.pvf.",
                        "isRequired": True,
                        "format": "filepath",
                    },
                ],
            }
        ],
    }


def readme_names_registry(readme: str, name: str = REGISTRY_NAME) -> bool:
    """PyPI ownership for the registry: the package description must say `mcp-name: <name>`."""
    return re.search(rf"mcp-name:\s*{re.escape(name)}\b", readme) is not None
