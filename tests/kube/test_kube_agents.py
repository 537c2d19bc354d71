"""Agents declared with kubectl, end to end: a Secret, an ``Agent``, ``AgentRun``s, real replicas.

The model is the fake OpenAI-compatible server and the tools the ``mcp`` SDK's booking server,
both on loopback in this process; the operators are real processes on the real API server and a
real Redis. What a person would look at is what is checked: the Agent's status and printer
columns, the runs' conditions, and the MCP server's own books (where a second charge would show).
"""

from __future__ import annotations

import json
import re
import secrets
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.docs.samples import matches, samples
from tests.support.agent_manifests import agent_secret, openai_agent
from tests.support.agentruns import (
    apply_run,
    condition,
    get_run,
    has_condition,
    lease_of,
    wait_until_completed,
)
from tests.support.kube import REPO, Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.mcp_server import serving as mcp_serving
from agentrun.testing.model_server import ModelServer, Turn, serving

KEY = "sk-agentrun-test-" + secrets.token_hex(16)
"""The model endpoint's API key: it lives in a Secret, and nowhere else."""

SCRIPT = (
    Turn(calls=(("search_flights", {"origin": "TXL", "destination": "LIS"}),)),
    Turn(calls=(("charge_card", {"order_id": "o-7", "amount_cents": 4200}),)),
    Turn(text="Booked LH1172 and charged 42.00"),
)


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with serving(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def mcp() -> Iterator[McpBooks]:
    with mcp_serving() as books:
        yield books


def agent_manifest(
    model: ModelServer, mcp: McpBooks, instructions: str = "Book, then charge."
) -> str:
    return openai_agent(
        "booker",
        model.openai_url,
        secret="model-keys",
        instructions=instructions,
        more=f"""\
            maxIterations: 8
            budget: {{maxCostMicros: 1000000}}
            tools:
              mcp:
                - name: airline
                  url: {mcp.url}
                  allowedTools: [search_flights, book_flight, charge_card, send_sms]
                  tools:
                    send_sms: {{requiresApproval: true}}
            """,
    )


def get_agent(kube: Kube, name: str = "booker") -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "agent", name, "-o", "json").stdout)
    return found


def ready(kube: Kube, generation: int | None = None) -> bool:
    agent = get_agent(kube)
    status = agent.get("status") or {}
    wanted = generation or agent["metadata"]["generation"]
    conditions = [c for c in status.get("conditions") or () if c["type"] == "Ready"]
    return (
        status.get("observedGeneration") == wanted
        and bool(conditions)
        and conditions[0]["status"] == "True"
    )


@pytest.fixture(scope="module")
def booker(kube: Kube, operators: Operators, model: ModelServer, mcp: McpBooks) -> Kube:
    kube.kubectl("apply", "-f", "-", stdin=agent_secret("model-keys", {"openai": KEY}))
    kube.kubectl("apply", "-f", "-", stdin=agent_manifest(model, mcp))
    wait_for("booker to be Ready", lambda: ready(kube), 60, operators.logs)
    return kube


def test_the_agent_is_ready_with_its_tools_and_their_dispositions(booker: Kube) -> None:
    status = get_agent(booker)["status"]
    assert status["model"]["reachable"] is True
    [airline] = status["toolServers"]
    assert (airline["name"], airline["reachable"], airline["toolCount"]) == ("airline", True, 4)
    tools = {tool["name"]: tool for tool in status["tools"]}
    assert {name: tool["disposition"] for name, tool in tools.items()} == {
        "search_flights": "read_only",
        "book_flight": "idempotent",
        "charge_card": "side_effecting",
        "send_sms": "side_effecting",
    }
    assert tools["charge_card"]["destructive"] is True
    assert tools["send_sms"]["requiresApproval"] is True
    assert status["revision"].startswith("rev-")
    assert status["toolCount"] == 4

    table = booker.kubectl("get", "agents", "-o", "wide").stdout
    header, row = table.splitlines()
    assert header.split() == ["NAME", "MODEL", "READY", "TOOLS", "REVISION", "REASON", "AGE"]
    assert row.split()[:6] == ["booker", "gpt-4o-mini", "True", "4", status["revision"], "Ready"]
    described = booker.kubectl("describe", "agent", "booker").stdout
    for expected in ("Ready", "search_flights", "read_only", "Tool Servers", status["revision"]):
        assert expected in described, described
    print(table, described, sep="\n")


def test_a_run_of_the_declared_agent_completes(
    booker: Kube, operators: Operators, model: ModelServer, mcp: McpBooks
) -> None:
    charges = len(mcp.charges)
    apply_run(booker, "declared", "booker")
    wait_until_completed(booker, "declared", operators.logs)
    assert (
        condition(booker, "declared", "Succeeded")["message"] == "Booked LH1172 and charged 42.00"
    )
    assert len(mcp.charges) == charges + 1
    status = get_run(booker, "declared")["status"]
    assert status["usage"]["costMicros"] > 0
    assert all(seen.headers.get("Authorization") == f"Bearer {KEY}" for seen in model.seen)


def _kill_the_holder_during(
    kube: Kube, operators: Operators, mcp: McpBooks, run: str, tool: str, *, edit: str = ""
) -> None:
    """Start ``run`` and SIGKILL its holder while ``tool``'s call is at the MCP server (it has
    acted, and not answered); a replacement replica starts, as a Deployment would bring one."""
    made = len(mcp.made(tool))
    mcp.hold(tool)
    try:
        apply_run(kube, run, "booker")
        wait_for(f"{tool} to be called", lambda: len(mcp.made(tool)) > made, 60, operators.logs)
        if edit:
            kube.kubectl("apply", "-f", "-", stdin=edit)
        victim = operators.by_holder(lease_of(kube, run)["holder"])
        victim.signal(signal.SIGKILL)
        victim.wait()
    finally:
        mcp.release(tool)
    operators.start(victim.name)


def test_a_holder_killed_during_a_destructive_mcp_call_leaves_the_run_indeterminate(
    booker: Kube, operators: Operators, mcp: McpBooks
) -> None:
    charges = len(mcp.charges)
    _kill_the_holder_during(booker, operators, mcp, "charged", "charge_card")
    wait_for(
        "charged to be Indeterminate",
        lambda: has_condition(booker, "charged", "Indeterminate", "True"),
        60,
        operators.logs,
    )
    [call] = get_run(booker, "charged")["status"]["indeterminateCalls"]
    assert call["tool"] == "charge_card"
    assert call["callId"] in condition(booker, "charged", "Indeterminate")["message"]
    assert len(mcp.charges) == charges + 1, "the charge must never be made a second time"


def test_a_holder_killed_during_a_read_only_mcp_call_has_it_made_again(
    booker: Kube, operators: Operators, mcp: McpBooks
) -> None:
    searches = len(mcp.made("search_flights"))
    _kill_the_holder_during(booker, operators, mcp, "searched", "search_flights")
    wait_until_completed(booker, "searched", operators.logs)
    assert len(mcp.made("search_flights")) == searches + 2
    assert get_run(booker, "searched")["status"]["resumeCount"] >= 1


def test_editing_the_agent_refuses_the_runs_checkpointed_before_and_runs_new_ones(
    booker: Kube, operators: Operators, model: ModelServer, mcp: McpBooks
) -> None:
    before = get_agent(booker)
    edited = agent_manifest(model, mcp, instructions="Book, then charge, politely.")
    _kill_the_holder_during(booker, operators, mcp, "edited", "search_flights", edit=edited)
    wait_for(
        "the revision mismatch",
        lambda: has_condition(booker, "edited", "Succeeded", "False", "RevisionMismatch"),
        60,
        operators.logs,
    )
    generation = before["metadata"]["generation"] + 1
    wait_for("the edit to be probed", lambda: ready(booker, generation), 60, operators.logs)
    after = get_agent(booker)["status"]["revision"]
    assert after != before["status"]["revision"]
    assert after in condition(booker, "edited", "Succeeded")["message"]
    apply_run(booker, "after-edit", "booker")
    wait_until_completed(booker, "after-edit", operators.logs)


def test_an_agent_resource_wins_over_the_image_agent_of_the_same_name(
    booker: Kube, operators: Operators, model: ModelServer, mcp: McpBooks
) -> None:
    """``leaky`` is registered in the image (``operator_agents``); an Agent named ``leaky`` in the
    namespace is what a run naming it gets, and once it is deleted the image's agent again."""
    shadow = agent_manifest(model, mcp).replace("name: booker", "name: leaky")
    booker.kubectl("apply", "-f", "-", stdin=shadow)
    apply_run(booker, "shadowed", "leaky")
    wait_until_completed(booker, "shadowed", operators.logs)
    assert (
        condition(booker, "shadowed", "Succeeded")["message"] == "Booked LH1172 and charged 42.00"
    )
    booker.kubectl("delete", "agent", "leaky", "--timeout=60s")
    apply_run(booker, "unshadowed", "leaky")
    wait_until_completed(booker, "unshadowed", operators.logs)
    assert condition(booker, "unshadowed", "Succeeded")["message"] == "Here it is: [REDACTED]"


def test_an_agent_waits_for_its_secret_and_so_do_its_runs(
    booker: Kube, operators: Operators, model: ModelServer, mcp: McpBooks
) -> None:
    """A Secret created after the Agent that names it: the Agent says SecretUnavailable and the
    run waits (nothing is sent without the key); once the Secret exists both go on."""
    manifest = agent_manifest(model, mcp).replace("name: booker", "name: late-key")
    manifest = manifest.replace("name: model-keys", "name: late-keys")
    booker.kubectl("apply", "-f", "-", stdin=manifest)
    apply_run(booker, "early", "late-key")

    def reason(kind: str, name: str, type_: str) -> str:
        found = json.loads(booker.kubectl("get", kind, name, "-o", "json").stdout)
        for each in (found.get("status") or {}).get("conditions") or ():
            if each["type"] == type_:
                return str(each["reason"])
        return ""

    wait_for(
        "the Agent to say SecretUnavailable",
        lambda: reason("agent", "late-key", "Ready") == "SecretUnavailable",
        60,
        operators.logs,
    )
    assert "late-keys/openai" in condition_of_agent(booker, "late-key")["message"]
    wait_for(
        "the run to wait for the Secret",
        lambda: reason("agentrun", "early", "Succeeded") == "SecretUnavailable",
        60,
        operators.logs,
    )
    booker.kubectl("apply", "-f", "-", stdin=agent_secret("late-keys", {"openai": KEY}))
    wait_until_completed(booker, "early", operators.logs, within=90)
    wait_for("late-key to be Ready", lambda: reason("agent", "late-key", "Ready") == "Ready", 60)


def condition_of_agent(kube: Kube, name: str) -> dict[str, Any]:
    status = get_agent(kube, name).get("status") or {}
    return next(c for c in status.get("conditions") or () if c["type"] == "Ready")


def test_the_key_never_reaches_a_store_a_status_an_event_or_a_log(
    booker: Kube, operators: Operators, redis: RedisServer, model: ModelServer
) -> None:
    """Runs above used the key on every model request (the server saw it); search everything
    the operator wrote for it."""
    assert any(seen.headers.get("Authorization") == f"Bearer {KEY}" for seen in model.seen)
    kept = [
        booker.kubectl("get", "agents,agentruns", "-o", "json").stdout,
        booker.kubectl("get", "events", "-o", "json").stdout,
        *(replica.output() for replica in operators.replicas),
    ]
    for key in redis.cli("--scan").split():
        kind = redis.cli("TYPE", key).strip()
        command = {"hash": "HGETALL", "zset": "ZRANGE", "list": "LRANGE", "stream": "XRANGE"}
        args = {"ZRANGE": ("0", "-1"), "LRANGE": ("0", "-1"), "XRANGE": ("-", "+")}
        verb = command.get(kind, "GET")
        kept.append(redis.cli(verb, key, *args.get(verb, ())))
    assert len(kept) > 10
    leaks = [text[:200] for text in kept if KEY in text]
    assert not leaks, leaks


WALKTHROUGH = "tests/kube/test_kube_agents.py"
FILE_BLOCK = re.compile(r"<!-- file: (\S+) -->\n```yaml\n(.*?)```", re.S)
SHOWN = (  # what differs from one test run to the next, as docs/kubernetes.md shows it
    (re.compile(r"\brev-[0-9a-f]{16}\b"), "rev-<REVISION>"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"), "<TIME>"),
    (re.compile(r"((Fence|Bytes):\s+|fence )\d+"), r"\1<N>"),
    (re.compile(r"\b\d+ bytes\b"), "<N> bytes"),
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<UID>"),
    (re.compile(r"(Resource Version:\s+)\d+"), r"\1<N>"),
    (re.compile(r"\breplica-[a-z]+-\d+-[0-9a-f]{4}\b"), "<HOLDER>"),
    (re.compile(r"\b(\d+m)?\d+s\b"), "<AGE>"),
    (re.compile(r"\b\d+\.\ds\b"), "<SECONDS>"),
    (re.compile(r"[ \t]+"), " "),
)


def shown(text: str) -> str:
    for pattern, shape in SHOWN:
        text = pattern.sub(shape, text)
    return text.rstrip()


def test_the_walkthrough_in_the_docs_prints_what_it_shows(
    booker: Kube, operators: Operators, model: ModelServer, mcp: McpBooks, tmp_path: Path
) -> None:
    document = (REPO / "docs" / "kubernetes.md").read_text()
    [sample] = [s for s in samples() if s.scenario == "checked-by" and WALKTHROUGH in s.arguments]
    port = {"8000": model.url.rsplit(":", 1)[1], "8001": mcp.url.split(":")[2].split("/")[0]}
    for name, body in FILE_BLOCK.findall(document):
        for shown_port, real in port.items():
            body = body.replace(f"127.0.0.1:{shown_port}/", f"127.0.0.1:{real}/")
        (tmp_path / name).write_text(body)
    kubeconfig = tmp_path / "kubeconfig"  # the admin's, in the test's namespace
    kubeconfig.write_bytes(booker.kubeconfig.read_bytes())
    env = {
        **booker.control_plane.env(kubeconfig),
        "OPENAI_API_KEY": KEY,
        "PATH": f"{Path(booker.kubectl_bin).parent}:/usr/bin:/bin",
    }
    subprocess.run(
        ["kubectl", "config", "set-context", "--current", f"--namespace={booker.namespace}"],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    transcript: list[str] = []
    for step in sample.steps:
        done = subprocess.run(
            ["bash", "-c", step.command], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=180,
        )  # fmt: skip
        printed = (done.stdout + done.stderr).replace(booker.namespace, "team-a")
        for shown_port, real in port.items():
            printed = printed.replace(f"127.0.0.1:{real}/", f"127.0.0.1:{shown_port}/")
        transcript.append(f"$ {step.command}\n{printed}")
        assert done.returncode == 0, "\n".join(transcript)
        actual = [shown(line) for line in printed.rstrip("\n").splitlines()]
        expected = tuple(shown(line) for line in step.expected)
        assert matches(expected, actual), "\n".join(transcript)
