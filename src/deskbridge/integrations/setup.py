"""`deskbridge setup HOST`: add (or remove) deskbridge in one MCP host's config file, touching nothing else.

A change is planned first (`plan_setup` / `plan_remove`: the file, its old and new text, a diff), so `--dry-run`
and `--print` show exactly what would happen and the web UI can show it before the person clicks. `apply`
backs the file up, writes it atomically and records what we added in `<state dir>/setup.json`; `--remove`
takes out only entries that record names, and only while they are as we wrote them.
"""

from __future__ import annotations

import difflib
import json
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.integrations import jsonedit
from deskbridge.integrations.endpoints import normalise, private_state_dir, state_dir
from deskbridge.integrations.hosts import VSCODE_FOLDERS, Host, Scope, host
from deskbridge.integrations.launcher import write_launcher
from deskbridge.integrations.project_files import file_inside

if TYPE_CHECKING:
    from deskbridge.core.files import FileIdentity

DEFAULT_NAME: Final = "deskbridge"


def record_path() -> Path:
    return state_dir() / "setup.json"


def backups_dir() -> Path:
    return state_dir() / "backups"


def _load_record() -> list[dict[str, Any]]:
    try:
        data = json.loads(record_path().read_text("utf-8"))
    except (OSError, ValueError):
        return []
    return data.get("entries", []) if isinstance(data, dict) else []


def _save_record(entries: list[dict[str, Any]]) -> None:
    from deskbridge.core.files import atomic_write

    path = record_path()
    private_state_dir(path.parent)
    data = json.dumps({"entries": entries}, indent=1, ensure_ascii=False).encode("utf-8")
    atomic_write(path, data, mode=0o600)


def recorded(file: Path, name: str) -> dict[str, Any] | None:
    return next((e for e in _load_record() if e["file"] == str(file) and e["name"] == name), None)


# -- reading and changing one config file -------------------------------------------------------------------


CONFIG_MAX_BYTES: Final = 64 * 1024 * 1024
"""The largest client config read (Claude Code's ~/.claude.json keeps every project's history and grows)."""


def _read(path: Path) -> str:
    from deskbridge.core.files import read_regular_file

    try:
        data = read_regular_file(path, max_bytes=CONFIG_MAX_BYTES)
    except BridgeError as exc:
        if exc.code == ErrorCode.NOT_FOUND:
            return ""
        raise
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Windows PowerShell's `>` and Out-File write UTF-16; clients read their configs as UTF-8.
        utf16 = data.startswith((b"\xff\xfe", b"\xfe\xff"))
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{path} is {'UTF-16' if utf16 else 'not UTF-8'} text (byte {exc.start})",
            hint="Save it as UTF-8 (in Notepad: File > Save as, Encoding UTF-8), then run `deskbridge setup` "
            "again; nothing was changed.",
        ) from None


def _read_config(path: Path) -> tuple[str, FileIdentity | None]:
    """The config's text and the identity it had before it was read: `apply` writes only over that same file,
    so a change the client made meanwhile (Claude Code rewrites ~/.claude.json as it runs) is never lost."""
    from deskbridge.core.files import current_identity

    identity = current_identity(path)
    return _read(path), identity


def _back_up(plan: Plan) -> Path:
    """A copy of the config as it is now, owner-only (a client config can hold other servers' API keys), under a
    name no other backup has: two runs in the same second used to overwrite the first backup, the only copy of
    the person's original file."""
    from deskbridge.core.files import publish_new

    data = _read(plan.file).encode("utf-8")
    private_state_dir(backups_dir())
    stamp = time.strftime("%Y%m%d-%H%M%S")
    base = f"{plan.host.name}-{plan.scope}-{stamp}"
    for n in range(1, 1000):
        backup = backups_dir() / (f"{base}-{plan.file.name}" if n == 1 else f"{base}-{n}-{plan.file.name}")
        try:
            publish_new(backup, data, mode=0o600)
            return backup
        except BridgeError as exc:
            if exc.code != ErrorCode.TARGET_EXISTS:
                raise
    raise BridgeError(ErrorCode.LIMIT_EXCEEDED, f"too many backups of {plan.file} this second")


BOM: Final = "\ufeff"
"""A UTF-8 byte-order mark, as Windows editors (Notepad) put at the start of a file: VS Code and Cursor read such
a config, so do we, and an edited file keeps it."""


def current_entry(h: Host, text: str, name: str) -> Any:
    text = text.removeprefix(BOM)
    if not text.strip():
        return None
    if h.format == "toml":
        import tomlkit

        doc = tomlkit.parse(text)
        servers = doc.get(h.container)
        if servers is not None and not isinstance(servers, dict):
            raise ValueError(f"{h.container!r} is not a table")
        value = servers.get(name) if servers is not None else None
        return (
            json.loads(json.dumps(value.unwrap() if hasattr(value, "unwrap") else value)) if value else None
        )
    jsonedit.check(text, [h.container, name])
    return jsonedit.get(text, [h.container, name])


def _all_crlf(text: str) -> bool:
    return "\r\n" in text and text.count("\n") == text.count("\r\n")


def _same_newlines(old: str, new: str) -> str:
    """`new` with the CRLF line ends of `old` when every line of `old` ends so (a Windows-written config): the
    lines we insert used to end in LF alone among the person's CRLF. A file with mixed line ends is edited as
    it is."""
    return new.replace("\r\n", "\n").replace("\n", "\r\n") if _all_crlf(old) else new


def _with_entry(h: Host, text: str, name: str, entry: dict[str, Any]) -> str:
    if text.startswith(BOM):
        return BOM + _with_entry(h, text.removeprefix(BOM), name, entry)
    if _all_crlf(text):
        return _same_newlines(text, _with_entry(h, text.replace("\r\n", "\n"), name, entry))
    if h.format == "toml":
        import tomlkit
        from tomlkit.items import InlineTable, Table

        doc = tomlkit.parse(text) if text.strip() else tomlkit.document()
        if h.container not in doc:
            doc[h.container] = tomlkit.table(is_super_table=True)
        servers = doc[h.container]
        if not isinstance(servers, Table | InlineTable):
            raise jsonedit.JsonEditError(f"{h.container!r} is not a table")
        # `mcp_servers = { other = {...} }` is valid TOML too; an inline table can hold only inline tables (tomlkit
        # raised "Inline tables cannot contain a table" as a traceback), so our entry is written in its style.
        table = tomlkit.inline_table() if isinstance(servers, InlineTable) else tomlkit.table()
        for key, value in entry.items():
            table[key] = value
        servers[name] = table
        return _table_in_the_files_style(h, text, tomlkit.dumps(doc), name, entry)
    return jsonedit.set_member(text, h.container, name, entry)


def _table_in_the_files_style(h: Host, text: str, added: str, name: str, entry: dict[str, Any]) -> str:
    """`added` (tomlkit's `text` with our new table) with the table set apart as the file sets its tables apart.

    Put between the person's last `[mcp_servers.*]` and their next table, tomlkit's table took the blank line
    after the table before it (or put one there when there was none) and had none after it: the same file came
    out of two different ones, and `--remove` could not tell which one to give back (it left an extra blank
    line). Here it comes right after the table before it (and that table's blank line, if it had one) and has a
    blank line after it only when that table had one, so deleting its lines gives the file back."""
    import tomlkit

    block = tomlkit.dumps({h.container: {name: entry}})
    at = added.find(block)
    if at < 0 or added.find(block, at + 1) >= 0:
        return added  # an inline table, or a table we cannot place: tomlkit's text as it is
    before, after = added[:at], added[at + len(block) :]
    if before + after == text:
        found = before
    elif before.endswith("\n\n") and before[:-1] + after == text:
        found = before[:-1]  # the blank line tomlkit put before us
    else:
        return added
    if not after.strip() or not found.endswith("\n"):
        return added  # at the end of the file: tomlkit's blank line before ours is taken out with it
    return found + block + ("\n" if found.endswith("\n\n") else "") + after


def _without_entry(h: Host, text: str, name: str, drop_container: bool) -> str:
    if text.startswith(BOM):
        return BOM + _without_entry(h, text.removeprefix(BOM), name, drop_container)
    if _all_crlf(text):
        return _same_newlines(text, _without_entry(h, text.replace("\r\n", "\n"), name, drop_container))
    if h.format == "toml":
        import tomlkit

        doc = tomlkit.parse(text)
        servers = doc.get(h.container)
        if servers is not None and name in servers:
            del servers[name]
            if drop_container and not servers:
                del doc[h.container]
        out = tomlkit.dumps(doc)
        return (
            out.rstrip("\n") + "\n" if out.strip() else ""
        )  # tomlkit leaves the blank line it put before us
    return jsonedit.delete_member(text, h.container, name, drop_empty_parent=drop_container)


# -- plans ---------------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """One config change, not made yet."""

    host: Host
    scope: Scope
    file: Path
    name: str
    old_text: str
    new_text: str
    entry: dict[str, Any] | None
    """The entry we add (None for a removal)."""
    action: str
    """`add`, `update`, `unchanged`, `remove` or `absent`."""
    notes: list[str] = field(default_factory=list)
    created_container: bool = False
    identity: FileIdentity | None = None
    """The file as it was read (None: there was none); `apply` refuses to write over anything else."""
    delete_file: bool = False
    """A removal that leaves nothing in a file deskbridge setup created: the file goes, as it was before."""
    folder: Path | None = None
    """The project folder a project-scope config must stay inside (integrations/project_files.py); None for a
    user config, which is the person's own file wherever their links put it (a dotfiles repository)."""

    @property
    def changes(self) -> bool:
        return self.old_text != self.new_text

    def diff(self) -> str:
        return "".join(
            difflib.unified_diff(
                self.old_text.splitlines(keepends=True),
                self.new_text.splitlines(keepends=True),
                fromfile=str(self.file),
                tofile=str(self.file),
            )
        )

    def snippet(self) -> str:
        """The entry as the person would paste it by hand."""
        if self.entry is None:
            return ""
        return _with_entry(self.host, "", self.name, self.entry)

    def to_dict(self) -> dict[str, Any]:
        return {
            "host": self.host.name,
            "scope": self.scope,
            "file": str(self.file),
            "name": self.name,
            "action": self.action,
            "entry": self.entry,
            "diff": self.diff(),
            "notes": self.notes,
            "restart": self.host.restart,
        }


def project_folder(project: Path) -> Path:
    """Where project-scope configs go: the workspace folder (a single document's folder)."""
    project = normalise(project)
    return project if project.is_dir() else project.parent


def plan_setup(
    host_name: str,
    project: Path,
    *,
    scope: Scope = "user",
    http_url: str | None = None,
    name: str = DEFAULT_NAME,
    launcher: Path | None = None,
) -> Plan:
    """What `deskbridge setup HOST` would change. Raises `BridgeError` when it must not (someone else's entry)."""
    if not normalise(project).exists():
        # A mistyped --project used to be written as is (and `--scope project` created the folders for it): the
        # client then starts a bridge on a workspace that is not there.
        raise BridgeError(
            ErrorCode.NOT_FOUND,
            f"{project} does not exist",
            hint="Give --project the Markdown folder or file, mod folder or .pvf archive the client should work "
            "on; nothing was changed.",
        )
    try:
        h = host(host_name)
        file = h.config_path(scope, project_folder(project))
        entry = (
            h.http_entry(http_url)
            if http_url
            else h.stdio_entry(launcher or write_launcher(), normalise(project))
        )
    except ValueError as exc:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            str(exc),
            hint="`deskbridge setup --help` lists the hosts, scopes and forms.",
        ) from exc
    folder = _checked_folder(file, scope, project)
    old, identity = _read_config(file)
    try:
        existing = current_entry(h, old, name)
    except Exception as exc:  # a config we cannot parse is left alone
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{file} is not valid {h.format.upper()}: {exc}",
            hint="Fix the file (or move it away), then run `deskbridge setup` again; nothing was changed.",
        ) from exc
    ours = recorded(file, name)
    if existing is not None and ours is None and existing != entry:
        raise BridgeError(
            ErrorCode.TARGET_EXISTS,
            f"{file} already has a server named {name!r} that deskbridge did not add",
            hint=f"Pick another name with `--name {name}-2`, or remove that entry yourself; nothing was changed.",
        )
    if existing == entry:
        return Plan(h, scope, file, name, old, old, entry, "unchanged", folder=folder)
    try:
        new = _with_entry(h, old, name, entry)
    except jsonedit.JsonEditError as exc:
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{file} cannot be edited safely: {exc}",
            hint="Fix the file, or add the entry by hand (`deskbridge setup --print`).",
        ) from exc
    plan = Plan(h, scope, file, name, old, new, entry, "update" if existing is not None else "add")
    plan.identity = identity
    plan.folder = folder
    plan.created_container = _container_missing(h, old)
    if http_url:
        plan.notes.append(
            "Give the host the token in its environment: `export DESKBRIDGE_TOKEN=$(deskbridge token show)` "
            "before starting it; the token itself is never written into a config file."
        )
        if h.name in VSCODE_FOLDERS:
            plan.notes.append(
                f"{h.title} may send `${{env:DESKBRIDGE_TOKEN}}` in a header as written, not the token "
                "(microsoft/vscode issue #336232): if it is refused (401), use the stdio form, "
                f"`deskbridge setup {h.name}` without --http, which reaches a running `deskbridge serve` too."
            )
    return plan


def _container_missing(h: Host, text: str) -> bool:
    text = text.removeprefix(BOM)
    if not text.strip():
        return True
    if h.format == "toml":
        import tomlkit

        return h.container not in tomlkit.parse(text)
    return jsonedit.get(text, [h.container]) is None


def plan_remove(host_name: str, project: Path, *, scope: Scope = "user", name: str = DEFAULT_NAME) -> Plan:
    try:
        h = host(host_name)
        file = h.config_path(scope, project_folder(project))
    except ValueError as exc:
        raise BridgeError(ErrorCode.INVALID_ARGUMENT, str(exc)) from exc
    folder = _checked_folder(file, scope, project)
    old, identity = _read_config(file)
    ours = recorded(file, name)
    try:
        existing = current_entry(h, old, name) if old.strip() else None
    except Exception as exc:  # a config we cannot parse is left alone (it was a traceback)
        raise BridgeError(
            ErrorCode.INVALID_ARGUMENT,
            f"{file} is not valid {h.format.upper()}: {exc}",
            hint="Fix the file (or move it away), then run `deskbridge setup --remove` again; nothing was changed.",
        ) from exc
    if ours is None or existing is None:
        plan = Plan(h, scope, file, name, old, old, None, "absent")
        if existing is not None:
            plan.notes.append(f"{name!r} in {file} was not added by deskbridge setup; it was left alone.")
        return plan
    if existing != ours["entry"]:
        plan = Plan(h, scope, file, name, old, old, None, "absent")
        plan.notes.append(f"{name!r} in {file} was changed since deskbridge added it; it was left alone.")
        return plan
    new = _without_entry(h, old, name, bool(ours.get("createdContainer")))
    plan = Plan(h, scope, file, name, old, new, None, "remove", folder=folder)
    plan.delete_file = bool(ours.get("createdFile")) and _holds_nothing(h, new)
    plan.identity = identity
    return plan


def _checked_folder(file: Path, scope: Scope, project: Path) -> Path | None:
    """For a project-scope config: the project folder, once `file` is known to be a real file inside it (or
    nothing yet), before anything is read through it. None for a user config."""
    if scope != "project":
        return None
    folder = project_folder(project)
    file_inside(file, folder)
    return folder


def _holds_nothing(h: Host, text: str) -> bool:
    """Whether a config's text holds no setting at all (blank, or an empty JSON object)."""
    if not text.strip():
        return True
    if h.format == "toml":
        return False
    try:
        return jsonedit._loads_jsonc(text) == {}
    except ValueError:
        return False


def apply(plan: Plan) -> Path | None:
    """Make the change: back the file up, write it atomically (keeping its permissions), update the record.
    Returns the backup's path (None when the file did not exist or nothing changed)."""
    from deskbridge.core.files import atomic_write, current_identity, make_dirs, publish_new

    entries = [e for e in _load_record() if not (e["file"] == str(plan.file) and e["name"] == plan.name)]
    backup = None
    if plan.changes:
        if plan.identity is not None and not plan.file.stat().st_mode & stat.S_IWUSR:
            raise BridgeError(
                ErrorCode.ACCESS_DENIED,
                f"{plan.file} is read-only; deskbridge leaves it as it is",
                hint="Make it writable (`chmod u+w`, or untick Read-only in its Properties) and run `deskbridge "
                "setup` again, or add the entry by hand (`deskbridge setup --print`); nothing was changed.",
            )
        # Checked again: the web UI applies a plan some time after it showed it.
        target = plan.file if plan.folder is None else file_inside(plan.file, plan.folder)
        if plan.file.exists():
            backup = _back_up(plan)
        if plan.folder is None:
            plan.file.parent.mkdir(parents=True, exist_ok=True)
        else:  # `.vscode/` made inside the project, never through a link planted meanwhile
            make_dirs(target.parent, root=target.confined_root)
        data = plan.new_text.encode("utf-8")
        try:
            if plan.delete_file:
                if current_identity(target) != plan.identity:
                    raise BridgeError(ErrorCode.SOURCE_CHANGED, f"{plan.file} changed")
                os.unlink(target)
            elif plan.identity is None:
                publish_new(target, data, new_file_mode=0o600)
            else:
                atomic_write(target, data, expected_identity=plan.identity)
        except BridgeError as exc:
            if exc.code not in (ErrorCode.SOURCE_CHANGED, ErrorCode.TARGET_EXISTS):
                raise
            raise BridgeError(
                ErrorCode.SOURCE_CHANGED,
                f"{plan.file} changed while deskbridge was editing it (the client may have written it); "
                "it was left as the other program wrote it",
                hint="Run `deskbridge setup` again: it merges into the file as it is now.",
            ) from None
    if plan.entry is not None:
        previous = recorded(plan.file, plan.name)
        entries.append(
            {
                "host": plan.host.name,
                "scope": plan.scope,
                "file": str(plan.file),
                "name": plan.name,
                "entry": plan.entry,
                "createdContainer": plan.created_container
                or bool(previous and previous.get("createdContainer")),
                "createdFile": (plan.identity is None and plan.changes)
                or bool(previous and previous.get("createdFile")),
                "added": time.time(),
                "backup": str(backup) if backup else None,
            }
        )
    _save_record(entries)
    return backup


def setups() -> list[dict[str, Any]]:
    """Every entry deskbridge setup added that is still recorded."""
    return _load_record()


def entry_project(entry: Any) -> str | None:
    """The workspace a stdio entry names (`--project PATH` among its args), if it names one."""
    args = entry.get("args") if isinstance(entry, dict) else None
    if not isinstance(args, list) or "--project" not in args[:-1]:
        return None
    return str(args[args.index("--project") + 1])


def entry_problem(entry_file: Path, name: str, h: Host) -> str | None:
    """For `doctor`: what is wrong with our entry in a host's config (None when it is fine)."""
    text = _read(entry_file)
    if not text.strip():
        return f"{entry_file} does not exist"
    try:
        value = current_entry(h, text, name)
    except Exception as exc:  # the client cannot load the file either: say where it breaks
        return (
            f"{entry_file} is not valid {h.format.upper()} ({exc}), so {h.title} cannot load it; fix that in a "
            "text editor (or move the file away)"
        )
    if value is None:
        return f"{entry_file} has no {name!r} entry"
    command = value.get("command") if isinstance(value, dict) else None
    if command and not Path(command).exists():
        return f"the entry's command {command} does not exist"
    workspace = entry_project(value)
    if workspace is not None and not Path(workspace).exists():
        return f"the entry's workspace {workspace} does not exist"
    return None
