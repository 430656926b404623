"""`python -m deskbridge` is the `deskbridge` command."""

from deskbridge.cli import main

main()
