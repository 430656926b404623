"""requestId de-duplication: same result on retry, conflict on different parameters, shared in-flight result."""

from __future__ import annotations

import asyncio

import pytest

from deskbridge.core import limits
from deskbridge.core.errors import BridgeError, ErrorCode
from deskbridge.core.requests import RequestLog, fingerprint

pytestmark = pytest.mark.anyio


class Counter:
    def __init__(self):
        self.calls = 0

    async def __call__(self):
        self.calls += 1
        return {"revision": self.calls}


async def test_same_id_same_params_returns_the_original_result_without_rerunning():
    log, work = RequestLog(), Counter()
    first = await log.run("mcp:1", "r1", {"planId": "p", "keys": ["a"]}, work)
    again = await log.run("mcp:1", "r1", {"keys": ["a"], "planId": "p"}, work)  # key order does not matter
    assert first == again == {"revision": 1} and work.calls == 1


async def test_same_id_different_params_is_a_conflict():
    log, work = RequestLog(), Counter()
    await log.run("mcp:1", "r1", {"keys": ["a"]}, work)
    with pytest.raises(BridgeError) as ei:
        await log.run("mcp:1", "r1", {"keys": ["b"]}, work)
    assert ei.value.code == ErrorCode.REQUEST_CONFLICT and work.calls == 1


async def test_ids_are_scoped_per_caller():
    log, work = RequestLog(), Counter()
    await log.run("mcp:1", "r1", {"x": 1}, work)
    await log.run("mcp:2", "r1", {"x": 2}, work)  # another caller's r1 is unrelated
    assert work.calls == 2


async def test_concurrent_duplicate_waits_for_and_shares_the_first_result():
    log = RequestLog()
    gate = asyncio.Event()
    calls = 0

    async def slow():
        nonlocal calls
        calls += 1
        await gate.wait()
        return {"done": True}

    a = asyncio.create_task(log.run("ui", "r", {}, slow))
    b = asyncio.create_task(log.run("ui", "r", {}, slow))
    await asyncio.sleep(0.01)
    assert not a.done() and not b.done()
    gate.set()
    assert await a == await b == {"done": True} and calls == 1


async def test_concurrent_duplicate_of_a_failing_call_sees_the_same_error_and_may_retry():
    log = RequestLog()
    gate = asyncio.Event()

    async def failing():
        await gate.wait()
        raise BridgeError(ErrorCode.TASK_BUSY, "busy")

    a = asyncio.create_task(log.run("ui", "r", {}, failing))
    b = asyncio.create_task(log.run("ui", "r", {}, failing))
    await asyncio.sleep(0.01)
    gate.set()
    for t in (a, b):
        with pytest.raises(BridgeError) as ei:
            await t
        assert ei.value.code == ErrorCode.TASK_BUSY
    work = Counter()
    assert await log.run("ui", "r", {}, work) == {"revision": 1}  # failure not remembered: retry runs


async def test_returned_results_are_copies():
    log = RequestLog()

    async def make():
        return {"items": [1]}

    (await log.run("ui", "r", {}, make))["items"].append(2)
    assert await log.run("ui", "r", {}, make) == {"items": [1]}


async def test_history_keeps_exactly_the_limit_per_caller():
    log, work = RequestLog(), Counter()
    for i in range(limits.REQUEST_HISTORY_MAX):
        await log.run("ui", f"r{i}", {}, work)
    assert log.size("ui") == limits.REQUEST_HISTORY_MAX
    await log.run("ui", "r0", {}, work)  # still remembered at the limit
    assert work.calls == limits.REQUEST_HISTORY_MAX
    await log.run("ui", "one-past", {}, work)
    assert log.size("ui") == limits.REQUEST_HISTORY_MAX
    await log.run("ui", "r0", {}, work)  # the oldest was dropped: runs again
    assert work.calls == limits.REQUEST_HISTORY_MAX + 2


async def test_without_request_id_every_call_runs():
    log, work = RequestLog(), Counter()
    await log.run("ui", None, {}, work)
    await log.run("ui", None, {}, work)
    assert work.calls == 2


@pytest.mark.parametrize("rid", ["", "x" * 129, 5])
async def test_malformed_request_id_is_invalid(rid):
    with pytest.raises(BridgeError) as ei:
        await RequestLog().run("ui", rid, {}, Counter())
    assert ei.value.code == ErrorCode.INVALID_ARGUMENT


def test_fingerprint_ignores_key_order_but_not_values():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
