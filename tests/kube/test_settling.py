"""The operator settles undecidable calls by asking the service, end to end on a real API server.

A declared Agent's HTTP tool charges a card at the fake payment service (``settle_services``,
real HTTP on loopback), which honours ``Idempotency-Key``. A run's holder is SIGKILLed once the
service has charged and before its answer arrives, so the run waits ``Indeterminate``; the tool
declares how to settle it (``replay``, or a ``probe`` of the charge by its key), and the operator
replica the run prefers asks the service after ``delaySeconds`` and appends the answer to
``spec.resolutions`` in its ServiceAccount's name, with the evidence.

The operators run with a token of the chart's ServiceAccount (``agentrun-agentrun-operator`` in
namespace ``default``, as the session's ``helm template`` renders the decisions policy), bound
to the chart's RBAC: the policy knows the settler by that name, and a person may not write what
only it may (``evidence``).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.agent_manifests import agent_secret, openai_agent
from tests.support.agentruns import (
    apply_run,
    condition,
    get_run,
    has_condition,
    lease_of,
    wait_until_completed,
)
from tests.support.chart import CHART, service_account_kubeconfig
from tests.support.kube import Kube, helm_binary
from tests.support.operator import Operators, Replica, operator_pool, wait_for
from tests.support.redis_server import RedisServer

from agentrun.testing.model_server import ModelServer, Turn, serving
from agentrun.testing.settle_services import PaymentService
from agentrun.testing.settle_services import serving as paying

ORDER = "o-7"
SCRIPT = (
    Turn(calls=(("charge", {"order_id": ORDER, "amount_cents": 4200}),)),
    Turn(text="Charged 42.00"),
)
SERVICE_ACCOUNT = "agentrun-agentrun-operator"
OPERATOR = f"system:serviceaccount:default:{SERVICE_ACCOUNT}"
"""The operator's user name, as the decisions policy installed for the session names it."""


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with serving(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def service() -> Iterator[PaymentService]:
    with paying() as payments:
        yield payments


@pytest.fixture(scope="module")
def operator_kubeconfig(kube: Kube) -> Path:
    """A token of the chart's ServiceAccount, with the chart's RBAC for a release watching this
    module's namespace (as the replicas do: ``--namespace``, whose kopf lists namespaces)."""
    default = Kube(kube.control_plane, "default", kube.kubectl_bin)
    rendered = default.helm(
        helm_binary(), "template", "agentrun", str(CHART),
        "--show-only", "templates/serviceaccount.yaml", "--show-only", "templates/rbac.yaml",
        "--set", "rbac.clusterWide=false", "--set", f"watchNamespaces={{{kube.namespace}}}",
    ).stdout  # fmt: skip
    for document in yaml.safe_load_all(rendered):
        if document:
            where = kube if document["metadata"].get("namespace") == kube.namespace else default
            where.kubectl("apply", "--server-side", "-f", "-", stdin=json.dumps(document))
    return service_account_kubeconfig(default, SERVICE_ACCOUNT)


def _settle(mode: str, service: PaymentService, *, delay: int) -> str:
    """The tool's ``settle``, as a flow mapping (JSON is YAML)."""
    settle: dict[str, Any] = {"delaySeconds": delay, "attempts": 2}
    if mode == "replay":
        settle["replay"] = {}
    else:
        settle["probe"] = {
            "http": {"url": f"{service.url}/charges/{{idempotencyKey}}"},
            "ran": {"status": [200], "pointer": "/state", "equals": ["confirmed"]},
            "didNotRun": {"status": [404]},
            "didNotRunIsAuthoritative": mode == "authoritative",
            "result": "/receipt",
        }
    return f"settle: {json.dumps(settle)}"


def _agent(name: str, model: ModelServer, service: PaymentService, settle: str) -> str:
    return openai_agent(
        name,
        model.openai_url,
        secret="model-keys",
        instructions="Charge the order.",
        more=f"""\
            tools:
              http:
                - name: charge
                  url: {service.url}/charges
                  keyArguments: [order_id]
                  timeoutSeconds: 5
                  parameters:
                    type: object
                    properties:
                      order_id: {{type: string}}
                      amount_cents: {{type: integer}}
                    required: [order_id, amount_cents]
                  {settle}
            """,
    )


AGENTS = {
    "replayer": ("replay", 1),
    "lagging": ("probe", 1),
    "prober": ("authoritative", 1),
    "patient": ("replay", 30),
    "racer": ("replay", 12),
}


@pytest.fixture(scope="module")
def settlers(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
    operator_kubeconfig: Path,
    model: ModelServer,
    service: PaymentService,
) -> Iterator[Operators]:
    """Two replicas as the chart's ServiceAccount, and the Agents, Ready."""
    pool = operator_pool(
        kube, redis, effects, tmp_path_factory, KUBECONFIG=str(operator_kubeconfig)
    )
    pool.start("replica-a")
    pool.start("replica-b")
    try:
        kube.kubectl("apply", "-f", "-", stdin=agent_secret("model-keys", {"openai": "sk-x"}))
        manifests = [
            _agent(name, model, service, _settle(mode, service, delay=delay))
            for name, (mode, delay) in AGENTS.items()
        ]
        kube.kubectl("apply", "-f", "-", stdin="\n---\n".join(manifests))
        for name in AGENTS:
            wait_for(f"{name} to be Ready", lambda n=name: _ready(kube, n), 90, pool.logs)
        yield pool
    finally:
        pool.stop_all()


def _ready(kube: Kube, name: str) -> bool:
    found = json.loads(kube.kubectl("get", "agent", name, "-o", "json").stdout)
    conditions = (found.get("status") or {}).get("conditions") or ()
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _cut_short(
    kube: Kube, operators: Operators, service: PaymentService, run: str, agent: str
) -> float:
    """Start ``run`` and SIGKILL its holder once the service has charged and before it answers
    (a replacement starts, as a Deployment's would); wait until the run is Indeterminate. When
    it turned so (``time.time``)."""
    made = len(service.made(ORDER))
    service.hold(ORDER)
    try:
        apply_run(kube, run, agent)
        assert service.acted(ORDER, 60), operators.logs()
        victim = operators.by_holder(lease_of(kube, run)["holder"])
        victim.signal(signal.SIGKILL)
        victim.wait()
    finally:
        service.release(ORDER)
    operators.start(victim.name)
    wait_for(
        f"{run} to be Indeterminate",
        lambda: has_condition(kube, run, "Indeterminate", "True"),
        60,
        operators.logs,
    )
    assert len(service.made(ORDER)) == made + 1
    return time.time()


def _resolutions(kube: Kube, run: str) -> list[dict[str, Any]]:
    return list((get_run(kube, run).get("spec") or {}).get("resolutions") or ())


def _events(kube: Kube, run: str) -> list[dict[str, Any]]:
    listed = kube.kubectl(
        "get", "events", "--field-selector", f"involvedObject.name={run}", "-o", "json"
    ).stdout
    return list(json.loads(listed)["items"])


def _reasons(kube: Kube, run: str) -> list[str]:
    return [str(event["reason"]) for event in _events(kube, run)]


def _counted(operators: Operators, labels: str) -> float:
    """``agentrun_settled_calls_total{labels}`` summed over the live replicas."""
    wanted = f"agentrun_settled_calls_total{{{labels}}} "
    return sum(
        float(line.removeprefix(wanted))
        for replica in operators.replicas
        if replica.process.poll() is None
        for line in replica.metrics().splitlines()
        if line.startswith(wanted)
    )


def _note(kube: Kube, run: str) -> dict[str, Any]:
    [call] = get_run(kube, run)["status"]["indeterminateCalls"]
    return dict(call.get("settlement") or {})


def test_a_replayed_call_settles_with_the_services_own_answer(
    kube: Kube, settlers: Operators, service: PaymentService
) -> None:
    made = len(service.made(ORDER))
    turned = _cut_short(kube, settlers, service, "replayed", "replayer")
    note = _note(kube, "replayed")
    assert note["phase"] in ("Waiting", "Asking"), note
    wait_until_completed(kube, "replayed", settlers.logs, within=90)
    took = time.time() - turned
    [answer] = _resolutions(kube, "replayed")
    [effect] = service.made(ORDER)[made:]
    assert answer["by"] == OPERATOR
    assert answer["outcome"] == "ran"
    assert answer["result"] == effect.answer, "the service's first answer, replayed"
    assert answer["evidence"].startswith(f"replayed POST {service.url}/charges"), answer
    assert len(service.made(ORDER)) == made + 1, "one charge, however often it was asked"
    assert condition(kube, "replayed", "Succeeded")["message"] == "Charged 42.00"
    settled = [e for e in _events(kube, "replayed") if e["reason"] == "Settled"]
    assert len(settled) == 1, settled
    assert answer["callId"] in settled[0]["message"]
    assert "settled by replay: it ran" in settled[0]["message"]
    assert _counted(settlers, 'mode="replay",outcome="ran"') == 1
    print(f"Indeterminate to Completed: {took:.1f}s (delaySeconds 1)")


def test_a_probe_that_says_not_found_without_authority_leaves_the_call_to_a_person(
    kube: Kube, settlers: Operators, service: PaymentService
) -> None:
    service.lagging = True
    try:
        _cut_short(kube, settlers, service, "lagged", "lagging")
        wait_for(
            "the call to be left to a person",
            lambda: _note(kube, "lagged").get("phase") == "LeftToPerson",
            60,
            settlers.logs,
        )
    finally:
        service.lagging = False
    note = _note(kube, "lagged")
    assert note["attempts"] == 1
    assert "didNotRunIsAuthoritative" in note["message"]
    assert "not_found" in note["message"]
    assert _resolutions(kube, "lagged") == []
    assert has_condition(kube, "lagged", "Indeterminate", "True")
    assert "SettleInconclusive" in _reasons(kube, "lagged")
    assert _counted(settlers, 'mode="probe",outcome="inconclusive"') == 1
    described = kube.kubectl("describe", "agentrun", "lagged").stdout
    assert "LeftToPerson" in described, described
    assert "SettleInconclusive" in described, described
    time.sleep(3)  # nobody asks again
    assert _note(kube, "lagged")["attempts"] == 1


def test_a_person_answering_during_the_delay_is_the_only_answer(
    kube: Kube, settlers: Operators, service: PaymentService
) -> None:
    alice = kube.grant("alice", "agentrun-edit", "agentrun-approve")
    _cut_short(kube, settlers, service, "answered", "patient")
    [call] = get_run(kube, "answered")["status"]["indeterminateCalls"]
    assert call["settlement"]["phase"] == "Waiting"
    result = "charged by hand"
    entry = {"callId": call["callId"], "outcome": "ran", "result": result, "by": "alice"}
    alice.kubectl(
        "patch", "agentrun", "answered", "--type=json",
        "-p", json.dumps([{"op": "add", "path": "/spec/resolutions", "value": [entry]}]),
    )  # fmt: skip
    wait_until_completed(kube, "answered", settlers.logs)
    assert _resolutions(kube, "answered") == [entry]
    assert "Settled" not in _reasons(kube, "answered")


def test_two_replicas_racing_append_one_resolution(
    kube: Kube, settlers: Operators, service: PaymentService
) -> None:
    """Fresh replicas know no peers (no run is held), so each takes itself for every run's
    preferred replica and both fire at ``dueAt``: the lease and the resourceVersion decide."""
    made = len(service.made(ORDER))
    _cut_short(kube, settlers, service, "raced", "racer")
    settlers.stop_all()
    fresh = [settlers.start("replica-c"), settlers.start("replica-d")]
    wait_until_completed(kube, "raced", settlers.logs, within=90)
    [answer] = _resolutions(kube, "raced")
    assert answer["by"] == OPERATOR
    assert answer["outcome"] == "ran"
    assert len(service.made(ORDER)) == made + 1
    assert _reasons(kube, "raced").count("Settled") == 1
    began = [r.name for r in fresh if f"run {kube.namespace}/raced " in r.output()]
    held = [r.name for r in fresh if "is held: settled later" in r.output()]
    print(f"replicas that began settling: {began}; that found the lease held: {held}")


def test_a_settler_killed_mid_probe_is_taken_over(
    kube: Kube, settlers: Operators, service: PaymentService
) -> None:
    made = len(service.made(ORDER))
    lookups = sum(1 for r in service.seen if r.method == "GET")

    def asks(replica: Replica) -> bool:
        return f"asks the services of run {kube.namespace}/probed " in replica.output()

    service.silent = True
    try:
        _cut_short(kube, settlers, service, "probed", "prober")
        wait_for(
            "the probe to be asked",
            lambda: sum(1 for r in service.seen if r.method == "GET") > lookups,
            60,
            settlers.logs,
        )
        [asker] = [r for r in settlers.replicas if r.process.poll() is None and asks(r)]
        asker.signal(signal.SIGKILL)
        asker.wait()
    finally:
        service.silent = False
    settlers.start(asker.name)
    wait_until_completed(kube, "probed", settlers.logs, within=90)
    took_over = [r.name for r in settlers.replicas if r is not asker and asks(r)]
    assert took_over, settlers.logs()
    [answer] = _resolutions(kube, "probed")
    [effect] = service.made(ORDER)[made:]
    assert answer["by"] == OPERATOR
    assert answer["outcome"] == "ran"
    assert json.loads(answer["result"]) == json.loads(effect.answer)
    assert _reasons(kube, "probed").count("Settled") == 1


def _append(who: Kube, run: str, entry: dict[str, Any], field: str = "resolutions") -> str:
    """The API server's refusal of ``who`` appending ``entry``, or "" when it took it."""
    operations = [{"op": "add", "path": f"/spec/{field}", "value": [entry]}]
    answer = who.kubectl(
        "patch", "agentrun", run, "--type=json", "-p", json.dumps(operations), check=False
    )
    return answer.stderr if answer.returncode else ""


def test_the_policy_admits_evidence_from_the_operator_alone(
    kube: Kube, operator_kubeconfig: Path
) -> None:
    for name in ("evidence-a", "evidence-b", "evidence-c"):
        kube.kubectl(
            "create", "-f", "-",
            stdin=json.dumps({
                "apiVersion": "agentrun.dev/v1alpha1", "kind": "AgentRun",
                "metadata": {"name": name}, "spec": {"agent": "nobody", "suspend": True},
            }),
        )  # fmt: skip
    alice = kube.grant("alice", "agentrun-edit", "agentrun-approve")
    operator = kube.as_user(OPERATOR)
    person = {"callId": "c1", "outcome": "didNotRun", "by": "alice", "evidence": "I looked"}
    refused = _append(alice, "evidence-a", person)
    assert "evidence marks an answer the operator settled" in refused, refused
    bare = {"callId": "c1", "outcome": "didNotRun", "by": OPERATOR}
    refused = _append(operator, "evidence-a", bare)
    assert "may append only resolutions that carry evidence" in refused, refused
    approval = {"requestId": "apr-1", "decision": "approve", "by": OPERATOR}
    refused = _append(operator, "evidence-a", approval, "approvals")
    assert "never an approval" in refused or "may not approve" in refused, refused
    spoofed = {"callId": "c1", "outcome": "didNotRun", "by": "alice", "evidence": "x"}
    refused = _append(operator, "evidence-b", spoofed)
    assert "by must be the user who appends the answer" in refused, refused
    settled = {**bare, "evidence": "probe answered 404"}
    assert _append(operator, "evidence-c", settled) == ""
    assert _resolutions(kube, "evidence-c") == [settled]
    assert _resolutions(kube, "evidence-a") == _resolutions(kube, "evidence-b") == []
    can = operator.kubectl("auth", "can-i", "resolve", "agentruns.agentrun.dev", check=False)
    assert can.stdout.strip() == "no", "the operator's RBAC grants no resolve"
