"""The `deskbridge pvf …` commands (placeholder until the pvf library lands)."""

import typer

app = typer.Typer(help="Work with pvf data.", no_args_is_help=True)
