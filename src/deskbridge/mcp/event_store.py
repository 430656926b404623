"""A bounded in-memory SSE event store, so a client whose stream was closed mid-call resumes it (SEP-1699).

With an event store the SDK opens every POST's SSE stream with a priming event (an id, empty data and our
`retry`), and answers `GET` + `Last-Event-ID` with what the client missed. Events are kept per stream, at most
`EVENTS_PER_STREAM` of them and `STREAMS_MAX` streams (oldest dropped first), for `EVENT_TTL_S`: resuming is for
a stream cut a moment ago, not a history.

The SDK replays whatever stream an event id names, whichever session asks (one store serves every session), so
an event id is a capability: its sequence number for ordering, then a random part. With bare sequence numbers
any client could count up and read another client's tool results.
"""

from __future__ import annotations

import itertools
import secrets
import time
from collections import OrderedDict, deque
from typing import Final

from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp_types import JSONRPCMessage

EVENTS_PER_STREAM: Final = 256
STREAMS_MAX: Final = 1024
EVENT_TTL_S: Final = 300.0
"""How long an event can be replayed (seconds)."""
RETRY_MS: Final = 1000
"""The `retry` a client is told to wait before it reconnects (milliseconds)."""
EVENT_ID_SECRET_BYTES: Final = 12
"""Random bytes in every event id (96 bits: not guessable)."""


class BoundedEventStore(EventStore):
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self._streams: OrderedDict[StreamId, deque[tuple[int, str, float, JSONRPCMessage | None]]] = (
            OrderedDict()
        )
        self._where: dict[str, tuple[StreamId, int]] = {}

    async def store_event(self, stream_id: StreamId, message: JSONRPCMessage | None) -> EventId:
        number = next(self._ids)
        event_id = f"{number}-{secrets.token_urlsafe(EVENT_ID_SECRET_BYTES)}"
        events = self._streams.get(stream_id)
        if events is None:
            events = self._streams[stream_id] = deque()
            while len(self._streams) > STREAMS_MAX:
                _, dropped = self._streams.popitem(last=False)
                for _n, old_id, _t, _m in dropped:
                    self._where.pop(old_id, None)
        if len(events) >= EVENTS_PER_STREAM:
            self._where.pop(events.popleft()[1], None)
        events.append((number, event_id, time.monotonic(), message))
        self._where[event_id] = (stream_id, number)
        return event_id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        found = self._where.get(last_event_id)
        if found is None:
            return None
        stream_id, after = found
        horizon = time.monotonic() - EVENT_TTL_S
        for number, event_id, stamp, message in list(self._streams.get(stream_id, ())):
            if number > after and message is not None and stamp >= horizon:
                await send_callback(EventMessage(message, event_id))
        return stream_id
