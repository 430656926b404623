"""The `deskbridge sage …` query commands, and `index_command` / `snapshot_command` for the top-level CLI.

Every command works without a server: it opens the project (from the disk cache when valid), answers,
and exits. Output is JSON so scripts and agents can read it; errors print `error:` and `help:` lines.
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from deskbridge.core.errors import BridgeError
from deskbridge.core.terminal import json_text, printable
from deskbridge.kinds.sage import forward, queries
from deskbridge.kinds.sage.guide import USAGE_GUIDE
from deskbridge.kinds.sage.indexer import ProjectIndexer
from deskbridge.kinds.sage.model import SageIndex

app = typer.Typer(help="Query a Red Alert 3 / C&C3 (SAGE) mod's semantic index.", no_args_is_help=True)

ProjectOpt = Annotated[Path, typer.Option("--project", "-p", help="The mod folder or any path inside it.")]
SdkOpt = Annotated[
    Path | None,
    typer.Option(
        "--sdk",
        help="The mod SDK folder (Schemas/ + SageXml/); default: $DESKBRIDGE_SAGE_SDK or config sage.sdk.",
    ),
]
CursorOpt = Annotated[str | None, typer.Option("--cursor", help="nextCursor from the previous page.")]
LimitOpt = Annotated[int | None, typer.Option("--limit", help="Items per page (default 100, max 1000).")]


def _say(text: str) -> None:
    """`typer.echo` for what the commands say about a mod: its names (files, ids, streams) may hold anything, so
    control characters are spelled out (`core.terminal.printable`)."""
    typer.echo(printable(text))


def _fail(exc: BridgeError) -> None:
    typer.echo(printable(f"error: {exc.message}"), err=True)
    typer.echo(printable(f"help: {exc.hint.replace('{tool}', 'the same command')}"), err=True)
    raise typer.Exit(1)


def _open(project: Path, sdk: Path | None) -> tuple[ProjectIndexer, SageIndex]:
    service = ProjectIndexer(project, sdk)
    index = service.open_sync()
    service.save_cache()
    return service, index


def _run(project: Path, sdk: Path | None, ask: Callable[[ProjectIndexer, SageIndex], dict[str, Any]]) -> None:
    try:
        service, index = _open(project, sdk)
        body = service.answer(ask(service, index))
        # The answer may have located reference rows a cold build left unlocated (read from the files):
        # saved, so the next command does not locate them again. A no-op when nothing changed.
        service.save_cache()
    except BridgeError as exc:
        _fail(exc)
        return
    sys.stdout.write(json_text(body, indent=1))  # a mod's ids as written, DEL and C1 as JSON escapes
    sys.stdout.write("\n")


def index_command(
    mod: Annotated[Path, typer.Argument(help="The mod folder (holds Data/Mod.xml) or any path inside it.")],
    sdk: SdkOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Index a mod (or refresh its cache) and print what was found."""
    try:
        service, index = _open(mod, sdk)
    except BridgeError as exc:
        _fail(exc)
        return
    counts = queries.diagnostic_counts(index)
    if as_json:
        json.dump(
            {"index": service.status(), "stats": index.stats, "diagnostics": counts}, sys.stdout, indent=1
        )
        sys.stdout.write("\n")
        return
    s = index.stats
    status = service.status()
    _say(f"project  {service.project}")
    _say(f"state    {status['state']}" + "".join(f"\n  {why}" for why in status.get("degraded", ())))
    _say(f"sdk      {service.sdk or '(none)'}")
    _say(f"streams  {', '.join(index.streams) or '(none)'}")
    _say(
        f"files    {s.get('indexedFiles')} ({s.get('parsedFiles')} parsed, "
        f"{s.get('recordsCacheHits')} from cache) in {s.get('openMs')} ms"
    )
    _say(
        f"assets   {s.get('assetCount')}   references {s.get('referenceCount')}   "
        f"defines {s.get('defineCount')}"
    )
    for code, n in sorted(counts.items()):
        _say(f"  {code:32} {n}")
    if counts:
        # With the SDK this run used: without it the listed diagnostics would be another index's.
        with_sdk = f" --sdk {_quoted(service.sdk)}" if sdk is not None and service.sdk else ""
        _say(f"details  deskbridge sage diagnostics -p {_quoted(service.project)}{with_sdk} --origin project")


def _quoted(path: Path) -> str:
    """A path as it can be pasted into a shell."""
    return shlex.quote(str(path))


def snapshot_command(
    mod: Annotated[Path, typer.Argument(help="The mod folder or any path inside it.")],
    sdk: SdkOpt = None,
) -> None:
    """Index a mod and write its public snapshot (gzip JSON, schema v1); prints the snapshot's path."""
    try:
        service, _index = _open(mod, sdk)
        path = service.write_snapshot_sync()
    except BridgeError as exc:
        _fail(exc)
        return
    _say(str(path))


app.command("index")(index_command)
app.command("snapshot")(snapshot_command)


@app.command("status")
def status_cmd(project: ProjectOpt = Path("."), sdk: SdkOpt = None) -> None:
    """Index state, streams, counts per asset type and per diagnostic."""
    _run(
        project,
        sdk,
        lambda s, i: {
            "streams": {n: i.display(e) for n, e in i.streams.items()},
            "stats": i.stats,
            "diagnostics": queries.diagnostic_counts(i),
            "assetTypes": queries.asset_type_counts(i),
        },
    )


@app.command("find-asset")
def find_asset_cmd(
    asset_id: str,
    type_: Annotated[str | None, typer.Option("--type", "-t")] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Every definition of an asset id."""
    _run(project, sdk, lambda s, i: queries.find_asset(i, asset_id, type_, cursor, limit))


@app.command("find-references")
def find_references_cmd(
    asset_id: str,
    type_: Annotated[str | None, typer.Option("--type", "-t")] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Every place that references an asset."""
    _run(project, sdk, lambda s, i: queries.find_references(i, asset_id, type_, cursor, limit))


@app.command("list-assets")
def list_assets_cmd(
    asset_type: str,
    prefix: Annotated[str | None, typer.Option("--prefix")] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Ids of one asset type."""
    _run(project, sdk, lambda s, i: queries.list_assets_by_type(i, asset_type, prefix, cursor, limit))


@app.command("definition")
def definition_cmd(
    asset_type: str,
    asset_id: str,
    which: Annotated[int | None, typer.Option("--which")] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
) -> None:
    """The XML of an asset's winning definition."""
    _run(project, sdk, lambda s, i: queries.get_definition(i, asset_type, asset_id, which))


@app.command("effective")
def effective_cmd(
    asset_type: str,
    asset_id: str,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """An asset as the game sees it: inheritFrom and xai:joinAction applied, with provenance."""
    from deskbridge.kinds.sage.effective import get_effective_asset

    _run(project, sdk, lambda s, i: get_effective_asset(i, asset_type, asset_id, cursor, limit))


@app.command("resolve-include")
def resolve_include_cmd(
    source: str,
    from_: Annotated[str | None, typer.Option("--from")] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
) -> None:
    """Where an include source points."""
    _run(project, sdk, lambda s, i: queries.resolve_include(i, s.resolver, source, from_))


@app.command("active")
def active_cmd(path: str, project: ProjectOpt = Path("."), sdk: SdkOpt = None) -> None:
    """Which streams include a file, and how."""
    _run(
        project,
        sdk,
        lambda s, i: queries.is_file_active(i, str(Path(path).resolve()) if Path(path).exists() else path),
    )


@app.command("define")
def define_cmd(name: str, project: ProjectOpt = Path("."), sdk: SdkOpt = None) -> None:
    """Definitions of a $DEFINE."""
    _run(project, sdk, lambda s, i: queries.find_define(i, name))


@app.command("unreferenced")
def unreferenced_cmd(
    type_: Annotated[str | None, typer.Option("--type", "-t")] = None,
    include_sdk: Annotated[bool, typer.Option("--include-sdk")] = False,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Project assets nothing references."""
    _run(project, sdk, lambda s, i: queries.unreferenced(i, type_, include_sdk, cursor, limit))


@app.command("chain")
def chain_cmd(asset_type: str, asset_id: str, project: ProjectOpt = Path("."), sdk: SdkOpt = None) -> None:
    """The inheritFrom chain of an asset."""
    _run(project, sdk, lambda s, i: queries.get_inheritance_chain(i, asset_type, asset_id))


@app.command("uses")
def uses_cmd(
    asset_type: str,
    asset_id: str,
    depth: Annotated[int, typer.Option("--depth")] = 1,
    target_type: Annotated[list[str] | None, typer.Option("--target-type")] = None,
    max_edges: Annotated[int, typer.Option("--max-edges")] = forward.MAX_EDGES_DEFAULT,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
) -> None:
    """What an asset references (forward edges with provenance)."""
    _run(
        project,
        sdk,
        lambda s, i: forward.get_asset_references(i, asset_type, asset_id, depth, target_type, max_edges),
    )


@app.command("diagnostics")
def diagnostics_cmd(
    code: Annotated[str | None, typer.Option("--code")] = None,
    file: Annotated[str | None, typer.Option("--file")] = None,
    origin: Annotated[
        str | None,
        typer.Option("--origin", help="project (the mod's own files) or sdk; default both, the mod's first."),
    ] = None,
    project: ProjectOpt = Path("."),
    sdk: SdkOpt = None,
    cursor: CursorOpt = None,
    limit: LimitOpt = None,
) -> None:
    """Problems found while indexing."""
    _run(project, sdk, lambda s, i: queries.list_diagnostics(i, code, file, cursor, limit, origin))


@app.command("guide")
def guide_cmd() -> None:
    """How to use the sage queries (the same text agents get)."""
    typer.echo(USAGE_GUIDE)
