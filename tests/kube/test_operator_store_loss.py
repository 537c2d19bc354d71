"""A run whose store data vanished is never started over from scratch behind anyone's back.

The AgentRun lives in etcd; its store (here a real Redis without persistence) can forget. Each
test takes a run past a side effect that the outside world does not deduplicate (a booking,
counted in ``effects``), makes the store forget or look elsewhere, and checks that no booking is
made twice: the run either carries on from where it was (its tenant is pinned in its status), or
waits with ``Succeeded=Unknown``/``StoreDataLost`` until a person deletes it (forget) or creates
it again (start over, knowingly).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

from tests.support.agentruns import (
    apply_run,
    book_slowly,
    count_effects,
    get_run,
    has_condition,
    wait_until_completed,
)
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer, redis_server

ONLY_APPROVALS = "  checkpointPolicy:\n    boundaries: [before_approval]\n"
"""With this policy the ``patient`` agent (read-only calls only) never writes a checkpoint: its
status names the lease and nothing else, as a run's does when its holder dies before its first
checkpoint, or when the status write after a checkpoint failed. Then only the store's record of
the run's start tells an ordinary crash from a store that forgot."""


def _replace_every_replica(operators: Operators, between: object = None) -> None:
    """SIGKILL every replica (no holder lives on to write into the store again), do
    ``between``, then start two new ones, as the Deployment would."""
    for replica in operators.replicas:
        replica.signal(signal.SIGKILL)
        replica.process.wait()
    if callable(between):
        between()
    operators.start("replica-c")
    operators.start("replica-d")


def _checkpointed(kube: Kube, name: str) -> bool:
    return bool(
        ((get_run(kube, name).get("status") or {}).get("checkpoint") or {}).get("writtenAt")
    )


def test_a_redis_restart_without_persistence_parks_the_run_instead_of_repeating_it(
    kube: Kube, operators: Operators, redis: RedisServer, effects: Path
) -> None:
    before = book_slowly(kube, operators, effects, "wiped")
    wait_for("a checkpoint", lambda: _checkpointed(kube, "wiped"), 30, operators.logs)
    _replace_every_replica(operators, between=redis.restart)
    wait_for(
        "StoreDataLost, or a second booking",
        lambda: (
            has_condition(kube, "wiped", "Succeeded", "Unknown", "StoreDataLost")
            or count_effects(effects, "booking") > before + 1
        ),
        60,
        operators.logs,
    )
    time.sleep(3)  # the replicas had every chance to start it again
    assert count_effects(effects, "booking") == before + 1
    assert has_condition(kube, "wiped", "Succeeded", "Unknown", "StoreDataLost")
    described = kube.kubectl("describe", "agentrun", "wiped").stdout
    assert "StoreDataLost" in described
    assert "a checkpoint was written" in described
    assert "delete it and create it again to start over" in described

    # A person chooses to start over, knowing the booking may be made again: delete, recreate.
    kube.kubectl("delete", "agentrun", "wiped", "--timeout=60s")
    apply_run(kube, "wiped", "slowbook")
    wait_until_completed(kube, "wiped", operators.logs)
    assert count_effects(effects, "booking") == before + 2


def _leased_without_checkpoint(kube: Kube, operators: Operators, name: str) -> None:
    apply_run(kube, name, "patient", extra=ONLY_APPROVALS)
    wait_for(
        "the lease",
        lambda: (get_run(kube, name).get("status") or {}).get("lease") is not None,
        60,
        operators.logs,
    )


def test_a_run_whose_start_the_store_forgot_is_parked(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _leased_without_checkpoint(kube, operators, "forgotten-start")
    _replace_every_replica(operators, between=redis.restart)
    wait_for(
        "StoreDataLost",
        lambda: has_condition(kube, "forgotten-start", "Succeeded", "Unknown", "StoreDataLost"),
        60,
        operators.logs,
    )
    described = kube.kubectl("describe", "agentrun", "forgotten-start").stdout
    assert "of which the store keeps no record" in described
    assert not _checkpointed(kube, "forgotten-start")
    kube.kubectl("delete", "agentrun", "forgotten-start", "--timeout=60s")  # forget it


def test_a_crash_before_the_first_checkpoint_still_starts_over_by_itself(
    kube: Kube, operators: Operators
) -> None:
    """The same, with the store intact: it remembers the start, so this is an ordinary crash,
    and the run starts again from its input without anyone's say (nothing unsafe was made: a
    call that is not safe to repeat is always checkpointed before it is made)."""
    _leased_without_checkpoint(kube, operators, "crashed")
    _replace_every_replica(operators)
    wait_until_completed(kube, "crashed", operators.logs)


def test_relabelling_the_namespace_mid_run_does_not_move_the_run(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = book_slowly(kube, operators, effects, "relabelled")
    kube.kubectl("label", "namespace", kube.namespace, "agentrun.dev/tenant=elsewhere")
    try:
        _replace_every_replica(operators)  # new daemons, which read the namespace's labels
        wait_until_completed(kube, "relabelled", operators.logs)
    finally:
        kube.kubectl("label", "namespace", kube.namespace, "agentrun.dev/tenant-")
    assert count_effects(effects, "booking") == before + 1
    status = get_run(kube, "relabelled")["status"]
    assert status["tenant"] == kube.namespace
    assert status["resumeCount"] >= 1
    refused = kube.kubectl(
        "patch", "agentrun", "relabelled", "--subresource=status", "--type=merge",
        "-p", '{"status":{"tenant":"elsewhere"}}', check=False,
    )  # fmt: skip
    assert "tenant is pinned at the run's first step" in refused.stderr, refused.stderr


def test_an_operator_on_a_redis_that_may_evict_exits_saying_why(
    operators: Operators, tmp_path: Path
) -> None:
    with redis_server(tmp_path / "evicting") as evicting:
        evicting.cli("config", "set", "maxmemory-policy", "allkeys-lru")
        replica = operators.start("replica-evicting", AGENTRUN_STORE_URL=evicting.url)
        assert replica.wait(timeout=60) != 0
    assert "runs maxmemory-policy allkeys-lru" in replica.output()
