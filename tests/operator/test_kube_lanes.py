"""``KubeApi``'s threads go to a lease holder's calls first, and none is lost to a caller that
stops waiting: a call cancelled while it queues leaves the queue, and a thread handed to a call
cancelled at that moment goes to the next one."""

from __future__ import annotations

import asyncio

import pytest

from agentrun.operator._kubeapi import Lane, _Threads


async def test_a_freed_thread_goes_to_the_holder_lane_then_in_order() -> None:
    threads = _Threads(1)
    await threads.take(Lane.OTHER)
    served: list[str] = []

    async def call(name: str, lane: Lane) -> None:
        await threads.take(lane)
        served.append(name)

    waiting = [
        asyncio.create_task(call("start 1", Lane.OTHER)),
        asyncio.create_task(call("start 2", Lane.OTHER)),
        asyncio.create_task(call("write", Lane.HOLDER)),
    ]
    await asyncio.sleep(0)
    for _ in waiting:
        threads.give()
        await asyncio.sleep(0)
    await asyncio.gather(*waiting)
    assert served == ["write", "start 1", "start 2"]


async def test_a_cancelled_call_loses_no_thread() -> None:
    threads = _Threads(1)
    await threads.take(Lane.OTHER)
    queued = asyncio.create_task(threads.take(Lane.OTHER))
    await asyncio.sleep(0)
    queued.cancel()  # left the queue
    with pytest.raises(asyncio.CancelledError):
        await queued
    handed = asyncio.create_task(threads.take(Lane.HOLDER))
    await asyncio.sleep(0)
    threads.give()  # handed to it...
    handed.cancel()  # ...as it is cancelled: passed on
    with pytest.raises(asyncio.CancelledError):
        await handed
    await asyncio.wait_for(threads.take(Lane.OTHER), 1)  # the thread is free again
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(threads.take(Lane.OTHER), 0.05)  # and there was one only
