"""`python -m deskbridge` is the `deskbridge` command."""

from deskbridge._entry import main

main()
