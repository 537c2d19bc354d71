"""A cluster's life around a run: rolling updates, deletions, and two installs side by side.

Each test does to real operator processes what Kubernetes does to their pods (SIGTERM on a
rolling update, a ``kubectl delete``, a second Helm release) and counts, in the outside world's
records, that no side effect was made twice, left undecidable, or made after the run was gone.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.support.agentruns import (
    apply_run,
    count_effects,
    effect_details,
    get_run,
    has_condition,
    lease_of,
    wait_until_completed,
)
from tests.support.kube import Kube
from tests.support.operator import Operators, Replica, wait_for
from tests.support.redis_server import RedisServer, redis_server

from agentrun import open_backend
from agentrun.operator._config import DEFAULT_CONTROLLER


def _stored(redis_url: str, tenant: str, uid: str) -> bytes | None:
    async def latest() -> bytes | None:
        backend = await open_backend(redis_url)
        try:
            return await backend.checkpoints.latest(tenant, uid)
        finally:
            await backend.close()

    return asyncio.run(latest())


def test_sigterm_mid_call_lets_the_call_finish_and_hands_the_run_over(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    """A rolling update: the holder is sent SIGTERM while a keyless text is being sent. The
    text completes and is recorded, the lease is handed back, another replica finishes the run:
    one text, never Indeterminate."""
    texts = count_effects(effects, "sms")
    lingering = operators.start("replica-term", AGENTRUN_TEST_SMS_LINGER="4")
    others = [r for r in operators.replicas if r is not lingering and r.process.poll() is None]
    for replica in others:
        replica.signal(signal.SIGSTOP)  # only the lingering replica may take this run
    try:
        apply_run(kube, "rolled", "texter", ttl=120)
        wait_for("the text", lambda: count_effects(effects, "sms") == texts + 1, 60, operators.logs)
    finally:
        for replica in others:
            replica.signal(signal.SIGCONT)
    first = lease_of(kube, "rolled")
    terminated_at = time.monotonic()
    lingering.signal(signal.SIGTERM)
    wait_for(
        "another holder",
        lambda: lease_of(kube, "rolled").get("fence", 0) > first["fence"],
        60,
        operators.logs,
    )
    handed_over = time.monotonic() - terminated_at
    assert lingering.wait(timeout=30) == 0
    exited = time.monotonic() - terminated_at
    wait_until_completed(kube, "rolled", operators.logs)
    assert count_effects(effects, "sms") == texts + 1
    status = get_run(kube, "rolled")["status"]
    assert not status.get("indeterminateCalls")
    assert has_condition(kube, "rolled", "Indeterminate", "False", "Decided")
    described = kube.kubectl("describe", "agentrun", "rolled").stdout
    assert "IndeterminateCall" not in described, described
    print(f"SIGTERM to handover {handed_over:.1f}s, to exit {exited:.1f}s")
    assert exited < 25, f"the replica took {exited:.1f}s to exit; the grace period is 30s"


def test_deleting_a_running_run_stops_it_within_seconds_and_forgets_it(
    kube: Kube, operators: Operators, effects: Path, redis: RedisServer
) -> None:
    apply_run(kube, "deleted", "ticker", ttl=120)
    wait_for("a few ticks", lambda: len(effect_details(effects, "tick")) >= 3, 60, operators.logs)
    uid = get_run(kube, "deleted")["metadata"]["uid"]
    deleted_at = time.time()
    kube.kubectl("delete", "agentrun", "deleted", "--timeout=60s")
    gone = time.time() - deleted_at
    time.sleep(2)
    late = [float(t) - deleted_at for t in effect_details(effects, "tick") if float(t) > deleted_at]
    print(f"kubectl delete to gone {gone:.1f}s; calls begun after the delete at {late}")
    assert gone < 5, f"the running run took {gone:.1f}s to delete"
    # The holder notices the deletion from its watch within a moment; a call it had already
    # begun completes, and it begins none after that.
    assert all(t < 1.0 for t in late), late
    assert len(late) <= 1, late
    assert _stored(redis.url, kube.namespace, uid) is None
    keys = redis.cli("--scan", "--pattern", f"*{uid}*").split()
    assert all(key.endswith(":fence") or key.endswith(":lease") for key in keys), keys


def test_a_run_whose_holder_died_is_forgotten_once_its_lease_lapses(
    kube: Kube, operators: Operators, effects: Path, redis: RedisServer
) -> None:
    """Nobody is left to stop the run: a replica that is not the holder does not wait for it,
    and forgets the run (under the lease) once the dead holder's lease lapses."""
    ticks = len(effect_details(effects, "tick"))
    apply_run(kube, "orphaned", "ticker", ttl=5)
    wait_for(
        "a few ticks",
        lambda: len(effect_details(effects, "tick")) >= ticks + 3,
        60,
        operators.logs,
    )
    holder = operators.by_holder(lease_of(kube, "orphaned")["holder"])
    uid = get_run(kube, "orphaned")["metadata"]["uid"]
    holder.signal(signal.SIGKILL)
    holder.wait()
    deleted_at = time.time()
    kube.kubectl("delete", "agentrun", "orphaned", "--timeout=60s")
    gone = time.time() - deleted_at
    print(f"holder dead: kubectl delete to gone {gone:.1f}s (lease TTL 5s)")
    assert gone < 15, f"took {gone:.1f}s; the lease lapses after 5s"
    assert not [t for t in effect_details(effects, "tick") if float(t) > deleted_at]
    assert _stored(redis.url, kube.namespace, uid) is None
    operators.start(holder.name)


SECOND = "example.com/second-install"


def _wait_for_success(kube: Kube, names: list[str], logs: Callable[[], str]) -> None:
    for name in names:
        wait_until_completed(kube, name, logs)


def test_two_installs_never_both_run_one_agentrun(
    kube: Kube,
    operators: Operators,
    effects: Path,
    redis: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A second install (another controller name, its own store) watches the same namespace:
    each run is claimed by one install and executed by it alone, once."""
    with redis_server(tmp_path_factory.mktemp("second-store")) as other:
        second = Operators(
            kube.control_plane,
            kube.namespace,
            other.url,
            tmp_path_factory.mktemp("second-install"),
            env={**operators.env, "AGENTRUN_CONTROLLER_NAME": SECOND},
        )
        second.start("second-a")
        second.start("second-b")
        try:
            texts = count_effects(effects, "sms")
            names = [f"shared-{n}" for n in range(4)]
            for name in names:
                apply_run(kube, name, "texter")
            _wait_for_success(kube, names, lambda: operators.logs() + second.logs())
            time.sleep(2)
            assert count_effects(effects, "sms") == texts + len(names)
            apply_run(kube, "named", "texter", extra=f"  controllerName: {SECOND}\n")
            _wait_for_success(kube, ["named"], lambda: operators.logs() + second.logs())
            assert get_run(kube, "named")["status"]["controller"] == SECOND
            stores = {DEFAULT_CONTROLLER: redis.url, SECOND: other.url}
            for name in [*names, "named"]:
                run = get_run(kube, name)
                owner = run["status"]["controller"]
                uid = run["metadata"]["uid"]
                for controller, store in stores.items():
                    kept = _stored(store, kube.namespace, uid)
                    assert (kept is not None) == (controller == owner), (name, controller)
            assert count_effects(effects, "sms") == texts + len(names) + 1
        finally:
            second.stop_all()


def _events(kube: Kube, name: str) -> list[dict[str, Any]]:
    listed = json.loads(
        kube.kubectl(
            "get", "events", f"--field-selector=involvedObject.name={name}", "-o", "json"
        ).stdout
    )
    return list(listed["items"])


def _runs_gauge(replica: Replica) -> dict[str, float]:
    """``agentrun_runs`` as one replica reports it, by reason; nothing yet from a replica an
    earlier test restarted that is still starting."""
    found: dict[str, float] = {}
    for line in replica.metrics().splitlines():
        if match := re.match(r'agentrun_runs\{reason="([^"]+)"\} (\S+)', line):
            found[match[1]] = float(match[2])
    return found


def _completed(kube: Kube) -> int:
    """Completed runs of the default install (another install's runs are not its to count)."""
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    return sum(
        1
        for run in listed
        if (run.get("status") or {}).get("controller") == DEFAULT_CONTROLLER
        and any(
            c["type"] == "Succeeded" and c["reason"] == "Completed"
            for c in (run.get("status") or {}).get("conditions") or ()
        )
    )


def test_a_finished_runs_status_events_and_gauge_tell_the_truth(
    kube: Kube, operators: Operators
) -> None:
    """With checkpoints only after tool results the last model call is written nowhere but the
    status: iteration and usage still count it. Nobody holds a finished run, its events say who
    posted them and that it completed, a spec edit after the end is observed, and every replica's
    ``agentrun_runs`` counts the namespace's runs, deleted ones not."""
    sparse = "  checkpointPolicy:\n    boundaries: [after_tool_result]\n"
    apply_run(kube, "sparse", "slowbook", extra=sparse)
    wait_until_completed(kube, "sparse", operators.logs)
    status = get_run(kube, "sparse")["status"]
    assert status["iteration"] == 4
    assert status["usage"]["inputTokens"] == 3 * 100 + 50
    assert status["usage"]["outputTokens"] == 3 * 10 + 5
    assert status["lease"]["fence"] >= 1
    assert "holder" not in status["lease"], status["lease"]
    holder = kube.kubectl(
        "get", "agentrun", "sparse", "-o", "custom-columns=HOLDER:.status.lease.holder"
    ).stdout.split()
    assert holder == ["HOLDER", "<none>"], holder

    events = _events(kube, "sparse")
    completed = [e for e in events if e["reason"] == "Completed"]
    assert len(completed) == 1, events
    assert {e["source"]["component"] for e in events} == {DEFAULT_CONTROLLER}, events
    described = kube.kubectl("describe", "agentrun", "sparse").stdout
    assert " kopf " not in described, described
    assert f"{DEFAULT_CONTROLLER}  " in described, described

    kube.kubectl("patch", "agentrun", "sparse", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(
        "observedGeneration 2",
        lambda: get_run(kube, "sparse")["status"].get("observedGeneration") == 2,
        30,
        operators.logs,
    )
    caught_up = get_run(kube, "sparse")["status"]
    assert {c["observedGeneration"] for c in caught_up["conditions"]} == {2}
    assert has_condition(kube, "sparse", "Succeeded", "True", "Completed")

    live = [r for r in operators.replicas if r.process.poll() is None]
    assert len(live) >= 2
    wait_for(
        "every replica to count every completed run",
        lambda: all(_runs_gauge(r).get("Completed", 0) == _completed(kube) for r in live),
        30,
        operators.logs,
    )
    before = _completed(kube)
    kube.kubectl("delete", "agentrun", "sparse", "--timeout=30s")
    wait_for(
        "every replica to stop counting the deleted run",
        lambda: all(_runs_gauge(r).get("Completed", 0) == before - 1 for r in live),
        30,
        operators.logs,
    )


def test_an_unknown_agent_waits_with_one_event(kube: Kube, operators: Operators) -> None:
    apply_run(kube, "nobody", "no-such-agent")
    wait_for(
        "AgentNotRegistered",
        lambda: has_condition(kube, "nobody", "Succeeded", "Unknown", "AgentNotRegistered"),
        60,
        operators.logs,
    )
    time.sleep(3)
    posted = [e for e in _events(kube, "nobody") if e["reason"] == "AgentNotRegistered"]
    assert sum(e.get("count") or 1 for e in posted) == 1, posted
    assert "no-such-agent" in posted[0]["message"]
    assert posted[0]["type"] == "Warning"
