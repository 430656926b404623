"""The `deskbridge` command: serve a workspace, speak MCP over stdio, and the per-kind tools."""

from __future__ import annotations

import typer

from deskbridge import __version__
from deskbridge.kinds.pvf.cli import app as pvf_app
from deskbridge.kinds.sage.cli import app as sage_app

app = typer.Typer(
    name="deskbridge",
    help="Let AI agents work on your local project data safely and live.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.add_typer(pvf_app, name="pvf", help="DNF Script.pvf archives: info, ls, cat, extract, pack, verify, synth.")
app.add_typer(sage_app, name="sage", help="Red Alert 3 / C&C3 mod index queries.")


@app.command()
def version() -> None:
    """Print the deskbridge version."""
    typer.echo(__version__)


def main() -> None:
    app()
