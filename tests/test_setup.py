"""`deskbridge setup HOST`, `doctor` and the launcher, run as a person runs them, against a throwaway home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomlkit

from deskbridge.integrations import hosts, jsonedit


@pytest.fixture
def project(tmp_path: Path) -> Path:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("# Notes\n", "utf-8")
    return notes


def setup(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deskbridge", "setup", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env=dict(os.environ),
    )


HOST_FILES = {
    "claude-desktop": (".config/Claude/claude_desktop_config.json", "user"),
    "claude-code": (".claude.json", "user"),
    "cursor": (".cursor/mcp.json", "user"),
    "vscode": (".config/Code/User/mcp.json", "user"),
    "codex": (".codex/config.toml", "user"),
}


def entries(path: Path, host: str) -> dict:
    text = path.read_text("utf-8-sig")
    if host == "codex":
        return tomlkit.parse(text).unwrap()["mcp_servers"]
    return jsonedit._loads_jsonc(text)[hosts.host(host).container]


@pytest.mark.parametrize("host", list(HOST_FILES))
def test_setup_writes_the_launcher_form_and_is_idempotent(home: Path, project: Path, host: str) -> None:
    rel, _scope = HOST_FILES[host]
    first = setup(host, "--project", str(project))
    assert first.returncode == 0, first.stderr
    config = home / rel
    entry = entries(config, host)["deskbridge"]
    launcher = Path(entry["command"])
    assert launcher.name.startswith("deskbridge-mcp") and os.access(launcher, os.X_OK)
    assert entry["args"] == ["--project", str(project.resolve())]
    if host == "vscode":
        assert entry["type"] == "stdio"
    before = config.read_bytes()
    again = setup(host, "--project", str(project))
    assert again.returncode == 0 and "nothing changed" in again.stderr
    assert config.read_bytes() == before


def test_merge_keeps_other_servers_comments_and_formatting(home: Path, project: Path) -> None:
    config = home / ".config/Code/User/mcp.json"
    config.parent.mkdir(parents=True)
    original = (
        "{\n"
        "\t// my own servers\n"
        '\t"servers": {\n'
        '\t\t"github": { "type": "http", "url": "https://example.invalid/mcp" }, // keep me\n'
        "\t},\n"
        '\t"inputs": []\n'
        "}\n"
    )
    config.write_text(original, "utf-8")
    assert setup("vscode", "--project", str(project)).returncode == 0
    text = config.read_text("utf-8")
    assert "// my own servers" in text and "// keep me" in text and '"inputs": []' in text
    assert text.startswith(original[: original.index('"github"')])  # everything before our entry is untouched
    assert set(entries(config, "vscode")) == {"github", "deskbridge"}
    # a backup of the file as it was
    backups = list((Path(os.environ["DESKBRIDGE_HOME"]) / "state" / "backups").iterdir())
    assert [b.read_text("utf-8") for b in backups] == [original]
    removed = setup("vscode", "--project", str(project), "--remove")
    assert removed.returncode == 0, removed.stderr
    assert config.read_text("utf-8") == original  # --remove undoes exactly what we added


def test_codex_toml_keeps_comments_and_other_tables(home: Path, project: Path) -> None:
    config = home / ".codex/config.toml"
    config.parent.mkdir(parents=True)
    original = 'model = "o4"  # my model\n\n[mcp_servers.other]\ncommand = "other-mcp"\n'
    config.write_text(original, "utf-8")
    assert setup("codex", "--project", str(project)).returncode == 0
    text = config.read_text("utf-8")
    assert text.startswith(original) and "[mcp_servers.deskbridge]" in text
    http = setup("codex", "--project", str(project), "--http")
    assert http.returncode == 0 and "DESKBRIDGE_TOKEN" in http.stderr
    table = entries(config, "codex")["deskbridge"]
    assert table["bearer_token_env_var"] == "DESKBRIDGE_TOKEN" and "bearer_token" not in table
    assert setup("codex", "--remove").returncode == 0
    assert config.read_text("utf-8") == original


@pytest.mark.parametrize(
    "original",
    [
        '[mcp_servers.other]\ncommand = "o"\n[profiles.x]\nmodel = "y"\n',
        'model = "o4"\n\n[mcp_servers.other]\ncommand = "o"\n\n[profiles.x]\nmodel = "y"\n',
        'model = "o4"\r\n[mcp_servers.other]\r\ncommand = "o"\r\n[profiles.x]\r\nmodel = "y"\r\n',
    ],
    ids=["no-blank-lines", "blank-lines", "crlf"],
)
def test_codex_remove_takes_out_exactly_what_setup_put_between_two_tables(
    home: Path, project: Path, original: str
) -> None:
    """Our table goes after the person's last `[mcp_servers.*]`, before their next table; tomlkit puts a blank
    line before it that it leaves behind when the table is deleted, so `--remove` left an extra blank line."""
    config = home / ".codex/config.toml"
    config.parent.mkdir(parents=True)
    config.write_bytes(original.encode())
    assert setup("codex", "--project", str(project)).returncode == 0
    assert entries(config, "codex")["deskbridge"]["args"] == ["--project", str(project.resolve())]
    removed = setup("codex", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert config.read_bytes() == original.encode()


@pytest.mark.parametrize(
    ("original", "said"),
    [
        ('mcp_servers = { other = { command = "npx" } }\nmodel = "o3"\n', None),
        ("mcp_servers = 5\n", "'mcp_servers' is not a table"),
    ],
    ids=["inline-table", "not-a-table"],
)
def test_codex_servers_written_as_an_inline_table_get_our_entry_in_that_style(
    home: Path, project: Path, original: str, said: str | None
) -> None:
    """`mcp_servers = { … }` is valid TOML; setup ended in a traceback ("Inline tables cannot contain a table")."""
    config = home / ".codex/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(original, "utf-8")
    added = setup("codex", "--project", str(project))
    if said is not None:
        assert added.returncode == 2 and said in added.stderr and "Traceback" not in added.stderr, (
            added.stderr
        )
        assert config.read_text("utf-8") == original
        return
    assert added.returncode == 0, added.stderr
    assert set(entries(config, "codex")) == {"other", "deskbridge"}
    assert entries(config, "codex")["deskbridge"]["args"] == ["--project", str(project.resolve())]
    assert tomlkit.parse(config.read_text("utf-8"))["model"] == "o3"
    assert setup("codex", "--project", str(project)).returncode == 0  # again: nothing changes
    assert setup("codex", "--remove").returncode == 0
    assert config.read_text("utf-8") == original


def test_a_project_that_does_not_exist_is_refused_and_nothing_is_written(home: Path, tmp_path: Path) -> None:
    missing = tmp_path / "nots"  # a typo of notes
    for args in (("cursor",), ("vscode", "--scope", "project"), ("codex", "--http")):
        result = setup(*args, "--project", str(missing))
        assert result.returncode != 0 and "does not exist" in result.stderr, result.stderr
    assert not missing.exists() and not (home / ".cursor").exists() and not (home / ".codex").exists()


def test_backups_are_owner_only_and_two_in_one_second_never_overwrite_each_other(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first backup is the only copy of the person's own config; a `--remove` (or another setup) in the
    same second used to write its backup under the same name over it. A config can hold API keys: 0600."""
    import stat
    import time

    from deskbridge.integrations import setup as setup_module

    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    original = '{"mcpServers": {"other": {"command": "npx", "env": {"API_KEY": "sk-secret"}}}}\n'
    config.write_text(original, "utf-8")
    config.chmod(0o644)
    monkeypatch.setattr(time, "strftime", lambda *_a: "20261201-120000")  # both runs in one second
    first = setup_module.apply(setup_module.plan_setup("cursor", project))
    second = setup_module.apply(setup_module.plan_remove("cursor", project))
    assert first is not None and second is not None and first != second
    assert first.read_text("utf-8") == original
    assert '"deskbridge"' in second.read_text("utf-8")
    assert stat.S_IMODE(first.stat().st_mode) == 0o600 and stat.S_IMODE(second.stat().st_mode) == 0o600
    assert config.read_text("utf-8") == original  # the remove took out exactly what setup added
    assert stat.S_IMODE(setup_module.record_path().stat().st_mode) == 0o600


def test_dry_run_and_print_write_nothing(home: Path, project: Path) -> None:
    dry = setup("cursor", "--project", str(project), "--dry-run")
    assert dry.returncode == 0 and "+++" in dry.stdout and '"deskbridge"' in dry.stdout
    printed = setup("cursor", "--project", str(project), "--print")
    assert json.loads(printed.stdout)["mcpServers"]["deskbridge"]["args"][-1] == str(project.resolve())
    assert not (home / ".cursor").exists()


def test_project_scope_and_http_never_write_the_token(home: Path, project: Path) -> None:
    assert setup("claude-code", "--project", str(project), "--scope", "project", "--http").returncode == 0
    config = project / ".mcp.json"
    entry = entries(config, "claude-code")["deskbridge"]
    assert entry["type"] == "http" and entry["headers"]["Authorization"] == "Bearer ${DESKBRIDGE_TOKEN}"
    token = subprocess.run(
        [sys.executable, "-m", "deskbridge", "token", "show"], capture_output=True, text=True
    )
    assert token.stdout.strip() not in config.read_text("utf-8")
    assert setup("claude-desktop", "--http").returncode == 2  # Claude Desktop's config has no HTTP form


def test_an_entry_we_did_not_add_is_neither_overwritten_nor_removed(home: Path, project: Path) -> None:
    config = home / ".cursor/mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"mcpServers": {"deskbridge": {"command": "mine"}}}\n', "utf-8")
    refused = setup("cursor", "--project", str(project))
    assert refused.returncode == 2 and "--name" in refused.stderr
    assert setup("cursor", "--remove").returncode == 0
    assert "mine" in config.read_text("utf-8")
    assert setup("cursor", "--project", str(project), "--name", "deskbridge-notes").returncode == 0
    assert set(entries(config, "cursor")) == {"deskbridge", "deskbridge-notes"}


def test_claude_desktop_paths_per_platform(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    h = hosts.host("claude-desktop")
    monkeypatch.setattr(sys, "platform", "darwin")
    assert (
        h.config_path("user", home) == home / "Library/Application Support/Claude/claude_desktop_config.json"
    )
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(home / "AppData/Roaming"))
    assert h.config_path("user", home) == home / "AppData/Roaming/Claude/claude_desktop_config.json"
    monkeypatch.setattr(sys, "platform", "linux")
    assert h.config_path("user", home) == home / ".config/Claude/claude_desktop_config.json"


@pytest.mark.parametrize(
    ("name", "folder"), [("vscode", "Code"), ("vscode-insiders", "Code - Insiders"), ("vscodium", "VSCodium")]
)
def test_vs_code_insiders_and_vscodium_have_their_own_user_folder_on_every_platform(
    home: Path, monkeypatch: pytest.MonkeyPatch, name: str, folder: str
) -> None:
    """`setup vscode` knew only VS Code's stable folder: Insiders reads `Code - Insiders` and VSCodium
    `VSCodium` (each documents it); the workspace file is `.vscode/mcp.json` for all three."""
    h = hosts.host(name)
    monkeypatch.setattr(sys, "platform", "darwin")
    assert h.config_path("user", home) == home / "Library/Application Support" / folder / "User/mcp.json"
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(home / "AppData/Roaming"))
    assert h.config_path("user", home) == home / "AppData/Roaming" / folder / "User/mcp.json"
    monkeypatch.setattr(sys, "platform", "linux")
    assert h.config_path("user", home) == home / ".config" / folder / "User/mcp.json"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    assert h.config_path("user", home) == home / "xdg" / folder / "User/mcp.json"
    assert h.config_path("project", home / "notes") == home / "notes/.vscode/mcp.json"
    assert h.container == "servers" and h.format == "jsonc" and h.http


@pytest.mark.parametrize(
    ("name", "folder"), [("vscode-insiders", "Code - Insiders"), ("vscodium", "VSCodium")]
)
def test_setup_writes_vs_code_insiders_and_vscodium_entries_and_removes_them(
    home: Path, project: Path, name: str, folder: str
) -> None:
    config = home / ".config" / folder / "User" / "mcp.json"
    added = setup(name, "--project", str(project))
    assert added.returncode == 0, added.stderr
    entry = entries(config, "vscode")["deskbridge"]
    assert entry["type"] == "stdio" and entry["args"][-2:] == ["--project", str(project.resolve())]
    assert not (home / ".config/Code").exists()  # stable VS Code's file is not touched
    http = setup(name, "--project", str(project), "--http")
    assert http.returncode == 0 and entries(config, "vscode")["deskbridge"]["headers"] == {
        "Authorization": "Bearer ${env:DESKBRIDGE_TOKEN}"
    }
    assert setup(name, "--remove").returncode == 0
    assert not config.exists()  # setup created it, and the removal leaves nothing in it


def test_claude_desktop_on_windows_is_set_up_in_the_msix_package_folder_it_reads(
    home: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude Desktop for Windows is an MSIX package: it reads its config under %LOCALAPPDATA%\\Packages, and an
    entry in %APPDATA%\\Claude was never seen (the server silently never appeared)."""
    from deskbridge.integrations import setup as setup_module

    here = sys.platform
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setenv("APPDATA", str(home / "AppData/Roaming"))
    monkeypatch.setenv("LOCALAPPDATA", str(home / "AppData/Local"))
    classic = home / "AppData/Roaming/Claude/claude_desktop_config.json"
    h = hosts.host("claude-desktop")
    assert h.config_path("user", home) == classic  # not packaged: the documented folder
    package = home / "AppData/Local/Packages/Claude_pzs8sxrjxfjjc"
    packaged = package / "LocalCache/Roaming/Claude/claude_desktop_config.json"
    (package / "LocalCache/Roaming").mkdir(parents=True)
    assert h.config_path("user", home) == packaged  # a fresh packaged install: its own folder
    plan = setup_module.plan_setup("claude-desktop", project, launcher=home / "deskbridge-mcp.cmd")
    assert plan.file == packaged
    monkeypatch.setattr(sys, "platform", here)  # the write itself runs on this machine's file system
    setup_module.apply(plan)
    assert "deskbridge" in entries(packaged, "claude-desktop") and not classic.exists()
    monkeypatch.setattr(sys, "platform", "win32")
    # A packaged install that has no config of its own reads the classic file, which then is the one to edit.
    packaged.unlink()
    classic.parent.mkdir(parents=True)
    classic.write_text('{"mcpServers": {}}\n', "utf-8")
    assert h.config_path("user", home) == classic


def test_doctor_reports_and_says_what_to_fix(home: Path, project: Path) -> None:
    assert setup("claude-code", "--project", str(project)).returncode == 0
    proc = subprocess.run(
        [sys.executable, "-m", "deskbridge", "doctor", "claude-code", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (
        "launcher" in proc.stdout and "round trip" in proc.stdout and "tools via the launcher" in proc.stdout
    )
    (home / ".claude.json").write_text("{}", "utf-8")
    broken = subprocess.run(
        [sys.executable, "-m", "deskbridge", "doctor", "claude-code", "--project", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ),
    )
    assert (
        broken.returncode == 1
        and "help:" in broken.stdout
        and "deskbridge setup claude-code" in broken.stdout
    )


def doctor(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deskbridge", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **env},
    )


def test_doctor_checks_the_workspace_and_the_form_the_client_was_set_up_with(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """The README's order: `setup HOST --project ~/notes`, then `doctor HOST` from wherever the shell is."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert setup("cursor", "--project", str(project)).returncode == 0
    proc = doctor("cursor", cwd=elsewhere)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"tools/list for {project}" in proc.stdout, proc.stdout  # not the current folder
    # An HTTP entry reaches only a running serve: none is running, so the round trip says what to start.
    assert setup("codex", "--http", "--project", str(project)).returncode == 0
    http = doctor("codex", cwd=elsewhere)
    assert http.returncode == 1 and "no deskbridge serve answers" in http.stdout, http.stdout
    assert "deskbridge serve" in http.stdout and "tools via the launcher" not in http.stdout
    # A workspace that went away since setup is named.
    moved = tmp_path / "moved"
    project.rename(moved)
    gone = doctor("cursor", cwd=elsewhere)
    assert gone.returncode == 1 and f"workspace {project} does not exist" in gone.stdout, gone.stdout


def test_export_tools_say_what_to_install_when_the_extra_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from deskbridge.core.errors import BridgeError
    from deskbridge.kinds.markdown import export

    monkeypatch.setitem(sys.modules, "pypandoc", None)
    with pytest.raises(BridgeError) as docx:
        export.export_docx("# x")
    assert "deskbridge[export]" in docx.value.hint and "md_ui_export_current_document" in docx.value.hint
    monkeypatch.setattr(export, "chromium_available", lambda: False)
    import anyio

    with pytest.raises(BridgeError) as pdf:
        anyio.run(export._with_page, "<p>x</p>", None)
    assert "Chromium" in pdf.value.hint and "deskbridge[export]" in pdf.value.hint


def test_readme_says_how_to_install_and_connect() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text("utf-8")
    for command in (
        "pipx install .",
        "uv tool install .",
        "deskbridge[export]",
        "deskbridge setup",
        "deskbridge doctor",
    ):
        assert command in readme, command


@pytest.mark.parametrize("host", ["cursor", "codex"])
def test_a_windows_written_config_with_a_bom_and_crlf_is_merged_and_restored_byte_for_byte(
    home: Path, project: Path, host: str
) -> None:
    """Notepad writes a UTF-8 BOM and CRLF; VS Code and Cursor read such a file. `setup` refused it as "not an
    object", `--remove` ended in a traceback, and the lines it added ended in LF among CRLF."""
    rel = HOST_FILES[host][0]
    config = home / rel
    config.parent.mkdir(parents=True, exist_ok=True)
    original = (
        b'\xef\xbb\xbf{\r\n  "mcpServers": {\r\n    "other": {"command": "npx"}\r\n  }\r\n}\r\n'
        if host == "cursor"
        else b'\xef\xbb\xbf# mine\r\nmodel = "o3"\r\n\r\n[mcp_servers.other]\r\ncommand = "npx"\r\n'
    )
    config.write_bytes(original)
    added = setup(host, "--project", str(project))
    assert added.returncode == 0, added.stderr
    data = config.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf") and data.count(b"\n") == data.count(b"\r\n")
    assert "deskbridge" in entries(config, host) and "other" in entries(config, host)
    removed = setup(host, "--remove", "--project", str(project))
    assert removed.returncode == 0 and "Traceback" not in removed.stderr, removed.stderr
    assert config.read_bytes() == original


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{\n  "mcpServers": {"other": {"command": "npx"}}\n  "theme": "dark"\n}\n', "line 3, column 3"),
        ('{"mcpServers": {"other": {"command": "npx"}}}\n}\n', "line 2, column 1"),
        ('{"mcpServers": {}, "mcpServers": {"other": {"command": "npx"}}}\n', "given twice"),
    ],
    ids=["missing-comma", "extra-brace", "key-twice"],
)
def test_a_config_the_client_cannot_read_is_refused_with_where_it_breaks_and_left_as_it_was(
    home: Path, project: Path, text: str, said: str
) -> None:
    """Only the members on our path were parsed: a file broken elsewhere was edited and reported as done, though
    Cursor cannot load it (and under the first of two `mcpServers`, which clients ignore, the entry is unseen)."""
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text(text, "utf-8")
    for args in (("cursor", "--project", str(project)), ("cursor", "--remove")):
        result = setup(*args)
        assert result.returncode == 2 and said in result.stderr and "nothing was changed" in result.stderr, (
            result.stderr
        )
    assert config.read_text("utf-8") == text


def test_comments_and_trailing_commas_are_read_as_the_client_reads_them(home: Path, project: Path) -> None:
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    original = '{\n  // mine\n  "mcpServers": {"other": {"args": [", ]"],},},\n}\n'
    config.write_text(original, "utf-8")
    assert jsonedit._loads_jsonc(original)["mcpServers"]["other"]["args"] == [
        ", ]"
    ]  # a string stays as written
    assert setup("cursor", "--project", str(project)).returncode == 0
    assert set(entries(config, "cursor")) == {"other", "deskbridge"}
    assert setup("cursor", "--remove").returncode == 0
    assert config.read_text("utf-8") == original


def test_doctor_names_the_line_where_a_client_config_breaks(home: Path, project: Path) -> None:
    assert setup("cursor", "--project", str(project)).returncode == 0
    config = home / ".cursor" / "mcp.json"
    config.write_text(
        config.read_text("utf-8").rstrip() + "\n}\n", "utf-8"
    )  # one brace too many, after the last line
    proc = doctor("cursor", "--project", str(project))
    assert proc.returncode == 1, proc.stdout
    assert "line 12, column 1: Extra data" in proc.stdout and "Cursor cannot load it" in proc.stdout, (
        proc.stdout
    )


def test_a_config_the_client_rewrote_after_it_was_read_is_never_overwritten(
    home: Path, project: Path
) -> None:
    """Claude Code rewrites ~/.claude.json while it runs; the setup written over it dropped what the client had
    just saved."""
    from deskbridge.core.errors import BridgeError
    from deskbridge.integrations import setup as setup_module

    config = home / ".claude.json"
    config.write_text('{"numStartups": 1}\n', "utf-8")
    plan = setup_module.plan_setup("claude-code", project, launcher=home / "deskbridge-mcp")
    config.write_text('{"numStartups": 2, "projects": {"/x": {}}}\n', "utf-8")  # the client saves meanwhile
    with pytest.raises(BridgeError) as changed:
        setup_module.apply(plan)
    assert changed.value.code == "SOURCE_CHANGED" and "setup` again" in changed.value.hint
    assert config.read_text("utf-8") == '{"numStartups": 2, "projects": {"/x": {}}}\n'
    # A config the client created after a plan that found none is not replaced either.
    fresh = home / ".cursor" / "mcp.json"
    plan = setup_module.plan_setup("cursor", project, launcher=home / "deskbridge-mcp")
    fresh.parent.mkdir()
    fresh.write_text('{"mcpServers": {"mine": {"command": "x"}}}\n', "utf-8")
    with pytest.raises(BridgeError):
        setup_module.apply(plan)
    assert "mine" in fresh.read_text("utf-8")


def test_a_read_only_or_utf16_config_is_left_alone_with_a_clear_message(home: Path, project: Path) -> None:
    config = home / ".cursor" / "mcp.json"
    config.parent.mkdir(parents=True)
    config.write_text('{"mcpServers": {}}\n', "utf-8")
    config.chmod(0o444)  # the person locked it
    refused = setup("cursor", "--project", str(project))
    assert refused.returncode == 2 and "read-only" in refused.stderr and "Traceback" not in refused.stderr
    assert config.read_text("utf-8") == '{"mcpServers": {}}\n'
    assert config.stat().st_mode & 0o777 == 0o444
    printed = setup("cursor", "--project", str(project), "--print")  # pasting by hand still works
    assert printed.returncode == 0 and '"deskbridge"' in printed.stdout
    config.chmod(0o644)
    utf16 = '{"mcpServers": {}}\r\n'.encode("utf-16")  # what Windows PowerShell's `>` writes
    config.write_bytes(utf16)
    result = setup("cursor", "--project", str(project))
    assert result.returncode == 2 and "UTF-16" in result.stderr and "Traceback" not in result.stderr, (
        result.stderr
    )
    assert config.read_bytes() == utf16


def test_doctor_s_fix_sets_up_the_same_workspace_and_name_again(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """The advice was a bare `deskbridge setup cursor`: run from another folder it set up that folder, under
    the default name, and the entry the client had lost stayed lost."""
    assert setup("cursor", "--project", str(project), "--name", "notes").returncode == 0
    (home / ".cursor" / "mcp.json").write_text('{"mcpServers": {}}\n', "utf-8")  # the entry went away
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for args in ((), ("cursor",)):
        proc = doctor(*args, cwd=elsewhere)
        assert proc.returncode == 1, proc.stdout
        advice = f"deskbridge setup cursor --project {project.resolve()} --name notes"
        assert advice in proc.stdout, proc.stdout
    assert setup("cursor", "--project", str(project), "--name", "notes", cwd=elsewhere).returncode == 0
    assert doctor("cursor", cwd=elsewhere).returncode == 0


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_on_windows_the_entry_starts_an_exe_not_the_cmd_launcher_clients_cannot_spawn(
    home: Path, project: Path, anyio_backend: str
) -> None:
    """Node-based clients (Claude Code and Desktop, Cursor, VS Code) cannot spawn a `.cmd` without a shell
    (spawn EINVAL since the CVE-2024-27980 fix): an entry naming `deskbridge-mcp.cmd` never connected."""
    from mcp import Client, StdioServerParameters

    from deskbridge.integrations import setup as setup_module

    cmd = home / "deskbridge-mcp.cmd"  # what launcher_path() is on Windows
    for host in ("claude-code", "claude-desktop", "codex"):
        entry = setup_module.plan_setup(host, project, launcher=cmd).entry
        assert entry is not None and not entry["command"].lower().endswith((".cmd", ".bat"))
        assert entry["command"] == sys.executable
        assert entry["args"] == ["-m", "deskbridge", "mcp", "--project", str(project.resolve())]
        assert entry["env"] == {"DESKBRIDGE_HOME": os.environ["DESKBRIDGE_HOME"]}
    # The entry as written starts deskbridge and answers, from another folder.
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env={"PATH": "/usr/bin:/bin", **entry["env"]}, cwd="/"
    )
    async with Client(params) as client:
        assert any(t.name == "md_search" for t in (await client.list_tools()).tools)
    # doctor reads the workspace out of this form too
    setup_module.apply(setup_module.plan_setup("cursor", project, launcher=cmd))
    project.rename(project.with_name("moved"))
    problem = setup_module.entry_problem(home / ".cursor/mcp.json", "deskbridge", hosts.host("cursor"))
    assert problem == f"the entry's workspace {project.resolve()} does not exist"


def test_setup_help_names_the_file_each_client_reads(home: Path) -> None:
    shown = " ".join(setup("--help").stdout.split())
    for name in hosts.HOSTS:
        for scope in hosts.host(name).scopes:
            assert hosts.host(name).config_path(scope, home).name in shown, (name, scope)
    assert "deskbridge doctor HOST" in shown


def test_vscode_http_form_says_the_stdio_form_is_the_way_out_of_an_unexpanded_token(
    home: Path, project: Path
) -> None:
    result = setup("vscode", "--http", "--project", str(project))
    assert result.returncode == 0, result.stderr
    said = " ".join(result.stderr.split())
    assert "336232" in said and "without --http" in said
    assert "336232" not in " ".join(setup("cursor", "--http", "--project", str(project)).stderr.split())


@pytest.mark.security
def test_a_project_config_that_is_a_link_out_of_the_project_is_never_written_through(
    home: Path, project: Path, tmp_path: Path
) -> None:
    """A cloned repository can carry `.mcp.json -> ~/.claude.json` (merged, and the person's whole client config,
    other servers' keys included, landed in the project) or `.cursor -> /elsewhere` (written out there)."""
    secret = home / ".claude.json"
    secret.write_text('{"mcpServers": {}, "apiKey": "s3cret"}\n', "utf-8")
    bashrc = home / ".bashrc"
    bashrc.write_text("export PATH=$PATH:~/bin\n", "utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = {
        "claude-code": (project / ".mcp.json", secret),
        "vscode": (project / ".vscode" / "mcp.json", bashrc),
        "cursor": (project / ".cursor", elsewhere),  # a link to a folder
    }
    for host, (link, target) in planted.items():
        link.parent.mkdir(exist_ok=True)
        link.symlink_to(target)
        for extra in ((), ("--dry-run",)):
            refused = setup(host, "--project", str(project), "--scope", "project", *extra)
            assert refused.returncode == 2 and "Traceback" not in refused.stderr, (host, refused.stderr)
            shown = " ".join(refused.stderr.split())  # rich wraps long lines
            assert "leads out of the project folder" in shown and link.name in shown, (host, shown)
            assert "nothing was changed" in shown, shown
        assert link.is_symlink() and link.resolve() == target.resolve(), host
    assert secret.read_text("utf-8") == '{"mcpServers": {}, "apiKey": "s3cret"}\n'
    assert bashrc.read_text("utf-8") == "export PATH=$PATH:~/bin\n"
    assert list(elsewhere.iterdir()) == []


@pytest.mark.security
def test_a_project_config_that_is_a_pipe_or_a_dangling_link_is_refused_naming_it(
    home: Path, project: Path, tmp_path: Path
) -> None:
    (project / ".vscode").mkdir()
    fifo = project / ".vscode" / "mcp.json"
    os.mkfifo(fifo)
    refused = setup("vscode", "--project", str(project), "--scope", "project")
    shown = " ".join(refused.stderr.split())
    assert refused.returncode == 2 and "is not a regular file" in shown and str(fifo) in shown, shown
    assert "move it away" in shown.lower() and "nothing was changed" in shown, shown
    dangling = project / ".mcp.json"
    dangling.symlink_to(tmp_path / "home" / ".config" / "autostart.json")  # nothing there yet
    refused = setup("claude-code", "--project", str(project), "--scope", "project")
    assert refused.returncode == 2 and "leads out of the project folder" in " ".join(refused.stderr.split())
    assert not (tmp_path / "home" / ".config" / "autostart.json").exists()


def test_a_project_config_linked_to_a_file_inside_the_project_is_edited_in_place(
    home: Path, project: Path
) -> None:
    shared = project / "config" / "mcp.json"
    shared.parent.mkdir()
    shared.write_text('{"mcpServers": {"other": {"command": "x"}}}\n', "utf-8")
    (project / ".mcp.json").symlink_to(Path("config") / "mcp.json")
    done = setup("claude-code", "--project", str(project), "--scope", "project")
    assert done.returncode == 0, done.stderr
    assert (
        project / ".mcp.json"
    ).is_symlink()  # the link stays; the file it names inside the project changed
    assert set(entries(shared, "claude-code")) == {"other", "deskbridge"}
    removed = setup("claude-code", "--project", str(project), "--scope", "project", "--remove")
    assert removed.returncode == 0, removed.stderr
    assert set(entries(shared, "claude-code")) == {"other"} and (project / ".mcp.json").is_symlink()


@pytest.mark.parametrize("name", ["codex", "cursor"])
def test_remove_deletes_a_config_file_setup_created_and_leaves_one_it_found(
    home: Path, project: Path, name: str
) -> None:
    """A config file that setup created was left behind empty (codex) or as `{}` after `--remove`: the person's
    folder was not as it had been. A file that existed before keeps its own settings."""
    config = home / (".codex/config.toml" if name == "codex" else ".cursor/mcp.json")
    assert not config.exists()
    assert setup(name, "--project", str(project)).returncode == 0
    assert config.exists()
    assert setup(name, "--project", str(project), "--http").returncode == 0  # an update keeps "created"
    removed = setup(name, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert not config.exists()
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("" if name == "codex" else "{}\n", "utf-8")  # the person's own, empty file
    assert setup(name, "--project", str(project)).returncode == 0
    assert setup(name, "--remove").returncode == 0
    assert config.exists()
