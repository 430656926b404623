"""`requestId` de-duplication, scoped per caller, so a retried call never applies, saves or publishes twice.

Rules (seed "超时、重试与释放"):

* same caller + same `requestId` + same parameters → the original result, also after the workspace
  changed or was switched (the history outlives workspaces, so a retry after a lost response is safe);
* same `requestId` with different parameters → `REQUEST_CONFLICT`;
* a duplicate that arrives while the first is still running waits for it and returns the same result;
* only *successful* results are remembered — a request that failed (stale, busy, declined) can be retried
  with the same id once the cause is fixed; concurrent duplicates of a failing call all see its error;
* each caller keeps its last `REQUEST_HISTORY_MAX` results (oldest dropped first); ids are never shared
  between callers.

Parameters are compared by a SHA-256 of their canonical JSON, never stored themselves (they can carry a
whole script or document).

Thread-safety: `run` is for the event loop (async handlers); the history is guarded by a `threading.Lock`
so status queries from other threads are safe.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode

T = TypeVar("T")

REQUEST_ID_MAX_CHARS = 128


def fingerprint(params: Mapping[str, Any]) -> str:
    """Stable digest of a call's parameters (key order and whitespace do not matter)."""
    canonical = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass
class _Entry:
    fingerprint: str
    future: asyncio.Future[Any]


class RequestLog:
    """Per-caller history of requestIds and their results; see the module docstring."""

    def __init__(self, history_max: int = limits.REQUEST_HISTORY_MAX) -> None:
        self.history_max = history_max
        self._lock = threading.Lock()
        self._by_caller: dict[str, OrderedDict[str, _Entry]] = {}

    async def run(
        self,
        caller: str,
        request_id: str | None,
        params: Mapping[str, Any],
        call: Callable[[], Awaitable[T]],
    ) -> T:
        """Run `call()` once per (caller, requestId, params); `request_id=None` always runs it."""
        if request_id is None:
            return await call()
        if not isinstance(request_id, str) or not 0 < len(request_id) <= REQUEST_ID_MAX_CHARS:
            raise BridgeError(
                ErrorCode.INVALID_ARGUMENT,
                f"requestId must be a string of 1 to {REQUEST_ID_MAX_CHARS} characters",
            )
        fp = fingerprint(params)
        loop = asyncio.get_running_loop()
        with self._lock:
            history = self._by_caller.setdefault(caller, OrderedDict())
            entry = history.get(request_id)
            if entry is not None:
                if entry.fingerprint != fp:
                    raise BridgeError(
                        ErrorCode.REQUEST_CONFLICT,
                        f"requestId {request_id!r} was already used with different parameters",
                        data={"requestId": request_id},
                    )
                mine = False
            else:
                entry = _Entry(fp, loop.create_future())
                history[request_id] = entry
                self._trim(history)
                mine = True
        if not mine:
            # shield: a duplicate whose own call is cancelled must not cancel the shared original.
            return copy.deepcopy(await asyncio.shield(entry.future))
        try:
            result = await call()
        except BaseException as exc:
            with self._lock:
                if history.get(request_id) is entry:
                    del history[request_id]  # failures are not remembered: the same id may be retried
            if not entry.future.done():
                if isinstance(exc, asyncio.CancelledError):
                    entry.future.cancel()
                else:
                    entry.future.set_exception(exc)
                    entry.future.exception()  # mark retrieved: no "never retrieved" warning without waiters
            raise
        entry.future.set_result(copy.deepcopy(result))
        return result

    def _trim(self, history: OrderedDict[str, _Entry]) -> None:
        # Drop the oldest *finished* entries first; a running request is never forgotten mid-flight.
        while len(history) > self.history_max:
            for rid, e in history.items():
                if e.future.done():
                    del history[rid]
                    break
            else:
                break

    def size(self, caller: str) -> int:
        with self._lock:
            return len(self._by_caller.get(caller, ()))
