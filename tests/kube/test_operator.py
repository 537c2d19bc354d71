"""The operator end to end: two or three real replicas, a real API server, a real Redis.

Every test applies AgentRuns with kubectl and watches what a person would watch: conditions,
printer columns, events, and the outside world's records (``operator_agents`` writes bookings
and texts to a SQLite file the tests count).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.kube.operator_agents import LEAKED
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer, redis_server

from agentrun.stores.backend import open_backend


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with redis_server(tmp_path_factory.mktemp("operator-redis")) as server:
        yield server


@pytest.fixture(scope="module")
def effects(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("effects") / "effects.db"


@pytest.fixture(scope="module")
def operators(
    kube: Kube, redis: RedisServer, effects: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operators]:
    pool = Operators(
        kube.control_plane,
        kube.namespace,
        redis.url,
        tmp_path_factory.mktemp("operators"),
        env={
            "AGENTRUN_AGENT_MODULES": "tests.kube.operator_agents",
            "AGENTRUN_TEST_EFFECTS": str(effects),
        },
    )
    pool.start("replica-a")
    pool.start("replica-b")
    try:
        yield pool
    finally:
        pool.stop_all()


def _count(effects: Path, kind: str, detail_like: str = "%") -> int:
    with sqlite3.connect(effects, timeout=10) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
        return int(
            connection.execute(
                "SELECT count(*) FROM effects WHERE kind = ? AND detail LIKE ?", (kind, detail_like)
            ).fetchone()[0]
        )


def _apply(kube: Kube, name: str, agent: str, *, extra: str = "", ttl: int = 5) -> None:
    manifest = (
        textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: AgentRun
        metadata:
          name: {name}
        spec:
          agent: {agent}
          input: go
          leasePolicy:
            ttlSeconds: {ttl}
            renewWithinSeconds: 2
        """)
        + extra
    )
    kube.kubectl("apply", "-f", "-", stdin=manifest)


def _agentrun_cli(kube: Kube, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["agentrun", *args],
        capture_output=True,
        text=True,
        env=kube.control_plane.env(),
        timeout=60,
        check=False,
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _get(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    return found


def _condition(kube: Kube, name: str, type_: str) -> dict[str, Any]:
    for condition in (_get(kube, name).get("status") or {}).get("conditions") or ():
        if condition["type"] == type_:
            return dict(condition)
    return {}


def _is(kube: Kube, name: str, type_: str, status: str, reason: str | None = None) -> bool:
    condition = _condition(kube, name, type_)
    return condition.get("status") == status and reason in (None, condition.get("reason"))


def _booked(kube: Kube, operators: Operators, effects: Path, name: str, ttl: int = 5) -> int:
    """Apply a ``slowbook`` run and wait until it has booked; the bookings made before it."""
    before = _count(effects, "booking")
    _apply(kube, name, "slowbook", ttl=ttl)
    wait_for("the booking", lambda: _count(effects, "booking") == before + 1, 60, operators.logs)
    return before


def _lease(kube: Kube, name: str) -> dict[str, Any]:
    return dict((_get(kube, name).get("status") or {}).get("lease") or {})


def test_a_run_succeeds_and_tells_kubectl(kube: Kube, operators: Operators, effects: Path) -> None:
    _apply(kube, "plain", "slowbook")
    wait_for(
        "plain to succeed",
        lambda: _is(kube, "plain", "Succeeded", "True", "Completed"),
        60,
        operators.logs,
    )
    status = _get(kube, "plain")["status"]
    assert status["observedGeneration"] == 1
    assert status["lease"]["fence"] >= 1
    assert status["iteration"] == 4
    assert status["usage"]["costMicros"] > 0
    assert status["checkpoint"]["boundary"] == "after_model_call"
    assert _is(kube, "plain", "Checkpointed", "True", "Written")
    assert _is(kube, "plain", "AwaitingApproval", "False")
    assert _is(kube, "plain", "Indeterminate", "False")

    table = kube.kubectl("get", "agentruns", "-o", "wide").stdout
    header, *rows = table.splitlines()
    assert header.split()[:7] == [
        "NAME",
        "STATUS",
        "AGENT",
        "ITERATION",
        "FENCE",
        "HOLDER",
        "RESUMES",
    ]
    row = next(r for r in rows if r.startswith("plain "))
    assert row.split()[1:4] == ["Completed", "slowbook", "4"]

    described = kube.kubectl("describe", "agentrun", "plain").stdout
    for expected in ("Succeeded", "Checkpointed", "LeaseTaken", "Completed"):
        assert expected in described, described
    assert _count(effects, "booking", "LH1172%") >= 1


def test_sigkill_of_the_holder_hands_the_run_over_without_a_second_booking(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = _booked(kube, operators, effects, "killed")
    first = _lease(kube, "killed")
    victim = operators.by_holder(first["holder"])
    victim.signal(signal.SIGKILL)
    victim.wait()
    operators.start(victim.name)  # the Deployment would bring a new pod; it is a new holder
    wait_for(
        "another holder",
        lambda: _lease(kube, "killed").get("fence", 0) > first["fence"],
        60,
        operators.logs,
    )
    wait_for(
        "killed to succeed", lambda: _is(kube, "killed", "Succeeded", "True"), 60, operators.logs
    )
    status = _get(kube, "killed")["status"]
    assert status["lease"]["holder"] != first["holder"]
    assert status["resumeCount"] >= 1
    assert _count(effects, "booking") == before + 1
    assert "RunResumed" in kube.kubectl("describe", "agentrun", "killed").stdout


def test_sigterm_of_the_holder_hands_over_without_waiting_for_the_ttl(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = _booked(kube, operators, effects, "drained", ttl=120)
    first = _lease(kube, "drained")
    victim = operators.by_holder(first["holder"])
    stopped_at = time.monotonic()
    victim.signal(signal.SIGTERM)
    wait_for(
        "another holder",
        lambda: _lease(kube, "drained").get("fence", 0) > first["fence"],
        60,
        operators.logs,
    )
    handed_over = time.monotonic() - stopped_at
    assert victim.wait() == 0
    operators.start(victim.name)
    assert handed_over < 60, f"handover took {handed_over:.1f}s; the TTL is 120s"
    wait_for(
        "drained to succeed", lambda: _is(kube, "drained", "Succeeded", "True"), 60, operators.logs
    )
    assert _count(effects, "booking") == before + 1


@pytest.mark.parametrize(
    ("decision", "status", "reason"),
    [("approve", "True", "Completed"), ("deny", "False", "Denied")],
)
def test_approvals_are_given_through_the_spec(
    kube: Kube, operators: Operators, effects: Path, decision: str, status: str, reason: str
) -> None:
    name = f"refund-{decision}"
    refunds = _count(effects, "refund")
    _apply(kube, name, "approver")
    wait_for(
        "the approval request",
        lambda: _is(kube, name, "AwaitingApproval", "True"),
        60,
        operators.logs,
    )
    pending = _get(kube, name)["status"]["pendingApproval"]
    assert pending["tool"] == "refund"
    assert _is(kube, name, "Succeeded", "Unknown", "AwaitingApproval")
    assert "ApprovalRequested" in kube.kubectl("describe", "agentrun", name).stdout
    patch = {
        "spec": {
            "approvals": [
                {
                    "requestId": pending["requestId"],
                    "decision": decision,
                    "by": "alice",
                    "reason": "checked the order",
                }
            ]
        }
    }
    kube.kubectl("patch", "agentrun", name, "--type=merge", "-p", json.dumps(patch))
    wait_for(
        f"{name} to end", lambda: _is(kube, name, "Succeeded", status, reason), 60, operators.logs
    )
    assert _is(kube, name, "AwaitingApproval", "False")
    assert _count(effects, "refund") == refunds + (1 if decision == "approve" else 0)


def test_an_sms_in_flight_at_the_kill_is_indeterminate_until_a_person_answers(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    lingering = operators.start("replica-slow", AGENTRUN_TEST_SMS_LINGER="30")
    for replica in operators.replicas:
        if replica is not lingering:
            replica.signal(signal.SIGSTOP)  # only the lingering replica may take this run
    try:
        _apply(kube, "texted", "texter")
        wait_for("the text", lambda: _count(effects, "sms") == 1, 60, operators.logs)
        lingering.signal(signal.SIGKILL)
        lingering.wait()
    finally:
        for replica in operators.replicas:
            if replica is not lingering:
                replica.signal(signal.SIGCONT)
    wait_for(
        "texted to be indeterminate",
        lambda: _is(kube, "texted", "Indeterminate", "True"),
        60,
        operators.logs,
    )
    status = _get(kube, "texted")["status"]
    [call] = status["indeterminateCalls"]
    assert call["tool"] == "send_sms"
    assert call["callId"] in _condition(kube, "texted", "Indeterminate")["message"]
    assert _is(kube, "texted", "Succeeded", "Unknown", "Indeterminate")
    time.sleep(2)
    assert _count(effects, "sms") == 1, "an undecidable call must never be retried"
    patch = {
        "spec": {
            "resolutions": [
                {"callId": call["callId"], "outcome": "ran", "result": "sent", "by": "on-call"}
            ]
        }
    }
    kube.kubectl("patch", "agentrun", "texted", "--type=merge", "-p", json.dumps(patch))
    wait_for(
        "texted to succeed", lambda: _is(kube, "texted", "Succeeded", "True"), 60, operators.logs
    )
    assert _count(effects, "sms") == 1
    assert _is(kube, "texted", "Indeterminate", "False")


def test_a_superseded_replicas_status_write_is_rejected_by_the_api_server(
    kube: Kube, operators: Operators
) -> None:
    from kubernetes.config import new_client_from_config

    from agentrun.operator.kubeapi import KubeApi
    from agentrun.operator.status import StatusWriter, Superseded
    from agentrun.redaction import Masker

    _apply(kube, "fenced", "slowbook")
    wait_for(
        "fenced to succeed", lambda: _is(kube, "fenced", "Succeeded", "True"), 60, operators.logs
    )
    current = _lease(kube, "fenced")["fence"]

    async def stale_write() -> None:
        # The client's loader is untyped; it returns an ApiClient.
        api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
        writer = StatusWriter(api, kube.namespace, "fenced", Masker.build())
        writer.fence = current - 1
        with pytest.raises(Superseded):
            await writer.write({"iteration": 99})
        newer = StatusWriter(api, kube.namespace, "fenced", Masker.build())
        with pytest.raises(Superseded):
            await newer.take_over("impostor", current, resumed=False)

    asyncio.run(stale_write())
    assert _get(kube, "fenced")["status"]["iteration"] == 4


def test_a_run_naming_another_tenant_is_rejected_and_never_touches_the_store(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _apply(kube, "trespass", "slowbook", extra="  tenant: somebody-else\n")
    wait_for(
        "the rejection",
        lambda: _is(kube, "trespass", "Succeeded", "False", "TenantNotAllowed"),
        60,
        operators.logs,
    )
    uid = _get(kube, "trespass")["metadata"]["uid"]
    assert redis.cli("--scan", "--pattern", f"*{uid}*") == ""
    assert "agentrun.dev/forget-run" not in (
        _get(kube, "trespass")["metadata"].get("finalizers") or []
    )


def test_deleting_a_run_forgets_it_in_the_stores(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _apply(kube, "forgotten", "slowbook")
    wait_for(
        "forgotten to succeed",
        lambda: _is(kube, "forgotten", "Succeeded", "True"),
        60,
        operators.logs,
    )
    uid = _get(kube, "forgotten")["metadata"]["uid"]

    async def latest() -> bytes | None:
        backend = await open_backend(redis.url)
        try:
            return await backend.checkpoints.latest(kube.namespace, uid)
        finally:
            await backend.close()

    assert asyncio.run(latest()) is not None
    kube.kubectl("delete", "agentrun", "forgotten", "--timeout=60s")
    assert asyncio.run(latest()) is None
    keys = redis.cli("--scan", "--pattern", f"*{uid}*").split()
    assert all(key.endswith(":fence") or key.endswith(":lease") for key in keys), keys


def test_no_secret_reaches_the_status_the_events_the_log_or_the_store(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    """``leaky``'s tool returns an access token, logs it, and the model repeats it in its final
    answer, which the operator writes into the Succeeded condition. Masked everywhere."""
    _apply(kube, "leaky", "leaky")
    wait_for(
        "leaky to succeed",
        lambda: _is(kube, "leaky", "Succeeded", "True", "Completed"),
        60,
        operators.logs,
    )
    assert _condition(kube, "leaky", "Succeeded")["message"] == "Here it is: [REDACTED]"
    uid = _get(kube, "leaky")["metadata"]["uid"]
    kept = [kube.kubectl("get", "agentrun", "leaky", "-o", "json").stdout]
    kept.append(kube.kubectl("get", "events", "-o", "json").stdout)
    kept.extend(replica.output() for replica in operators.replicas)
    for key in redis.cli("--scan", "--pattern", f"*{uid}*").split():
        kind = redis.cli("TYPE", key).strip()
        kept.append(redis.cli("HGETALL" if kind == "hash" else "GET", key))
    assert any("report q3 is ready; open it with [REDACTED]" in text for text in kept)
    assert any("fetched report q3, token [REDACTED]" in text for text in kept)
    leaks = [text[:300] for text in kept if LEAKED in text]
    assert not leaks, leaks


def test_the_store_going_away_mid_run_shows_and_recovers(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _apply(kube, "weathered", "patient", ttl=30)
    wait_for(
        "the first wait",
        lambda: _get(kube, "weathered").get("status", {}).get("iteration") == 1,
        60,
        operators.logs,
    )
    seen: list[dict[str, Any]] = []

    def refused() -> bool:
        seen.append(_condition(kube, "weathered", "Checkpointed"))
        return seen[-1].get("status") == "False"

    redis.pause()
    try:
        wait_for("Checkpointed=False", refused, 30, operators.logs)
    finally:
        redis.resume()
    assert seen[-1]["reason"] == "StoreUnavailable"
    wait_for(
        "weathered to succeed",
        lambda: _is(kube, "weathered", "Succeeded", "True"),
        60,
        operators.logs,
    )
    assert _is(kube, "weathered", "Checkpointed", "True", "Written")
    assert "CheckpointRefused" in kube.kubectl("describe", "agentrun", "weathered").stdout


def test_a_changed_agent_definition_is_refused_as_a_revision_mismatch(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = _booked(kube, operators, effects, "revised", ttl=5)
    for replica in operators.replicas:
        replica.signal(signal.SIGKILL)
        replica.process.wait()
    operators.start("replica-new", AGENTRUN_TEST_REVISION="2")
    wait_for(
        "the revision mismatch",
        lambda: _is(kube, "revised", "Succeeded", "False", "RevisionMismatch"),
        60,
        operators.logs,
    )
    assert _count(effects, "booking") == before + 1
    operators.start("replica-a")
    operators.start("replica-b")


def test_suspend_pauses_the_run_at_its_next_step_and_hands_the_lease_back(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _apply(kube, "paused", "patient", ttl=60)
    wait_for(
        "the first wait",
        lambda: _get(kube, "paused").get("status", {}).get("iteration") == 1,
        60,
        operators.logs,
    )
    kube.kubectl("patch", "agentrun", "paused", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(
        "Suspended",
        lambda: _is(kube, "paused", "Succeeded", "Unknown", "Suspended"),
        60,
        operators.logs,
    )
    uid = _get(kube, "paused")["metadata"]["uid"]

    async def held() -> object:
        backend = await open_backend(redis.url)
        try:
            return await backend.leases.held(kube.namespace, uid)
        finally:
            await backend.close()

    wait_for("the lease handed back", lambda: asyncio.run(held()) is None, 10, operators.logs)
    iteration = _get(kube, "paused")["status"]["iteration"]
    time.sleep(3)
    assert _get(kube, "paused")["status"]["iteration"] == iteration
    kube.kubectl("patch", "agentrun", "paused", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    wait_for(
        "paused to succeed", lambda: _is(kube, "paused", "Succeeded", "True"), 60, operators.logs
    )
    assert _get(kube, "paused")["status"]["resumeCount"] >= 1
