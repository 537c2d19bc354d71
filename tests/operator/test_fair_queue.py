"""Runs waiting for room are taken in weighted fair order across namespaces
(``_scheduler.FairQueue``): a namespace that floods the queue does not starve another, and a
namespace's runs keep the order they came in."""

from __future__ import annotations

from collections import Counter

from agentrun.operator._scheduler import FairQueue


def _drain(queue: FairQueue, count: int) -> list[str]:
    taken = []
    for _ in range(count):
        item = queue.take()
        assert item is not None
        taken.append(item[0])
    return taken


def test_a_flood_in_one_namespace_does_not_starve_another() -> None:
    queue = FairQueue()
    for index in range(2000):
        queue.put(f"f{index}", "flood", f"f{index}", None)
    for index in range(20):
        queue.put(f"q{index}", "quiet", f"q{index}", None)
    first = _drain(queue, 40)
    assert [uid for uid in first if uid.startswith("q")] == [f"q{i}" for i in range(20)]
    assert [uid for uid in first if uid.startswith("f")] == [f"f{i}" for i in range(20)]


def test_weights_share_the_room_in_proportion() -> None:
    weights = {"heavy": 3, "light": 1}
    queue = FairQueue(lambda namespace: weights[namespace])
    for index in range(100):
        queue.put(f"h{index}", "heavy", "run", None)
        queue.put(f"l{index}", "light", "run", None)
    served = Counter(uid[0] for uid in _drain(queue, 80))
    assert served == {"h": 60, "l": 20}


def test_a_namespace_that_comes_back_is_owed_nothing_for_its_absence() -> None:
    queue = FairQueue()
    for index in range(10):
        queue.put(f"b{index}", "busy", "run", None)
    _drain(queue, 6)
    queue.put("l0", "late", "run", None)
    queue.put("l1", "late", "run", None)
    # It shares from now on: it does not get the six turns the busy namespace had meanwhile.
    assert _drain(queue, 4) == ["l0", "b6", "l1", "b7"]


def test_a_run_queued_again_keeps_its_place_and_its_latest_view() -> None:
    queue = FairQueue()
    queue.put("a", "team", "run-a", {"v": 1})
    queue.put("b", "team", "run-b", None)
    queue.put("a", "team", "run-a", {"v": 2})
    assert len(queue) == 2
    assert queue.take() == ("a", "team", "run-a", {"v": 2})
    queue.drop("b")
    assert "b" not in queue
    assert queue.take() is None
