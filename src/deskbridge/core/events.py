"""In-process event bus: the engine publishes what happened, the web UI (SSE) and MCP notifications listen.

`publish` is synchronous and safe to call from any thread (worker threads running sync tools or task
bodies included): delivery to a subscriber always happens on the subscriber's own event loop, scheduled
with `loop.call_soon_threadsafe` when the publisher is on another thread. Each subscriber owns a bounded
queue; a subscriber that does not keep up loses the oldest-not-yet-queued events and receives one
`lagged` event saying how many it missed, so memory stays bounded and the subscriber knows to re-read
state (events are never the only source of truth — ARCHITECTURE.md, seed "UI 同步").

Thread-safety: the subscriber list is guarded by a `threading.Lock`; each subscriber's queue is touched
only on its own loop.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from deskbridge.core import limits

LAGGED = "lagged"
"""Topic of the event a slow subscriber receives in place of the events it missed; `data.dropped` counts them."""


@dataclass
class Event:
    """One published fact: a topic ('task', 'approval', 'workspace', 'plan', …), its data and a sequence number."""

    topic: str
    data: dict[str, Any]
    seq: int
    """Strictly increasing across the bus; transports can use it as an SSE event id."""
    time: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, "data": self.data, "seq": self.seq, "time": self.time}


class Subscription:
    """An async iterator over the events of the chosen topics; close it (or use `async with`) when done."""

    def __init__(self, bus: EventBus, topics: frozenset[str] | None, maxsize: int) -> None:
        self._bus = bus
        self.topics = topics
        self._maxsize = maxsize
        self._loop = asyncio.get_running_loop()
        self._queue: deque[Event] = deque()
        self._wakeup = asyncio.Event()
        self.closed = False

    def wants(self, topic: str) -> bool:
        return self.topics is None or topic in self.topics

    def _deliver(self, event: Event) -> None:
        """Runs on the subscriber's loop. Queue holds ≤ maxsize events plus at most one trailing `lagged`."""
        if self.closed:
            return
        q = self._queue
        if len(q) >= self._maxsize:
            if q and q[-1].topic == LAGGED:
                q[-1].data["dropped"] += 1
            else:
                q.append(Event(LAGGED, {"dropped": 1, "firstMissedSeq": event.seq}, event.seq))
        else:
            q.append(event)
        self._wakeup.set()

    def _schedule(self, event: Event) -> bool:
        """Deliver now when already on our loop, else hand over to it; False when our loop is gone."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._deliver(event)
            return True
        try:
            self._loop.call_soon_threadsafe(self._deliver, event)
        except RuntimeError:  # loop closed: this subscriber can never read again
            return False
        return True

    def pending(self) -> int:
        """Events queued and not yet read (a trailing `lagged` marker counts as one)."""
        return len(self._queue)

    def __aiter__(self) -> AsyncIterator[Event]:
        return self

    async def __anext__(self) -> Event:
        while not self._queue:
            if self.closed:
                raise StopAsyncIteration
            self._wakeup.clear()
            await self._wakeup.wait()
        return self._queue.popleft()

    async def get(self, timeout: float | None = None) -> Event:
        """The next event; `TimeoutError` when none arrives within `timeout` seconds."""
        return await asyncio.wait_for(self.__anext__(), timeout)

    def get_nowait(self) -> Event | None:
        """The next queued event, or None when nothing is queued."""
        return self._queue.popleft() if self._queue else None

    def close(self) -> None:
        self.closed = True
        self._bus._remove(self)
        self._wakeup.set()

    async def __aenter__(self) -> Subscription:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class EventBus:
    """Publish/subscribe by topic inside one process; see the module docstring for the threading rules."""

    def __init__(self, queue_max: int = limits.EVENT_QUEUE_MAX) -> None:
        if queue_max < 1:
            raise ValueError("queue_max must be at least 1")
        self.queue_max = queue_max
        self._lock = threading.Lock()
        self._subscribers: list[Subscription] = []
        self._seq = itertools.count(1)

    def subscribe(self, topics: Iterable[str] | str | None = None) -> Subscription:
        """Start listening (must be called on the event loop that will read). `None` means every topic."""
        if isinstance(topics, str):
            topics = [topics]
        sub = Subscription(self, None if topics is None else frozenset(topics), self.queue_max)
        with self._lock:
            self._subscribers.append(sub)
        return sub

    def publish(self, topic: str, data: dict[str, Any] | None = None) -> Event:
        """Send `data` to every subscriber of `topic`; never blocks, callable from any thread."""
        # Numbering and scheduling under one lock keeps every subscriber's order equal to `seq` order,
        # also when several threads publish at once.
        with self._lock:
            event = Event(topic, dict(data or {}), next(self._seq))
            dead = [s for s in self._subscribers if s.wants(topic) and not s._schedule(event)]
        for s in dead:
            self._remove(s)
        return event

    def subscriber_count(self) -> int:
        with self._lock:
            return len(self._subscribers)

    def _remove(self, sub: Subscription) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
