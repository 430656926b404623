"""Run a real `deskbridge serve` in-process on an ephemeral loopback port and talk to it with the MCP SDK client.

Used by the test suite, the benchmarks and `deskbridge demo --exit-after`; it goes through the same socket,
middleware, token check and MCP transport as a person's server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import uvicorn

from deskbridge.app import App


@dataclass
class RunningServer:
    app: App
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def mcp_url(self) -> str:
        return f"{self.base_url}/mcp"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.app.token}"}

    def ui_headers(self) -> dict[str, str]:
        return {"X-Deskbridge-UI": self.app.ui_secret}

    @contextlib.asynccontextmanager
    async def client(self, *, mode: str = "auto", **kwargs: Any) -> AsyncIterator[Any]:
        """An SDK `Client` connected over Streamable HTTP with the bearer token."""
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        async with httpx2.AsyncClient(headers=self.auth_headers(), timeout=30) as http:
            transport = streamable_http_client(self.mcp_url, http_client=http)
            async with Client(transport, mode=mode, **kwargs) as client:
                yield client

    async def list_tool_names(self) -> list[str]:
        async with self.client() as client:
            result = await client.list_tools()
            return [tool.name for tool in result.tools]


@contextlib.asynccontextmanager
async def running_server(path: Path | None, *, kind: str | None = None, port: int = 0,
                         options: dict[str, Any] | None = None, app: App | None = None) -> AsyncIterator[RunningServer]:
    """Serve `path` until the block exits. Port 0 picks a free port."""
    from deskbridge.cli import bind_socket
    from deskbridge.web.app import build_web_app
    from deskbridge.web.server import BridgeServer

    application = app or App.create()
    if path is not None:
        application.open(path, kind=kind, options=options)
    sock = bind_socket("127.0.0.1", port)
    real_port = sock.getsockname()[1]
    web = build_web_app(application, port=real_port)
    config = uvicorn.Config(web, log_level="warning", lifespan="on", timeout_graceful_shutdown=3)
    server = BridgeServer(config, web.state.shutdown)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        try:
            yield RunningServer(app=application, port=real_port)
        finally:
            server.request_exit()
    sock.close()
