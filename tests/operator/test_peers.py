"""The replica that claims a new run: every replica that knows the same peers picks the same one,
runs spread over the replicas, and a replica not seen holding a run lately is not picked."""

from __future__ import annotations

import time
import uuid
from collections import Counter

from agentrun.operator._peers import Peers


def _knowing(me: str, *others: str, memory: float = 60.0) -> Peers:
    peers = Peers(me, memory=memory)
    for other in others:
        peers.saw(other)
    return peers


def test_replicas_that_know_each_other_agree_on_one_claimer_a_run() -> None:
    a = _knowing("replica-a", "replica-b")
    b = _knowing("replica-b", "replica-a")
    runs = [str(uuid.uuid4()) for _ in range(1000)]
    picked = Counter(a.preferred(run) for run in runs)
    assert [a.preferred(run) for run in runs] == [b.preferred(run) for run in runs]
    assert set(picked) == {"replica-a", "replica-b"}
    assert min(picked.values()) > 400, picked  # about half each


def test_a_replica_that_knows_no_other_claims_every_run_itself() -> None:
    alone = Peers("replica-a")
    assert {alone.preferred(str(uuid.uuid4())) for _ in range(50)} == {"replica-a"}


def test_a_replica_not_seen_holding_a_run_lately_is_forgotten() -> None:
    peers = _knowing("replica-a", "replica-b", memory=0.05)
    assert peers.live() == ["replica-a", "replica-b"]
    time.sleep(0.1)
    assert peers.live() == ["replica-a"]


def test_a_peer_is_last_seen_when_it_last_held_a_run_and_this_replica_always_now() -> None:
    peers = Peers("replica-a")
    assert peers.last_seen("replica-b") == float("-inf")
    peers.saw("replica-b")
    seen = peers.last_seen("replica-b")
    assert time.monotonic() - seen < 1.0
    assert peers.last_seen("replica-a") >= seen
