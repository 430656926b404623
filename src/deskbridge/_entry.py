"""The `deskbridge` command's entry point (and `python -m deskbridge`'s).

Loading the CLI's modules takes ~0.3 s; a Ctrl-C in that time printed a traceback from the middle of an import
(found by QA). It ends the command the way a Ctrl-C later does: exit status 130 (128 + SIGINT), nothing done.
"""

from __future__ import annotations


def main() -> None:
    try:
        from deskbridge.cli import main as run
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    run()
