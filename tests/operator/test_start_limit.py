"""``StartLimit``: a replica's runs at work follow how quickly its holders' writes come back.

Quick writes while runs wait for room raise the limit one a write until a write first came back
late, then one a round of writes; a late write lowers it to a share of the runs at work, once
for a burst of late writes; it never goes under ``FLOOR``, and it does not grow while it holds
nothing back.
"""

from __future__ import annotations

from agentrun.operator._start_limit import BACKOFF, FLOOR, QUICK, START, TARGET, StartLimit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_quick_writes_raise_the_limit_only_while_it_keeps_runs_waiting() -> None:
    limit = StartLimit(Clock())
    limit.wrote(0.01, at_work=START, waiting=True)
    limit.wrote(0.01, at_work=START + 1, waiting=True)
    assert limit.limit == START + 2
    limit.wrote(0.01, at_work=START + 2, waiting=False)  # nobody waits for room
    limit.wrote(0.01, at_work=3, waiting=True)  # room left under the limit
    assert limit.limit == START + 2


def test_a_late_write_lowers_it_once_for_a_burst_then_again_a_target_later() -> None:
    clock = Clock()
    limit = StartLimit(clock)
    for _ in range(60):
        limit.wrote(0.01, at_work=limit.limit, waiting=True)
    assert limit.limit == START + 60
    limit.wrote(TARGET * 4, at_work=80, waiting=True)
    assert limit.limit == int(80 * BACKOFF)
    for _ in range(10):  # the writes queued with it, late too: nothing new
        limit.wrote(TARGET * 4, at_work=60, waiting=True)
    assert limit.limit == int(80 * BACKOFF)
    clock.now += TARGET
    limit.wrote(TARGET * 2, at_work=60, waiting=True)
    assert limit.limit == int(60 * BACKOFF)
    # Once a write came back late, quick writes raise it by one a round of writes: not two
    # after two rounds' worth at 48 (the rounds lengthen as it grows), but not one either.
    lowered = limit.limit
    for _ in range(2 * lowered):
        limit.wrote(QUICK * 2, at_work=limit.limit, waiting=True)
    assert limit.limit == lowered + 1
    limit.wrote(QUICK, at_work=limit.limit, waiting=True)  # room to spare: one a write again
    assert limit.limit == lowered + 2


def test_the_limit_never_goes_under_the_floor_nor_up_by_a_late_write() -> None:
    clock = Clock()
    limit = StartLimit(clock)
    for _ in range(20):
        clock.now += TARGET
        limit.wrote(30.0, at_work=1, waiting=True)
    assert limit.limit == FLOOR
    clock.now += TARGET
    limit.wrote(30.0, at_work=1000, waiting=True)  # more at work than the limit: never raised
    assert limit.limit == FLOOR
