"""Where `App.invoke` runs a tool's handler: a synchronous one in a worker thread (it may block), unless its
spec declares it quick (`blocking=False`: memory or one small bounded read), which then runs on the event loop
without the thread round trip; an async one always on the loop."""

from __future__ import annotations

import threading
from typing import Any

import anyio
import pytest

from deskbridge.app import App
from deskbridge.core.tools import CallContext, ToolArgs, ToolSpec


class NoArgs(ToolArgs):
    pass


def _spec(handler: Any, **flags: Any) -> ToolSpec:
    return ToolSpec("x_where", "Where", "Which thread runs me.", NoArgs, handler, read_only=True, **flags)


def _thread(call: CallContext, args: NoArgs) -> dict[str, Any]:
    return {"thread": threading.get_ident()}


async def _async_thread(call: CallContext, args: NoArgs) -> dict[str, Any]:
    return {"thread": threading.get_ident()}


@pytest.mark.anyio
async def test_sync_handlers_run_in_a_worker_thread_unless_declared_quick() -> None:
    loop_thread = threading.get_ident()
    call = CallContext(caller="test")
    blocking = await App._run_handler(_spec(_thread), call, NoArgs())
    quick = await App._run_handler(_spec(_thread, blocking=False), call, NoArgs())
    native = await App._run_handler(_spec(_async_thread), call, NoArgs())
    assert blocking["thread"] != loop_thread
    assert quick["thread"] == loop_thread
    assert native["thread"] == loop_thread


@pytest.mark.anyio
async def test_a_blocking_handler_does_not_stall_the_loop() -> None:
    release = threading.Event()

    def waits(call: CallContext, args: NoArgs) -> dict[str, Any]:
        release.wait(10)
        return {"ok": True}

    async with anyio.create_task_group() as tg:
        tg.start_soon(App._run_handler, _spec(waits), CallContext(caller="test"), NoArgs())
        await anyio.sleep(0.01)  # the loop still runs while the handler waits in its thread
        release.set()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
