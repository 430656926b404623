"""The `deskbridge` command: serve a workspace over HTTP, speak MCP over stdio, manage token and settings."""

from __future__ import annotations

import errno
import logging
import socket
import sys
import webbrowser
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from deskbridge import __version__
from deskbridge.core.errors import BridgeError
from deskbridge.core.terminal import controls_escaped_in_json, printable
from deskbridge.kinds.pvf.cli import app as pvf_app
from deskbridge.kinds.sage.cli import app as sage_app
from deskbridge.kinds.sage.cli import index_command, snapshot_command

app = typer.Typer(
    name="deskbridge",
    help="Let AI agents work on your local project data safely and live.\n\n"
    "Start with `deskbridge serve PATH` (a .pvf archive, a mod folder, or Markdown notes), then connect your "
    "MCP client once with `deskbridge setup claude-code` (or claude-desktop, cursor, vscode, codex); "
    "`deskbridge doctor` says what is missing.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
app.add_typer(pvf_app, name="pvf")  # its help (kinds/pvf/cli.py HELP) has the examples
app.add_typer(sage_app, name="sage", help="Red Alert 3 / C&C3 mod index queries.")
app.command("index", help="Index a SAGE mod without a server and print what was found.")(index_command)
app.command("snapshot", help="Index a SAGE mod and write its public snapshot (gzip JSON).")(snapshot_command)
token_app = typer.Typer(help="Show or rotate the MCP bearer token.", no_args_is_help=True)
config_app = typer.Typer(help="Show or change persisted settings.", no_args_is_help=True)
skill_app = typer.Typer(
    help="Install the deskbridge Agent Skill where agents read skills (it tells them when and how to use the "
    "tools).",
    no_args_is_help=True,
)
app.add_typer(token_app, name="token")
app.add_typer(skill_app, name="skill")
app.add_typer(config_app, name="config")

err = Console(stderr=True, highlight=False, soft_wrap=True)  # never cut a link or a path in two
out = Console(highlight=False)


def _shown(value: object) -> str:
    """A value from data (a path, a name, a message naming them) put into a line that rich prints as markup:
    control characters spelled out and markup escaped (`core.terminal.printable`), so `[bold]` or `ESC ] 0 ;` in
    a folder's name prints as written, and an unbalanced `[/x]` no longer makes rich raise instead."""
    return printable(str(value), markup=True)


def fail(error: BridgeError) -> typer.Exit:
    """Print a business error the way ruff and uv do (`error:` then `help:`) and exit 2."""
    err.print(f"[bold red]error:[/] {_shown(error.message)}")
    err.print(f"[bold cyan]help:[/] {_shown(error.hint)}")
    return typer.Exit(2)


PathArg = Annotated[
    Path | None, typer.Argument(help="What to open: a .pvf file, a mod folder, a .md file or folder.")
]
KindOpt = Annotated[
    str | None, typer.Option("--kind", help="Force the kind: pvf, markdown, sage (or probe).")
]
SdkOpt = Annotated[Path | None, typer.Option("--sdk", help="SAGE SDK folder (with SageXml/ and Schemas/).")]


def _kind_options(sdk: Path | None) -> dict[str, Any]:
    return {"sdk": str(sdk)} if sdk else {}


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind the listening socket ourselves, so a busy port is a clear error and there is no check-then-bind race."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BridgeError(
                "INVALID_ARGUMENT",
                f"port {port} on {host} is already in use",
                hint=f"Stop the other program, or pick another port: `deskbridge serve --port {port + 1}` "
                f"or `deskbridge config set port {port + 1}`.",
            ) from exc
        raise BridgeError("INVALID_ARGUMENT", f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    # Accepted connections inherit TCP_NODELAY on Linux. Without it a keep-alive client waits ~40 ms per call:
    # the response goes out as two writes (head, body) and Nagle holds the body for the peer's delayed ACK.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


@app.command()
def serve(
    path: PathArg = None,
    kind: KindOpt = None,
    sdk: SdkOpt = None,
    host: Annotated[
        str, typer.Option(help="Address to listen on. Loopback only unless --allow-remote.")
    ] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="Port (default: the `port` setting, 17891; 0 picks a free one).")
    ] = None,
    allow_remote: Annotated[
        bool,
        typer.Option(
            "--allow-remote",
            help="Allow a non-loopback --host (you must trust your network: anyone with the token can act).",
        ),
    ] = False,
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            "--allowed-host",
            help="With --allow-remote: a host name or address clients use to reach this machine "
            "(repeatable). Requests naming any other Host are refused (DNS-rebinding protection).",
        ),
    ] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open the web UI.")] = False,
) -> None:
    """Serve PATH: the web UI at http://127.0.0.1:PORT/ and MCP (Streamable HTTP) at /mcp.

    Examples: `deskbridge serve notes/`, `deskbridge serve Script.pvf --port 17900`,
    `deskbridge serve MyMod --sdk ~/ra3-sdk`.
    """
    from deskbridge.web.security import is_loopback

    if not is_loopback(host) and not allow_remote:
        raise fail(
            BridgeError(
                "ACCESS_DENIED",
                f"refusing to listen on non-loopback address {host!r}",
                hint="deskbridge is local by default. Pass --allow-remote as well if you really "
                "mean to expose it (the bearer token then protects it).",
            )
        )
    try:
        _serve(path, kind, sdk, host, port, allow_remote, no_browser, allowed_host or [])
    except BridgeError as error:
        raise fail(error) from error


def _serving(workspace: Any) -> str:
    """What the start-up banner says is served; an empty workspace (`--kind pvf` without a path) printed its
    path as '.', as if the current folder were served."""
    if workspace is None:
        return "no workspace"
    if workspace.path is None or str(workspace.path) in ("", "."):
        return (
            f"an empty {workspace.kind} workspace (an agent opens an archive with pvf_archive_open)"
            if workspace.kind == "pvf"
            else f"an empty {workspace.kind} workspace"
        )
    return f"{workspace.kind} {_shown(workspace.path)}"


def _serve(
    path: Path | None,
    kind: str | None,
    sdk: Path | None,
    host: str,
    port: int | None,
    allow_remote: bool,
    no_browser: bool,
    allowed_hosts: list[str] | None = None,
) -> None:
    from deskbridge.app import App
    from deskbridge.integrations.endpoints import announced, claim_workspace
    from deskbridge.integrations.snippets import http_snippet
    from deskbridge.web.app import build_web_app
    from deskbridge.web.launch import ServerRecord, remove_login_page, write_login_page
    from deskbridge.web.security import is_loopback
    from deskbridge.web.server import BridgeServer, server_config

    application = App.create()
    port = application.settings.port if port is None else port
    # One writer per workspace: an in-process `deskbridge mcp` hands it over (or says why not) before we read it.
    # A lock left by a process that died is stale and taken over, so an early exit needs no cleanup.
    lock = claim_workspace(path) if path is not None else None
    application.open_at_start(path, kind=kind, options=_kind_options(sdk))
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]  # --port 0 asks the system for a free port
    wildcard = host in ("0.0.0.0", "::")
    extra_hosts = [] if is_loopback(host) else [*([] if wildcard else [host]), *(allowed_hosts or [])]
    if wildcard and not allowed_hosts:
        err.print(
            "[bold yellow]warning:[/] listening on all addresses, but only loopback Host names are accepted; "
            "add --allowed-host NAME for each name clients use to reach this machine."
        )
    web = build_web_app(application, port=port, extra_hosts=extra_hosts)
    shown_host = host if ":" not in host else f"[{host}]"
    base = f"http://{shown_host}:{port}"
    if allow_remote and not is_loopback(host):
        err.print(
            f"[bold yellow]warning:[/] listening on {host}: anyone who can reach it and has the token can act."
        )
    err.print(f"[bold]deskbridge {__version__}[/] serving {_serving(application.workspace)}")
    # The UI secret never goes on a command line (any local user can read those with `ps`) or into a URL: the
    # browser gets a one-time login code inside an owner-only file, and the link printed here has its own code.
    codes = web.state.policy.login_codes
    ttl = int(codes.ttl_s)
    # A wildcard bind is reached locally through loopback (the Host check accepts loopback names).
    local = {"0.0.0.0": f"http://127.0.0.1:{port}", "::": f"http://[::1]:{port}"}.get(host, base)
    record = ServerRecord.write(application.dirs, port=port, base_url=local, ui_secret=application.ui_secret)
    try:
        page = write_login_page(application.dirs, port, f"{local}/?k={codes.issue()}")
        err.print(f"  web UI:       {base}/  — one-time link (valid {ttl} s): {local}/?k={codes.issue()}")
        err.print(
            f"                later: `deskbridge open` (a new link in your browser), or open {_shown(page.as_uri())}"
        )
        err.print(
            f"  MCP endpoint: {base}/mcp  (token in {_shown(application.dirs.token_file)}; `deskbridge token show`)"
        )
        err.print("  client config (Claude Code / Cursor / Claude Desktop):")
        err.print(http_snippet("claude-code", f"{base}/mcp", "<token: deskbridge token show>"), markup=False)
        if not no_browser:
            webbrowser.open(page.as_uri())  # a file path: no secret in the browser's arguments
        server = BridgeServer(server_config(web), web.state.shutdown)
        server.on_stopped.append(record.remove)
        workspace = application.workspace
        from deskbridge.mcp.bridge import unsaved_documents

        server.unsaved = lambda: unsaved_documents(application.workspace)
        with (
            announced(  # endpoint files for `deskbridge mcp --project`; ours are removed on exit (Ctrl-C too)
                workspace.path if workspace is not None else None,
                kind=workspace.kind if workspace is not None else "",
                url=local if is_loopback(host) or wildcard else base,
                token_file=application.dirs.token_file,
            )
        ):
            server.run(sockets=[sock])
    finally:
        record.remove()
        remove_login_page(application.dirs, port)
        if lock is not None:
            lock.release()


@app.command("open")
def open_ui(
    port: Annotated[
        int | None, typer.Option(help="Port of the running server (default: the only one running).")
    ] = None,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print a one-time link instead of opening the browser.")
    ] = False,
) -> None:
    """Open the web UI of a running `deskbridge serve` in your browser, with a fresh one-time login link.

    Use it whenever you closed the tab or want the UI in another browser: the link `serve` printed works once.
    """
    from deskbridge.settings import deskbridge_dirs
    from deskbridge.web.launch import fresh_login_url, write_login_page

    try:
        dirs = deskbridge_dirs()
        url, port_used = fresh_login_url(dirs, port)
        if print_only:
            out.print(url, markup=False)
            return
        page = write_login_page(dirs, port_used, url)
        webbrowser.open(page.as_uri())
        err.print(f"opened {_shown(page.as_uri())} (a one-time link to http://127.0.0.1:{port_used}/)")
    except BridgeError as error:
        raise fail(error) from error


@app.command()
def mcp(
    path: PathArg = None,
    kind: KindOpt = None,
    sdk: SdkOpt = None,
    project: Annotated[
        Path | None,
        typer.Option(
            "--project",
            help="What MCP clients launch: forward to the running `deskbridge serve` of this path when there is "
            "one, else answer here (SAGE from the saved snapshot, other kinds in-process).",
        ),
    ] = None,
) -> None:
    """Speak MCP over stdio (for clients that start the server themselves). Logs go to stderr.

    `deskbridge mcp --project PATH` is what `deskbridge setup` writes into client configs; `deskbridge mcp PATH`
    always opens PATH in this process.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    try:
        if project is not None:
            from deskbridge.kinds.base import find_kind, project_target
            from deskbridge.mcp.bridge import run_bridge

            project = project_target(project.expanduser().resolve(), kind)
            find_kind(project, kind)  # a wrong path is an error now, not at the first call
            run_bridge(project, kind=kind, options=_kind_options(sdk))
            return
        from deskbridge.mcp.stdio import run_stdio

        run_stdio(path, kind=kind, options=_kind_options(sdk))
    except BridgeError as error:
        raise fail(error) from error


ProjectOpt = Annotated[
    Path | None,
    typer.Option("--project", help="The workspace the client should work on (default: the current folder)."),
]


@app.command()
def setup(
    host: Annotated[
        str,
        typer.Argument(
            help="claude-desktop, claude-code, cursor, vscode, vscode-insiders, vscodium or codex."
        ),
    ],
    project: ProjectOpt = None,
    scope: Annotated[
        str, typer.Option(help="user (your home config) or project (a file in the workspace folder).")
    ] = "user",
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Point the client at a running `deskbridge serve` over HTTP (token from $DESKBRIDGE_TOKEN) "
            "instead of the stdio launcher.",
        ),
    ] = False,
    name: Annotated[str, typer.Option(help="Server name in the client's config.")] = "deskbridge",
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Show the diff; write nothing.")] = False,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the entry to paste by hand; write nothing.")
    ] = False,
    remove: Annotated[
        bool, typer.Option("--remove", help="Take out the entry deskbridge added (only that).")
    ] = False,
) -> None:
    """Add deskbridge to an MCP client's config, merging into the file (other entries, comments and formatting
    stay), with a backup first. Running it again changes nothing.

    Examples: `deskbridge setup claude-code --project ~/notes`, `deskbridge setup vscode --scope project
    --dry-run`, `deskbridge setup codex --remove`.

    Files (user scope; project scope in parentheses): claude-code ~/.claude.json (.mcp.json), cursor
    ~/.cursor/mcp.json (.cursor/mcp.json), vscode the user profile's mcp.json (.vscode/mcp.json; vscode-insiders
    and vscodium the same in their own user folders), codex
    ~/.codex/config.toml, claude-desktop claude_desktop_config.json. Then restart the client as the message
    says; `deskbridge doctor HOST` checks the result.
    """
    from deskbridge.integrations.setup import apply, plan_remove, plan_setup

    target = (project or Path.cwd()).expanduser().resolve()
    if scope not in ("user", "project"):
        raise fail(
            BridgeError("INVALID_ARGUMENT", f"unknown scope {scope!r}", hint="Use --scope user or project.")
        )
    try:
        if remove:
            plan = plan_remove(host, target, scope=scope, name=name)  # type: ignore[arg-type]
        else:
            from deskbridge.settings import load_settings

            url = f"http://127.0.0.1:{load_settings().port}/mcp" if http else None
            plan = plan_setup(host, target, scope=scope, http_url=url, name=name)  # type: ignore[arg-type]
    except BridgeError as error:
        raise fail(error) from error
    if print_only:
        # JSON or TOML to paste: DEL, C1 and bidi controls in a path as `\uXXXX` escapes, the same value in both.
        out.print(controls_escaped_in_json(plan.snippet()), markup=False, end="")
        err.print(f"(for {_shown(plan.file)})")
        return
    for note in plan.notes:
        err.print(f"[bold yellow]note:[/] {_shown(note)}")
    if dry_run:
        # A config's comments say anything (a cloned project's): shown spelled out. CRLF lines read as lines.
        diff = plan.diff().replace("\r\n", "\n") or f"{plan.file}: nothing to change ({plan.action})"
        out.print(printable(diff), markup=False, end="", soft_wrap=True)
        return
    if not plan.changes:
        err.print(
            f"{plan.host.title}: {_shown(plan.file)} already {'has' if plan.entry else 'lacks'} "
            f"{_shown(repr(name))}; nothing changed."
        )
        return
    try:
        backup = apply(plan)
    except BridgeError as error:
        raise fail(error) from error
    verb = "removed from" if remove else "added to" if plan.action == "add" else "updated in"
    err.print(
        f"{plan.host.title}: {_shown(repr(name))} {verb} {_shown(plan.file)}"
        + (f" (backup: {_shown(backup)})" if backup else "")
    )
    if not remove:
        err.print(f"next: {plan.host.restart}")


@app.command()
def doctor(
    host: Annotated[
        str | None, typer.Argument(help="Also check this client's config (e.g. claude-code).")
    ] = None,
    project: ProjectOpt = None,
) -> None:
    """Check what an MCP client needs: the launcher, the token, the port, a host's config and a live round
    trip; say what to fix. Exits 1 when something needs fixing."""
    from deskbridge.integrations.doctor import run_checks

    checks = run_checks(host, project.expanduser().resolve() if project else None)
    bad = 0
    for check in checks:
        mark = {"ok": "[green]ok[/]  ", "warn": "[yellow]warn[/]", "fix": "[red]fix[/] "}[check.status]
        out.print(f"{mark} {check.name:<10} {_shown(check.detail)}", highlight=False, soft_wrap=True)
        if check.status == "fix":
            bad += 1
        if check.help and check.status != "ok":
            out.print(f"     [cyan]help:[/] {_shown(check.help)}", highlight=False, soft_wrap=True)
    if bad:
        raise typer.Exit(1)


TargetOpt = Annotated[
    str,
    typer.Option(
        "--target",
        help="agents (~/.agents/skills), claude (~/.claude/skills), project (.agents/skills in --project), "
        "or a skills folder PATH.",
    ),
]


def _report_skill(result: dict[str, Any]) -> None:
    err.print(f"{_shown(result['path'])}: wrote {len(result['written'])} file(s)")
    for kept in result["kept"]:
        err.print(f"  kept {_shown(kept['file'])} ({kept['why']})")


@skill_app.command("install")
def skill_install(target: TargetOpt = "agents", project: ProjectOpt = None) -> None:
    """Write SKILL.md and references/*.md (files you edited are never overwritten)."""
    from deskbridge.integrations.launcher import write_launcher
    from deskbridge.integrations.skill import install

    try:
        write_launcher()
        _report_skill(install(target, project_dir=(project or Path.cwd()).expanduser().resolve()))
    except BridgeError as error:
        raise fail(error) from error


@skill_app.command("sync")
def skill_sync() -> None:
    """Refresh every installed copy after an upgrade (edited files stay as they are)."""
    from deskbridge.integrations.skill import sync

    results = sync()
    for result in results:
        _report_skill(result)
    if not results:
        err.print("no installed copy to refresh; `deskbridge skill install` writes one")


@skill_app.command("uninstall")
def skill_uninstall(
    target: Annotated[
        str | None, typer.Option("--target", help="Only this target (default: every copy).")
    ] = None,
    project: ProjectOpt = None,
) -> None:
    """Remove the files deskbridge wrote and you did not edit."""
    from deskbridge.integrations.skill import uninstall

    try:
        for result in uninstall(target, project_dir=(project or Path.cwd()).expanduser().resolve()):
            err.print(f"{_shown(result['path'])}: removed {len(result['removed'])} file(s)")
            for rel in result["kept"]:
                err.print(f"  kept {_shown(rel)} (edited by you, or not ours)")
    except BridgeError as error:
        raise fail(error) from error


@app.command()
def bundle(
    out: Annotated[Path, typer.Option("--out", help="Where to write the .mcpb.")] = Path(
        "dist/deskbridge.mcpb"
    ),
    server_json: Annotated[
        Path | None,
        typer.Option(
            "--server-json", help="Also write the MCP Registry's server.json here (e.g. ./server.json)."
        ),
    ] = None,
) -> None:
    """Build the MCP Bundle (`.mcpb`, MCPB `uv` server type) that Claude Desktop installs with one click; the
    person picks the workspace folder at install."""
    import json

    from deskbridge.integrations.bundle import server_json as registry_entry
    from deskbridge.integrations.bundle import write_bundle

    path = write_bundle(out)
    err.print(
        f"bundle: {_shown(path)} ({path.stat().st_size // 1024} KiB); open it with Claude Desktop to install"
    )
    if server_json is not None:
        server_json.write_text(json.dumps(registry_entry(), indent=2) + "\n", "utf-8")
        err.print(f"registry entry: {_shown(server_json)}")


@app.command()
def demo(
    which: Annotated[
        str, typer.Argument(help="markdown (sample notes) or pvf (a small synthetic Script.pvf).")
    ] = "markdown",
    port: Annotated[int | None, typer.Option(help="Port (default: the `port` setting).")] = None,
    no_browser: Annotated[bool, typer.Option("--no-browser", help="Do not open the web UI.")] = False,
    exit_after: Annotated[
        float | None, typer.Option(help="Stop after N seconds (for scripted runs).", hidden=True)
    ] = None,
) -> None:
    """Generate a sample workspace under the user data directory and serve it."""
    from deskbridge.demo import make_demo_workspace

    try:
        target, kind = make_demo_workspace(which)
        err.print(f"sample workspace: {_shown(target)}")
        if exit_after is not None:
            _serve_briefly(target, kind, port, exit_after)
            return
        _serve(target, kind, None, "127.0.0.1", port, False, no_browser)
    except BridgeError as error:
        raise fail(error) from error


def _serve_briefly(target: Path, kind: str | None, port: int | None, seconds: float) -> None:
    """Start the server, list the tools through a real MCP client over HTTP, then stop (used by `make demo` in CI)."""
    import anyio

    from deskbridge.testing import running_server

    async def main() -> None:
        async with running_server(target, kind=kind, port=port or 0) as srv:
            tools = await srv.list_tool_names()
            err.print(f"demo server at {srv.base_url}: {len(tools)} tools ({', '.join(tools[:6])}…)")
            await anyio.sleep(seconds)

    anyio.run(main)


@app.command()
def version() -> None:
    """Print the deskbridge version."""
    out.print(__version__)


@token_app.command("show")
def token_show() -> None:
    """Print the MCP bearer token (created on first use, stored owner-only in the config directory)."""
    from deskbridge.settings import load_or_create_token

    out.print(load_or_create_token(), markup=False)


@token_app.command("rotate")
def token_rotate() -> None:
    """Replace the token. Running servers pick it up at restart; update your clients' config."""
    from deskbridge.settings import load_or_create_token

    out.print(load_or_create_token(rotate=True), markup=False)


@config_app.command("show")
def config_show() -> None:
    """Print the settings (JSON) and where they live."""
    import json

    from deskbridge.settings import deskbridge_dirs, load_settings

    try:
        settings = load_settings()
    except BridgeError as error:
        raise fail(error) from error
    out.print(json.dumps(settings.model_dump(by_alias=True), indent=2), markup=False)
    err.print(f"file: {_shown(deskbridge_dirs().settings_file)}")


@config_app.command("set")
def config_set(
    key: Annotated[
        str, typer.Argument(help="Setting name, e.g. port, require_approval, sage.sdk, approval_rules.edit")
    ],
    value: Annotated[str, typer.Argument(help='New value; JSON (true, 17892, ["a"]) or plain text.')],
) -> None:
    """Change one setting, e.g. `deskbridge config set port 17892` or `deskbridge config set require_approval false`."""
    from deskbridge.settings import (
        RESTART_SETTINGS,
        deskbridge_dirs,
        load_settings,
        save_settings,
        set_setting,
    )
    from deskbridge.web.launch import apply_to_running

    dirs = deskbridge_dirs()
    try:
        before = load_settings(dirs)
        settings = set_setting(before, key, value)
        path = save_settings(settings, dirs)
    except BridgeError as error:
        raise fail(error) from error
    err.print(f"saved {_shown(key)} in {_shown(path)}")
    # A running server keeps its own copy of the settings: hand the new ones over, and say plainly what a
    # restart is still needed for (the port it is bound to, the audit file, the sage workspace's options).
    running = apply_to_running(dirs, settings.model_dump(by_alias=True))
    needs_restart = key.split(".")[0] in RESTART_SETTINGS
    for port, problem in running:
        if problem is not None:
            err.print(
                f"the running server on port {port} did not take it: {_shown(problem)}; restart it to apply"
            )
        elif needs_restart:
            err.print(
                f"the running server on port {port} keeps using the old {_shown(key.split('.')[0])} until it "
                "restarts (stop it and run `deskbridge serve` again)"
            )
        else:
            err.print(f"applied to the running server on port {port}")
    if not running:
        err.print("no deskbridge server is running: it takes effect when `deskbridge serve` starts")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
