"""The Agent Skill: what it says (generic, with signals and a probe), and install / sync / uninstall that never
touch a file the person edited; plus the web UI's setup and first-run routes."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import yaml

from deskbridge.integrations import skill
from deskbridge.integrations.skill_text import REFERENCES, SKILL_MD
from deskbridge.testing import RunningServer, running_server


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deskbridge", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=dict(os.environ),
    )


def test_skill_md_has_frontmatter_signals_negatives_and_probes() -> None:
    front = yaml.safe_load(SKILL_MD.split("---")[1])
    assert front["name"] == "deskbridge" and len(front["description"]) < 1024
    for probe in ("sage_get_status", "pvf_workspace_info", "md_get_app_status"):
        assert probe in SKILL_MD
    assert "Data/Mod.xml" in SKILL_MD and "CnC3Types.xsd" in SKILL_MD and "Not a match" in SKILL_MD
    workflows = REFERENCES["sage.md"] + REFERENCES["pvf.md"] + REFERENCES["markdown.md"]
    for step in (
        "sage_find_references",
        "sage_is_file_active",
        "sage_get_inheritance_chain",
        "sage_unreferenced",
        "targetTypes",
        "pvf_search",
        "pvf_plan_preview",
        "pvf_archive_save",
        "md_read_section",
        "md_patch_section",
    ):
        assert step in workflows


def test_skill_names_no_project_document() -> None:
    """Generic by design: a skill that points at one project's docs is noise in every other conversation."""
    for name, text in {"SKILL.md": SKILL_MD, **REFERENCES}.items():
        mentioned = re.findall(r"[\w./-]+\.md\b", text)
        assert all(m.startswith("references/") for m in mentioned), (name, mentioned)
        for word in (
            "docs/",
            "README",
            "AGENTS.md",
            "CLAUDE.md",
            "ARCHITECTURE",
            "deskbridge/",
            "/home/",
            "C:\\",
        ):
            assert word not in text, (name, word)


def test_install_sync_uninstall_leave_edited_files_alone(home: Path) -> None:
    assert cli("skill", "install").returncode == 0
    folder = home / ".agents" / "skills" / "deskbridge"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    assert files == ["SKILL.md", "references/markdown.md", "references/pvf.md", "references/sage.md"]
    assert all(skill.file_state(folder / f) == "managed" for f in files)
    edited = folder / "references" / "pvf.md"
    edited.write_text(edited.read_text("utf-8") + "My own note.\n", "utf-8")
    assert skill.file_state(edited) == "edited"
    mine = folder / "references" / "extra.md"
    mine.write_text("mine\n", "utf-8")
    sync = cli("skill", "sync")
    assert sync.returncode == 0 and "kept references/pvf.md (edited by you)" in sync.stderr
    assert "My own note." in edited.read_text("utf-8")
    assert cli("skill", "uninstall").returncode == 0
    left = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.md"))
    assert left == ["references/extra.md", "references/pvf.md"]
    assert skill.installs() == []


def test_targets(home: Path, tmp_path: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    assert cli("skill", "install", "--target", "claude").returncode == 0
    assert (home / ".claude/skills/deskbridge/SKILL.md").is_file()
    assert cli("skill", "install", "--target", "project", "--project", str(project)).returncode == 0
    assert (project / ".agents/skills/deskbridge/SKILL.md").is_file()
    custom = tmp_path / "my-skills"
    assert cli("skill", "install", "--target", str(custom)).returncode == 0
    assert (custom / "deskbridge" / "SKILL.md").is_file()
    assert {Path(r["path"]).parent.name for r in skill.installs()} == {"skills", "my-skills"}
    assert cli("skill", "install", "--target", "nonsense").returncode == 2


@pytest.mark.security
def test_a_project_skills_folder_that_links_out_of_the_project_is_never_written_through(
    home: Path, tmp_path: Path
) -> None:
    """A cloned repository can carry `.agents -> ~/.config/autostart` or `.claude/skills -> /elsewhere`:
    `skill install --target project` (or `--target .claude/skills` run inside it) wrote the skill out there."""
    project = tmp_path / "proj"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (project / ".agents").symlink_to(elsewhere)
    (project / ".claude").mkdir()
    (project / ".claude" / "skills").symlink_to(elsewhere)
    for target in ("project", ".claude/skills", "./.claude/skills"):
        refused = cli("skill", "install", "--target", target, "--project", str(project), cwd=project)
        shown = " ".join(refused.stderr.split())  # rich wraps long lines
        assert refused.returncode == 2 and "Traceback" not in shown, (target, shown)
        assert "leads out of the project folder" in shown and "nothing was changed" in shown, (target, shown)
    assert list(elsewhere.rglob("*")) == [] and skill.installs() == []


@pytest.mark.security
def test_a_pipe_or_a_link_out_among_the_skill_files_is_refused_and_nothing_is_written(
    home: Path, tmp_path: Path
) -> None:
    project = tmp_path / "proj"
    folder = project / ".agents" / "skills" / "deskbridge"
    (folder / "references").mkdir(parents=True)
    os.mkfifo(folder / "references" / "pvf.md")  # reading it for its marker blocked the install forever
    refused = cli("skill", "install", "--target", "project", "--project", str(project))
    shown = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "is not a regular file" in shown and "pvf.md" in shown, shown
    assert not (folder / "SKILL.md").exists()  # all files are checked before the first is written
    (folder / "references" / "pvf.md").unlink()
    victim = tmp_path / "victim.md"
    victim.write_text("mine\n", "utf-8")
    (folder / "SKILL.md").symlink_to(victim)
    refused = cli("skill", "install", "--target", "project", "--project", str(project))
    assert refused.returncode == 2 and "leads out of the project folder" in " ".join(refused.stderr.split())
    assert victim.read_text("utf-8") == "mine\n" and (folder / "SKILL.md").is_symlink()
    assert sorted(p.name for p in folder.rglob("*")) == ["SKILL.md", "references"]


def test_the_skill_is_written_without_a_guessable_temp_file(home: Path, tmp_path: Path) -> None:
    # The temp file was `.SKILL.md.<pid>.tmp`, written with write_text: a link planted under that name (the pid
    # is easy to guess) was followed, and the skill's text written wherever it pointed.
    project = tmp_path / "proj"
    folder = project / ".agents" / "skills" / "deskbridge"
    folder.mkdir(parents=True)
    victim = tmp_path / "victim.txt"
    victim.write_text("mine\n", "utf-8")
    (folder / f".SKILL.md.{os.getpid()}.tmp").symlink_to(victim)
    result = skill.install("project", project_dir=project)
    assert "SKILL.md" in result["written"] and skill.file_state(folder / "SKILL.md") == "managed"
    assert victim.read_text("utf-8") == "mine\n"


def test_uninstall_of_a_project_install_removes_nothing_through_a_link_planted_since(
    home: Path, tmp_path: Path
) -> None:
    # uninstall trusted the recorded folder: with its `references` folder swapped for a link to another install,
    # it deleted that install's (unedited, so "managed") files out there.
    project = tmp_path / "proj"
    project.mkdir()
    skill.install("project", project_dir=project)
    other = skill.install_into(tmp_path / "elsewhere", "elsewhere")["path"]
    folder = project / ".agents" / "skills" / "deskbridge"
    shutil.rmtree(folder / "references")
    (folder / "references").symlink_to(Path(other) / "references")
    outside = sorted(p.name for p in (Path(other) / "references").iterdir())
    [result] = skill.uninstall("project", project_dir=project)
    assert sorted(p.name for p in (Path(other) / "references").iterdir()) == outside
    assert "SKILL.md" in result["removed"] and all(rel.startswith("references/") for rel in result["kept"])
    assert result["kept"] and (folder / "references").is_symlink()


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "README.md").write_text("# Notes\n", "utf-8")
    return folder


@contextlib.asynccontextmanager
async def page(folder: Path) -> AsyncIterator[tuple[RunningServer, httpx2.AsyncClient]]:
    """`deskbridge serve` of `folder` and an HTTP client with the UI secret, as the person's browser page."""
    async with (
        running_server(folder) as srv,
        httpx2.AsyncClient(base_url=srv.base_url, headers=srv.ui_headers()) as http,
    ):
        yield srv, http


@pytest.mark.anyio
async def test_the_web_ui_previews_then_writes_only_on_a_click(home: Path, notes: Path) -> None:
    async with page(notes) as (srv, http):
        first = (await http.get("/api/integrations/onboarding")).json()
        assert first["show"] is True
        hosts = (await http.get("/api/integrations/hosts")).json()["hosts"]
        assert {h["name"] for h in hosts} == {
            "claude-desktop",
            "claude-code",
            "cursor",
            "vscode",
            "vscode-insiders",
            "vscodium",
            "codex",
        }
        plan = (await http.post("/api/integrations/setup/plan", json={"host": "cursor"})).json()
        assert "+++" in plan["diff"] and not (home / ".cursor/mcp.json").exists()  # a preview writes nothing
        done = (await http.post("/api/integrations/setup/apply", json={"host": "cursor"})).json()
        assert done["written"] and (home / ".cursor/mcp.json").is_file()
        records = [r for r in srv.app.audit.recent() if r.tool == "deskbridge_setup"]
        assert records and records[-1].caller == "ui"
        assert (await http.get("/api/integrations/onboarding")).json()["show"] is False
        installed = (await http.post("/api/integrations/skill/install", json={"target": "agents"})).json()
        assert Path(installed["path"], "SKILL.md").is_file()
        # without the UI secret, nothing is reachable
        async with httpx2.AsyncClient(base_url=srv.base_url) as stranger:
            assert (
                await stranger.post("/api/integrations/setup/apply", json={"host": "vscode"})
            ).status_code == 401


@pytest.mark.anyio
async def test_not_now_is_remembered(home: Path, notes: Path) -> None:
    async with page(notes) as (_srv, http):
        assert (await http.post("/api/integrations/onboarding", json={"dismissed": True})).status_code == 200
    async with page(notes) as (_srv, http):
        assert (await http.get("/api/integrations/onboarding")).json()["show"] is False


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
