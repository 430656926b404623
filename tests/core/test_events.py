"""The event bus: topics, thread-safe publish, bounded queues with a `lagged` notice."""

from __future__ import annotations

import asyncio
import threading

import pytest

from deskbridge.core.events import LAGGED, EventBus

pytestmark = pytest.mark.anyio


async def test_subscriber_receives_only_its_topics_in_order():
    bus = EventBus()
    async with bus.subscribe(["task"]) as sub:
        bus.publish("task", {"n": 1})
        bus.publish("approval", {"n": 2})
        bus.publish("task", {"n": 3})
        first, second = await sub.get(1), await sub.get(1)
        assert (first.data["n"], second.data["n"]) == (1, 3)
        assert first.seq < second.seq
        assert sub.get_nowait() is None


async def test_subscribe_to_every_topic_with_none():
    bus = EventBus()
    async with bus.subscribe() as sub:
        bus.publish("a")
        bus.publish("b")
        assert [(await sub.get(1)).topic for _ in range(2)] == ["a", "b"]


async def test_publish_from_another_thread_is_delivered_on_the_loop():
    bus = EventBus()
    async with bus.subscribe("task") as sub:
        t = threading.Thread(target=lambda: [bus.publish("task", {"i": i}) for i in range(100)])
        t.start()
        got = [(await sub.get(5)).data["i"] for _ in range(100)]
        t.join()
    assert got == list(range(100))


async def test_slow_subscriber_gets_one_lagged_event_and_bounded_memory():
    bus = EventBus(queue_max=5)
    async with bus.subscribe() as sub:
        for i in range(105):
            bus.publish("x", {"i": i})
        assert sub.pending() == 6  # 5 events + one lagged marker, not 105
        got = [sub.get_nowait() for _ in range(6)]
        assert [e.data["i"] for e in got[:5]] == [0, 1, 2, 3, 4]
        assert got[5].topic == LAGGED and got[5].data["dropped"] == 100
        bus.publish("x", {"i": 200})
        assert sub.get_nowait().data["i"] == 200


async def test_queue_exactly_at_the_limit_is_not_lagged():
    bus = EventBus(queue_max=3)
    async with bus.subscribe() as sub:
        for i in range(3):
            bus.publish("x", {"i": i})
        assert [sub.get_nowait().topic for _ in range(3)] == ["x", "x", "x"]
        assert sub.get_nowait() is None


async def test_closed_subscription_stops_iteration_and_is_removed():
    bus = EventBus()
    sub = bus.subscribe()
    assert bus.subscriber_count() == 1

    async def reader():
        return [e async for e in sub]

    task = asyncio.create_task(reader())
    bus.publish("x")
    await asyncio.sleep(0)
    sub.close()
    assert [e.topic for e in await asyncio.wait_for(task, 1)] == ["x"]
    assert bus.subscriber_count() == 0


def test_publish_without_subscribers_is_a_no_op():
    bus = EventBus()
    ev = bus.publish("x", {"a": 1})
    assert ev.topic == "x" and ev.data == {"a": 1}


def test_subscriber_on_a_closed_loop_is_dropped():
    bus = EventBus()

    async def make():
        return bus.subscribe()

    loop = asyncio.new_event_loop()
    loop.run_until_complete(make())
    loop.close()
    bus.publish("x")
    assert bus.subscriber_count() == 0
