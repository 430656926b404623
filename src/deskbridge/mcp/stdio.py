"""`deskbridge mcp`: the same tools over stdio, for clients that start the server themselves.

Nothing but protocol may reach stdout, so logging goes to stderr and the App is built before serving starts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
from mcp.server.stdio import stdio_server

from deskbridge.app import App
from deskbridge.mcp.server import build_mcp_server


def run_stdio(path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None) -> None:
    application = App.create()
    if path is not None:
        application.open(path, kind=kind, options=options)
    server = build_mcp_server(application, editor=False)

    async def main() -> None:
        await application.start()
        try:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await application.stop()

    anyio.run(main)
