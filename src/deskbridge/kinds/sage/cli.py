"""The `deskbridge sage …` commands (placeholder until the sage library lands)."""

import typer

app = typer.Typer(help="Work with sage data.", no_args_is_help=True)
