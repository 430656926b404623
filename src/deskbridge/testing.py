"""Run a real `deskbridge serve` in-process on an ephemeral loopback port and talk to it with the MCP SDK client.

Used by the test suite, the benchmarks and `deskbridge demo --exit-after`; it goes through the same socket,
middleware, token check and MCP transport as a person's server.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2

from deskbridge.app import App


@dataclass
class RunningServer:
    app: App
    port: int
    server: Any = None
    """The `BridgeServer` (uvicorn) serving it."""
    web: Any = None
    """The Starlette app (its `state` holds the session manager and the security policy)."""

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

    def login_url(self) -> str:
        """A fresh one-time link that opens the UI in a browser (what `deskbridge open` hands the browser):
        `GET` it once to get the UI cookie. Each call issues a new code, valid for a minute."""
        assert self.app.security_policy is not None
        return f"{self.base_url}/?k={self.app.security_policy.login_codes.issue()}"

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
async def running_server(
    path: Path | None,
    *,
    kind: str | None = None,
    port: int = 0,
    options: dict[str, Any] | None = None,
    app: App | None = None,
) -> AsyncIterator[RunningServer]:
    """Serve `path` until the block exits. Port 0 picks a free port."""
    from deskbridge.cli import bind_socket
    from deskbridge.web.app import build_web_app
    from deskbridge.web.server import BridgeServer, server_config

    application = app or App.create()
    if path is not None:
        application.open(path, kind=kind, options=options)
    sock = bind_socket("127.0.0.1", port)
    real_port = sock.getsockname()[1]
    web = build_web_app(application, port=real_port)
    server = BridgeServer(server_config(web), web.state.shutdown)
    async with anyio.create_task_group() as tg:
        tg.start_soon(server.serve, [sock])
        while not server.started:
            await anyio.sleep(0.01)
        try:
            yield RunningServer(app=application, port=real_port, server=server, web=web)
        finally:
            server.request_exit()
    sock.close()


class ServerThread:
    """`running_server` on its own event loop in a thread, for synchronous callers (Playwright's sync API,
    benchmark scripts). `run(coro)` executes a coroutine on the server's loop and returns its result."""

    def __init__(
        self, path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None
    ) -> None:
        import asyncio
        import threading

        self.path, self.kind, self.options = path, kind, options
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.srv: RunningServer | None = None
        self.error: BaseException | None = None
        self._stop: Any = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="deskbridge-server")

    def _run(self) -> None:
        import asyncio

        async def main() -> None:
            self._stop = asyncio.Event()
            try:
                async with running_server(self.path, kind=self.kind, options=self.options) as srv:
                    self.srv = srv
                    self.ready.set()
                    await self._stop.wait()
            except BaseException as exc:
                self.error = exc
                self.ready.set()

        self.loop.run_until_complete(main())

    def __enter__(self) -> ServerThread:
        self._thread.start()
        self.ready.wait(60)
        if self.error is not None:
            raise self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(15)

    def run(self, coro: Any, timeout: float = 30) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Any) -> Any:
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        assert self.srv is not None
        async with self.srv.client() as client:
            return await client.call_tool(name, arguments)

    @contextlib.contextmanager
    def client(self, **kwargs: Any) -> Iterator[Callable[[str, dict[str, Any]], Any]]:
        """One MCP client kept open on the server's loop, as an agent keeps its connection; yields a blocking
        `call(name, arguments) -> CallToolResult`."""
        import asyncio
        import concurrent.futures

        assert self.srv is not None
        requests: asyncio.Queue[Any] = self.run(_make_queue())

        async def session() -> None:
            async with self.srv.client(**kwargs) as client:  # type: ignore[union-attr]
                while (item := await requests.get()) is not None:
                    name, arguments, future = item
                    try:
                        future.set_result(await client.call_tool(name, arguments))
                    except BaseException as exc:
                        future.set_exception(exc)

        running = self.submit(session())

        def call(name: str, arguments: dict[str, Any]) -> Any:
            future: concurrent.futures.Future[Any] = concurrent.futures.Future()
            self.loop.call_soon_threadsafe(requests.put_nowait, (name, arguments, future))
            return future.result(60)

        try:
            yield call
        finally:
            self.loop.call_soon_threadsafe(requests.put_nowait, None)
            running.result(30)


async def _make_queue() -> Any:
    import asyncio

    return asyncio.Queue()
