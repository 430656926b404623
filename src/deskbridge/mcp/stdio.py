"""`deskbridge mcp`: the same tools over stdio, for clients that start the server themselves.

Nothing but protocol may reach stdout, so logging goes to stderr and the App is built before serving starts.

`fast_stdio` is the SDK's `stdio_server` without its worker-thread hop per line: the SDK reads each line and
writes and flushes each reply through `anyio.wrap_file`, three thread round trips per call, which made a small
read over stdio ~1.7x slower than the Node reference server (MCP-LAT). Here stdin and stdout are asyncio pipes on
the same event loop, and the streams handed to the SDK read and write those pipes directly: no reader or writer
task and no memory stream of our own between the pipe and the SDK's dispatcher (each hop is a task switch and
several event-loop turns per message). fds 0 and 1 are diverted exactly as the SDK does (stray prints cannot
corrupt the stream); where the streams are not pipes (a file, Windows) the SDK's transport is used.

A line that is no JSON-RPC message is answered, as JSON-RPC 2.0 §5.1 says (https://www.jsonrpc.org/specification):
not JSON → `-32700 Parse error`, JSON that is not a request, notification or response → `-32600 Invalid Request`,
with `"id": null` unless the line has an id of its own; then the next line is read. The SDK only logged such a
line, so a client that sent one waited for an answer that never came.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import os
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Final

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from deskbridge.app import App
from deskbridge.mcp.server import build_mcp_server

LINE_MAX_BYTES: Final = 64 * 1024 * 1024
"""The longest message line read from stdin (64 MiB; a tool result is capped far below this)."""
PRE_REQUEST_FRAMES: Final = 8
"""Frames kept from before the client's first request (the SDK's `_PRE_REQUEST_REPLAY_LIMIT`)."""


Answer = Callable[[SessionMessage], Awaitable[None]]
"""Sends the reply to a line that is no message (see `unreadable_reply`)."""


def unreadable_reply(line: bytes | None, exc: Exception) -> SessionMessage:
    """The JSON-RPC 2.0 error answering `line`, which did not parse as a message (`exc` says why). `line` is None
    where it is not known: a line over LINE_MAX_BYTES (asyncio's ValueError), or one the SDK's own transport
    read (its pydantic ValidationError says whether it was JSON)."""
    document: Any = None
    if line is None:
        validated = hasattr(exc, "errors")
        parse = not validated or _is_json_error(exc)
        too_long = not validated
    else:
        too_long = False
        try:
            document, parse = json.loads(line), False
        except ValueError:  # UnicodeDecodeError included
            parse = True
    if too_long:
        message = f"Parse error: the message line is longer than {LINE_MAX_BYTES // (1024 * 1024)} MiB"
    elif parse:
        message = "Parse error: the line is not JSON"
    else:
        message = "Invalid Request: the line is not a JSON-RPC 2.0 request, notification or response"
    request_id = document.get("id") if isinstance(document, dict) else None
    if parse or isinstance(request_id, bool) or not isinstance(request_id, int | str):
        request_id = None  # §5: null when the id could not be detected
    error = types.ErrorData(code=types.PARSE_ERROR if parse else types.INVALID_REQUEST, message=message)
    return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=request_id, error=error))


def _is_json_error(exc: Exception) -> bool:
    """Whether a pydantic ValidationError from `validate_json` says the input was not JSON at all."""
    try:
        return any(e.get("type") == "json_invalid" for e in exc.errors())  # type: ignore[attr-defined]
    except Exception:
        return False


class _Answering:
    """A read stream of SessionMessages (the SDK's transport's) whose unreadable lines are answered through
    `answer` (`unreadable_reply`) instead of being handed on."""

    def __init__(self, stream: Any, answer: Answer) -> None:
        self._stream = stream
        self._answer = answer

    async def receive(self) -> SessionMessage:
        while True:
            item = await self._stream.receive()
            if not isinstance(item, Exception):
                return item
            await self._answer(unreadable_reply(None, item))

    def __aiter__(self) -> _Answering:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def __aenter__(self) -> _Answering:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _pipe_like(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


class _PipeReader:
    """The SDK's `ReadStream` of SessionMessages, read straight from stdin's pipe on the caller's task.

    No reader task and no memory stream in between: the SDK's own relay task awaits `receive()`, which parses the
    next line. A line that is not JSON-RPC is answered through `answer` (`unreadable_reply`) and skipped; without
    `answer` it is yielded as the exception (as the SDK's `stdio_server` does).
    """

    def __init__(self, reader: asyncio.StreamReader, answer: Answer | None = None) -> None:
        self._reader = reader
        self._answer = answer
        self._closed = False
        self._replay: collections.deque[SessionMessage | Exception] = collections.deque()
        self._ended = False

    async def opening_request(self) -> types.JSONRPCRequest | None:
        """The client's first request, read ahead and kept (with up to `PRE_REQUEST_FRAMES` frames before it) to
        be received again; None when stdin closes before one. What the SDK's `serve_dual_era_loop` peeks at to
        choose the protocol era (`mcp.server.runner._replay_from_opening_request`), without its relay task."""
        while True:
            try:
                item = await self._read()
            except anyio.EndOfStream:
                self._ended = True
                return None
            if isinstance(item, SessionMessage) and isinstance(item.message, types.JSONRPCRequest):
                self._replay.append(item)
                return item.message
            if len(self._replay) < PRE_REQUEST_FRAMES:
                self._replay.append(item)

    async def receive(self) -> SessionMessage | Exception:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._replay:
            return self._replay.popleft()
        if self._ended:
            raise anyio.EndOfStream
        return await self._read()

    async def _read(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            line: bytes | None
            try:
                line = await self._reader.readline()
            except ValueError as exc:  # a line over LINE_MAX_BYTES: asyncio drops it, the next one is read
                line, error = None, exc
            else:
                if not line:
                    raise anyio.EndOfStream
                if not line.strip():
                    continue
                try:
                    return SessionMessage(types.jsonrpc_message_adapter.validate_json(line, by_name=False))
                except Exception as exc:
                    error = exc
            if self._answer is None:
                return error
            await self._answer(unreadable_reply(line, error))

    def __aiter__(self) -> _PipeReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _PipeReader:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class _PipeWriter:
    """The SDK's `WriteStream` of SessionMessages, written straight to stdout's pipe by the sending task.

    One line per message, whole (`write` is synchronous, so concurrent senders never interleave), in the order
    sent; `drain` waits only while the pipe's buffer is over its high-water mark (back-pressure from a slow
    client). A send after close, or to a client that went away, raises what anyio streams raise (the SDK drops
    such writes with a debug log).
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        body = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            self._writer.write(body.encode() + b"\n")
            await self._writer.drain()
        except ConnectionError as exc:
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _PipeWriter:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def fast_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) of SessionMessages over this process's stdin and stdout."""
    if sys.platform == "win32" or not (_pipe_like(0) and _pipe_like(1)):
        async with stdio_server() as (read_stream, write_stream):
            yield _Answering(read_stream, write_stream.send), write_stream
        return
    from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _open_stdout_diversion

    stdin_file, restore_stdin = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    stdout_file, restore_stdout = _claim_fd(1, sys.stdout, "wb", _open_stdout_diversion)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_MAX_BYTES)
    read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin_file)
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, stdout_file
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, None, loop)
    pipe_writer = _PipeWriter(writer)
    try:
        yield _PipeReader(reader, pipe_writer.send), pipe_writer
    finally:
        read_transport.close()
        with contextlib.suppress(Exception):
            await writer.drain()
        write_transport.close()
        if restore_stdout is not None:
            restore_stdout()
        if restore_stdin is not None:
            restore_stdin()


async def serve(server: Server[Any], read_stream: Any, write_stream: Any) -> None:
    """`server.run(read_stream, write_stream, …)`, with the era chosen here when the stream is our pipe.

    The SDK's `serve_dual_era_loop` peeks at the first request to pick the protocol era and then relays every
    later message through a task and a memory stream of its own to the era's loop (~9 % of a small call's CPU
    over stdio). `_PipeReader` can hold the first request itself, so the era's loop reads the pipe directly:
    the same two SDK loops (`_serve_modern_stream`, `_serve_legacy_stream`) with the same arguments
    `serve_dual_era_loop` passes, which also refuse a later request from the other era. Where those private
    functions are not there (another SDK release) or the stream is not ours, `server.run` serves unchanged.
    """
    try:
        from mcp.server.runner import _has_modern_envelope, _serve_legacy_stream, _serve_modern_stream
    except ImportError:  # pragma: no cover - an SDK without these helpers
        _serve_modern_stream = None
    if _serve_modern_stream is None or not isinstance(read_stream, _PipeReader):
        await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    async with server.lifespan(server) as lifespan_state:
        try:
            async with read_stream:
                opening = await read_stream.opening_request()
                if (
                    opening is not None
                    and opening.method != "initialize"
                    and _has_modern_envelope(opening.params)
                ):
                    await _serve_modern_stream(
                        server,
                        read_stream,
                        write_stream,
                        lifespan_state=lifespan_state,
                        raise_exceptions=False,
                    )
                else:
                    await _serve_legacy_stream(
                        server,
                        read_stream,
                        write_stream,
                        lifespan_state=lifespan_state,
                        session_id=None,
                        init_options=server.create_initialization_options(),
                        raise_exceptions=False,
                    )
        finally:
            await write_stream.aclose()


def run_stdio(path: Path | None, *, kind: str | None = None, options: dict[str, Any] | None = None) -> None:
    application = App.create()
    application.open_at_start(path, kind=kind, options=options)
    server = build_mcp_server(application, editor=False)

    async def main() -> None:
        await application.start()
        try:
            async with fast_stdio() as (read_stream, write_stream):
                await serve(server, read_stream, write_stream)
        finally:
            from deskbridge.mcp.bridge import keep_unsaved

            try:
                keep_unsaved(application.workspace)
            except Exception:
                logging.getLogger(__name__).exception("unsaved changes could not be kept")
            await application.stop()

    anyio.run(main)
