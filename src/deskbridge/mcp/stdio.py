"""`deskbridge mcp`: the same tools over stdio, for clients that start the server themselves.

Nothing but protocol may reach stdout, so logging goes to stderr and the App is built before serving starts.

`fast_stdio` is the SDK's `stdio_server` without its worker-thread hop per line: the SDK reads each line and
writes and flushes each reply through `anyio.wrap_file`, three thread round trips per call, which made a small
read over stdio ~1.7x slower than the Node reference server (MCP-LAT). Here stdin and stdout are asyncio pipes on
the same event loop. fds 0 and 1 are diverted exactly as the SDK does (stray prints cannot corrupt the stream);
where the streams are not pipes (a file, Windows) the SDK's transport is used unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from deskbridge.app import App
from deskbridge.mcp.server import build_mcp_server

LINE_MAX_BYTES: Final = 64 * 1024 * 1024
"""The longest message line read from stdin (64 MiB; a tool result is capped far below this)."""


def _pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@contextlib.asynccontextmanager
async def fast_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of SessionMessages over this process's stdin and stdout."""
    if sys.platform == "win32" or not (_pipe_like(0) and _pipe_like(1)):
        async with stdio_server() as streams:
            yield streams
        return
    from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion
    from mcp.shared._context_streams import create_context_streams

    stdin_file, restore_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    stdout_file, restore_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_MAX_BYTES)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin_file)
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, stdout_file
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)

    read_stream_writer, read_stream = create_context_streams[SessionMessage | Exception](0)
    write_stream, write_stream_reader = create_context_streams[SessionMessage](0)

    async def stdin_reader() -> None:
        async with read_stream_writer:
            while line := await reader.readline():
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:
                    await read_stream_writer.send(exc)
                    continue
                await read_stream_writer.send(SessionMessage(message))

    async def stdout_writer() -> None:
        async with write_stream_reader:
            async for session_message in write_stream_reader:
                body = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(body.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(stdin_reader)
            tg.start_soon(stdout_writer)
            yield read_stream, write_stream
            tg.cancel_scope.cancel()
    finally:
        read_transport.close()
        with contextlib.suppress(Exception):
            await writer.drain()
        write_transport.close()
        if restore_stdout is not None:
            restore_stdout()
        if restore_stdin is not None:
            restore_stdin()


def run_stdio(path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None) -> None:
    application = App.create()
    if path is not None:
        application.open(path, kind=kind, options=options)
    server = build_mcp_server(application, editor=False)

    async def main() -> None:
        await application.start()
        try:
            async with fast_stdio() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await application.stop()

    anyio.run(main)
