"""The operator end to end: two or three real replicas, a real API server, a real Redis.

Every test applies AgentRuns with kubectl and watches what a person would watch: conditions,
printer columns, events, and the outside world's records (``operator_agents`` writes bookings
and texts to a SQLite file the tests count).
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from tests.kube.operator_agents import LEAKED
from tests.support.agentruns import (
    apply_run,
    book_slowly,
    condition,
    count_effects,
    get_run,
    has_condition,
    lease_of,
    text_cut_short,
    wait_until_completed,
)
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun import Checkpointer, open_backend
from agentrun._history import load_transcript


def test_a_run_succeeds_and_tells_kubectl(kube: Kube, operators: Operators, effects: Path) -> None:
    apply_run(kube, "plain", "slowbook")
    wait_until_completed(kube, "plain", operators.logs)
    status = get_run(kube, "plain")["status"]
    assert status["observedGeneration"] == 1
    assert status["lease"]["fence"] >= 1
    assert status["iteration"] == 4
    assert status["usage"]["costMicros"] > 0
    assert status["checkpoint"]["boundary"] == "after_model_call"
    assert has_condition(kube, "plain", "Checkpointed", "True", "Written")
    assert has_condition(kube, "plain", "AwaitingApproval", "False")
    assert has_condition(kube, "plain", "Indeterminate", "False")

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
    for expected in ("Succeeded", "Checkpointed", "Completed"):
        assert expected in described, described
    # A run's first lease posts no event (its Running condition named the holder); a handover
    # does (the SIGKILL test below).
    assert "LeaseTaken" not in described, described
    assert count_effects(effects, "booking", "LH1172%") >= 1


def test_sigkill_of_the_holder_hands_the_run_over_without_a_second_booking(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = book_slowly(kube, operators, effects, "killed")
    first = lease_of(kube, "killed")
    victim = operators.by_holder(first["holder"])
    victim.signal(signal.SIGKILL)
    victim.wait()
    operators.start(victim.name)  # the Deployment would bring a new pod; it is a new holder
    wait_for(
        "another holder",
        lambda: lease_of(kube, "killed").get("fence", 0) > first["fence"],
        60,
        operators.logs,
    )
    wait_for(
        "killed to succeed",
        lambda: has_condition(kube, "killed", "Succeeded", "True"),
        60,
        operators.logs,
    )
    status = get_run(kube, "killed")["status"]
    assert "holder" not in status["lease"], "nobody holds a finished run"
    assert status["resumeCount"] >= 1
    assert count_effects(effects, "booking") == before + 1
    described = kube.kubectl("describe", "agentrun", "killed").stdout
    for expected in ("RunResumed", "LeaseTaken"):
        assert expected in described, described


def test_sigterm_of_the_holder_hands_over_without_waiting_for_the_ttl(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = book_slowly(kube, operators, effects, "drained", ttl=120)
    first = lease_of(kube, "drained")
    victim = operators.by_holder(first["holder"])
    stopped_at = time.monotonic()
    victim.signal(signal.SIGTERM)
    wait_for(
        "another holder",
        lambda: lease_of(kube, "drained").get("fence", 0) > first["fence"],
        60,
        operators.logs,
    )
    handed_over = time.monotonic() - stopped_at
    assert victim.wait() == 0
    operators.start(victim.name)
    assert handed_over < 60, f"handover took {handed_over:.1f}s; the TTL is 120s"
    wait_for(
        "drained to succeed",
        lambda: has_condition(kube, "drained", "Succeeded", "True"),
        60,
        operators.logs,
    )
    assert count_effects(effects, "booking") == before + 1


@pytest.mark.parametrize(
    ("decision", "status", "reason"),
    [("approve", "True", "Completed"), ("deny", "False", "Denied")],
)
def test_approvals_are_given_through_the_spec(
    kube: Kube, operators: Operators, effects: Path, decision: str, status: str, reason: str
) -> None:
    name = f"refund-{decision}"
    refunds = count_effects(effects, "refund")
    apply_run(kube, name, "approver")
    wait_for(
        "the approval request",
        lambda: has_condition(kube, name, "AwaitingApproval", "True"),
        60,
        operators.logs,
    )
    pending = get_run(kube, name)["status"]["pendingApproval"]
    assert pending["tool"] == "refund"
    assert has_condition(kube, name, "Succeeded", "Unknown", "AwaitingApproval")
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
    alice = kube.grant("alice", "agentrun-approve")
    alice.kubectl("patch", "agentrun", name, "--type=merge", "-p", json.dumps(patch))
    wait_for(
        f"{name} to end",
        lambda: has_condition(kube, name, "Succeeded", status, reason),
        60,
        operators.logs,
    )
    assert has_condition(kube, name, "AwaitingApproval", "False")
    assert count_effects(effects, "refund") == refunds + (1 if decision == "approve" else 0)


def test_an_sms_in_flight_at_the_kill_is_indeterminate_until_a_person_answers(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    call = text_cut_short(kube, operators, effects, "texted")
    assert call["tool"] == "send_sms"
    assert call["callId"] in condition(kube, "texted", "Indeterminate")["message"]
    assert has_condition(kube, "texted", "Succeeded", "Unknown", "Indeterminate")
    time.sleep(2)
    assert count_effects(effects, "sms") == 1, "an undecidable call must never be retried"
    on_call = kube.grant("on-call", "agentrun-approve")
    answered = on_call.agentrun(
        "resolve", "texted", "--kube", "--call", call["callId"], "--ran", "--result", "sent"
    )
    assert answered.returncode == 0, answered.stderr
    assert "(by on-call)" in answered.stdout
    wait_for(
        "texted to succeed",
        lambda: has_condition(kube, "texted", "Succeeded", "True"),
        60,
        operators.logs,
    )
    assert count_effects(effects, "sms") == 1
    assert has_condition(kube, "texted", "Indeterminate", "False")
    [resolution] = get_run(kube, "texted")["spec"]["resolutions"]
    assert resolution == {
        "callId": call["callId"],
        "outcome": "ran",
        "result": "sent",
        "by": "on-call",
    }


def test_a_superseded_replicas_status_write_is_rejected_by_the_api_server(
    kube: Kube, operators: Operators
) -> None:
    from kubernetes.config import new_client_from_config

    from agentrun._redaction import Masker
    from agentrun.operator._kubeapi import KubeApi
    from agentrun.operator._resource import AgentRunStatus
    from agentrun.operator._status import StatusWriter, Superseded

    apply_run(kube, "fenced", "slowbook")
    wait_for(
        "fenced to succeed",
        lambda: has_condition(kube, "fenced", "Succeeded", "True"),
        60,
        operators.logs,
    )
    current = lease_of(kube, "fenced")["fence"]

    async def stale_write() -> None:
        # The client's loader is untyped; it returns an ApiClient.
        api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
        writer = StatusWriter(api, kube.namespace, "fenced", Masker.build())
        writer.fence = current - 1
        with pytest.raises(Superseded):
            await writer.write(AgentRunStatus(iteration=99))
        newer = StatusWriter(api, kube.namespace, "fenced", Masker.build())
        with pytest.raises(Superseded):
            await newer.take_over("impostor", current, resumed=False)

    asyncio.run(stale_write())
    assert get_run(kube, "fenced")["status"]["iteration"] == 4


def test_a_run_naming_another_tenant_is_rejected_and_never_touches_the_store(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    apply_run(kube, "trespass", "slowbook", extra="  tenant: somebody-else\n")
    wait_for(
        "the rejection",
        lambda: has_condition(kube, "trespass", "Succeeded", "False", "TenantNotAllowed"),
        60,
        operators.logs,
    )
    uid = get_run(kube, "trespass")["metadata"]["uid"]
    assert redis.cli("--scan", "--pattern", f"*{uid}*") == ""
    assert "agentrun.dev/forget-run" not in (
        get_run(kube, "trespass")["metadata"].get("finalizers") or []
    )


def test_deleting_a_run_forgets_it_in_the_stores(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    apply_run(kube, "forgotten", "slowbook")
    wait_for(
        "forgotten to succeed",
        lambda: has_condition(kube, "forgotten", "Succeeded", "True"),
        60,
        operators.logs,
    )
    uid = get_run(kube, "forgotten")["metadata"]["uid"]

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
    apply_run(kube, "leaky", "leaky")
    wait_until_completed(kube, "leaky", operators.logs)
    assert condition(kube, "leaky", "Succeeded")["message"] == "Here it is: [REDACTED]"
    uid = get_run(kube, "leaky")["metadata"]["uid"]
    kept = [kube.kubectl("get", "agentrun", "leaky", "-o", "json").stdout]
    kept.append(kube.kubectl("get", "events", "-o", "json").stdout)
    kept.extend(replica.output() for replica in operators.replicas)
    for key in redis.cli("--scan", "--pattern", f"*{uid}*").split():
        kind = redis.cli("TYPE", key).strip()
        kept.append(redis.cli("HGETALL" if kind == "hash" else "GET", key))

    async def transcript_as_stored() -> str:
        # The segments are stored compressed: what they hold is the transcript they decompress to.
        backend = await open_backend(redis.url)
        try:
            checkpoint = await Checkpointer(backend.checkpoints).latest(kube.namespace, uid)
            assert checkpoint is not None
            assert checkpoint.history_handle is not None
            messages = await load_transcript(
                backend.history, kube.namespace, uid, checkpoint.history_handle
            )
            return "\n".join(message.model_dump_json() for message in messages)
        finally:
            await backend.close()

    kept.append(asyncio.run(transcript_as_stored()))
    assert any("report q3 is ready; open it with [REDACTED]" in text for text in kept)
    assert any("fetched report q3, token [REDACTED]" in text for text in kept)
    leaks = [text[:300] for text in kept if LEAKED in text]
    assert not leaks, leaks


def _start_patiently(kube: Kube, operators: Operators, name: str, *, ttl: int) -> None:
    """Apply a run of the ``patient`` agent and wait until it waits after its first step."""
    apply_run(kube, name, "patient", ttl=ttl)
    wait_for(
        "the first wait",
        lambda: get_run(kube, name).get("status", {}).get("iteration") == 1,
        60,
        operators.logs,
    )


def test_the_store_going_away_mid_run_shows_and_recovers(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _start_patiently(kube, operators, "weathered", ttl=30)
    seen: list[dict[str, Any]] = []

    def refused() -> bool:
        seen.append(condition(kube, "weathered", "Checkpointed"))
        return seen[-1].get("status") == "False"

    redis.pause()
    try:
        wait_for("Checkpointed=False", refused, 30, operators.logs)
    finally:
        redis.resume()
    assert seen[-1]["reason"] == "StoreUnavailable"
    wait_for(
        "weathered to succeed",
        lambda: has_condition(kube, "weathered", "Succeeded", "True"),
        60,
        operators.logs,
    )
    assert has_condition(kube, "weathered", "Checkpointed", "True", "Written")
    assert "CheckpointRefused" in kube.kubectl("describe", "agentrun", "weathered").stdout


def test_a_changed_agent_definition_is_refused_as_a_revision_mismatch(
    kube: Kube, operators: Operators, effects: Path
) -> None:
    before = book_slowly(kube, operators, effects, "revised", ttl=5)
    for replica in operators.replicas:
        replica.signal(signal.SIGKILL)
        replica.process.wait()
    operators.start("replica-new", AGENTRUN_TEST_REVISION="2")
    wait_for(
        "the revision mismatch",
        lambda: has_condition(kube, "revised", "Succeeded", "False", "RevisionMismatch"),
        60,
        operators.logs,
    )
    assert count_effects(effects, "booking") == before + 1
    operators.start("replica-a")
    operators.start("replica-b")


def test_suspend_pauses_the_run_at_its_next_step_and_hands_the_lease_back(
    kube: Kube, operators: Operators, redis: RedisServer
) -> None:
    _start_patiently(kube, operators, "paused", ttl=60)
    kube.kubectl("patch", "agentrun", "paused", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    wait_for(
        "Suspended",
        lambda: has_condition(kube, "paused", "Succeeded", "Unknown", "Suspended"),
        60,
        operators.logs,
    )
    uid = get_run(kube, "paused")["metadata"]["uid"]

    async def held() -> object:
        backend = await open_backend(redis.url)
        try:
            return await backend.leases.held(kube.namespace, uid)
        finally:
            await backend.close()

    wait_for("the lease handed back", lambda: asyncio.run(held()) is None, 10, operators.logs)
    iteration = get_run(kube, "paused")["status"]["iteration"]
    time.sleep(3)
    assert get_run(kube, "paused")["status"]["iteration"] == iteration
    kube.kubectl("patch", "agentrun", "paused", "--type=merge", "-p", '{"spec":{"suspend":false}}')
    wait_for(
        "paused to succeed",
        lambda: has_condition(kube, "paused", "Succeeded", "True"),
        60,
        operators.logs,
    )
    assert get_run(kube, "paused")["status"]["resumeCount"] >= 1
