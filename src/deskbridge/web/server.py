"""The uvicorn server of `deskbridge serve`, taught to end open event streams when it is asked to stop.

uvicorn waits for open responses before it shuts down; a browser's server-sent-event stream never ends by itself,
so without this Ctrl-C would hang for the grace period and then cancel the stream with a traceback.
"""

from __future__ import annotations

import asyncio
from types import FrameType
from typing import Any

import uvicorn

SHUTDOWN_TOPIC = "shutdown"


class BridgeServer(uvicorn.Server):
    """A uvicorn server that announces its shutdown on the App's event bus before draining connections."""

    def __init__(self, config: uvicorn.Config, events: Any) -> None:
        super().__init__(config)
        self.events = events
        self._loop: asyncio.AbstractEventLoop | None = None

    async def serve(self, sockets: list[Any] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        await super().serve(sockets)

    def _announce(self) -> None:
        # May run inside a signal handler: only hand work to the loop here (the bus takes a lock).
        if self._loop is not None and not self.should_exit:
            self._loop.call_soon_threadsafe(self.events.publish, SHUTDOWN_TOPIC, {})

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._announce()
        super().handle_exit(sig, frame)

    def request_exit(self) -> None:
        """Stop from code (tests, `demo --exit-after`) without faking a signal, which uvicorn would re-raise."""
        self._announce()
        self.should_exit = True
