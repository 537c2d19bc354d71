"""Objects written to hurt the operator: every field bounded by the CRDs, and what gets past
them contained to the object that carries it.

A user who may write Agents in one namespace must not be able to stop the runs of every other.
The API server refuses, with the field named, what the CRDs bound (a header nested deep,
instructions of a megabyte, thousands of headers). What they cannot bound — an HTTP tool's JSON
schema, or any field of an Agent written under an older, looser CRD — reaches real operator
replicas, which must stay up and keep running the runs of other namespaces on time, while the
hostile Agent says, in its Ready condition and in an event, which field it is refused for.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.support.agentruns import apply_run, condition, wait_until_completed
from tests.support.kube import REPO, ControlPlane, Kube, kubectl_binary, start_control_plane
from tests.support.operator import Operators, operator_pool, wait_for
from tests.support.redis_server import RedisServer

CRDS = (REPO / "crds" / "agentruns.agentrun.dev.yaml", REPO / "crds" / "agents.agentrun.dev.yaml")
DEPTH = 1500
"""How deep the hostile values nest: about 9 KB of JSON, far below any size limit."""
CANARY_WITHIN = 60.0
"""Seconds the canary run may take, hostile objects or not (it takes a few when alone)."""


def _nested(depth: int) -> str:
    """A JSON object ``depth`` levels deep, written as text: Python's own encoder cannot."""
    return '{"a":' * depth + '"x"' + "}" * depth


def _agent(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "Agent",
        "metadata": {"name": name},
        "spec": {
            "model": {
                "provider": "openai",
                "name": "gpt-4o-mini",
                "baseURL": "http://127.0.0.1:9/v1",
                "price": {"inputMicrosPerMillion": 0, "outputMicrosPerMillion": 0},
            },
            "instructions": "Be brief.",
            **spec,
        },
    }


def _mcp(**server: Any) -> dict[str, Any]:
    return {"mcp": [{"name": "tools", "url": "http://127.0.0.1:9/mcp", **server}]}


def _deep_header(name: str) -> str:
    """An Agent whose MCP header ``X-Deep`` is an object ``DEPTH`` levels deep."""
    agent = _agent(name, tools=_mcp(headers={"X-Deep": "DEEP"}))
    return json.dumps(agent).replace('"DEEP"', _nested(DEPTH))


def _deep_parameters(name: str) -> str:
    """An Agent whose HTTP tool's JSON schema nests ``DEPTH`` levels deep: a field no CRD can
    bound in depth."""
    tool = {"name": "lookup", "url": "http://127.0.0.1:9/lookup", "parameters": {"x": "DEEP"}}
    return json.dumps(_agent(name, tools={"http": [tool]})).replace('"DEEP"', _nested(DEPTH))


def _create(kube: Kube, manifest: str | dict[str, Any], *, dry_run: bool = False) -> str:
    text = manifest if isinstance(manifest, str) else json.dumps(manifest)
    flags = ("--dry-run=server",) if dry_run else ()
    done = kube.kubectl("create", *flags, "-f", "-", stdin=text, check=False)
    return done.stderr if done.returncode else ""


def _ready(kube: Kube, name: str) -> dict[str, Any]:
    """The Agent's Ready condition, read alone: the whole Agent is too deep for ``json``."""
    got = kube.kubectl("get", "agent", name, "-o", "jsonpath={.status.conditions}", check=False)
    conditions = json.loads(got.stdout or "[]") if got.returncode == 0 else []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def _refused(kube: Kube, name: str, field: str) -> bool:
    found = _ready(kube, name)
    return (
        found.get("status") == "False"
        and found.get("reason") == "InvalidSpec"
        and field in found.get("message", "")
    )


def _warned(kube: Kube, name: str, field: str) -> bool:
    """An event on Agent ``name`` names ``field``."""
    listed = json.loads(kube.kubectl("get", "events", "-o", "json").stdout)["items"]
    return any(
        event["involvedObject"].get("kind") == "Agent"
        and event["involvedObject"].get("name") == name
        and event.get("reason") == "InvalidSpec"
        and field in event.get("message", "")
        for event in listed
    )


def _all_up(operators: Operators) -> bool:
    return all(replica.process.poll() is None for replica in operators.replicas)


# --- what the CRDs bound ----------------------------------------------------------------------


def _unbounded(node: dict[str, Any], path: str) -> Iterator[str]:
    kind = node.get("type")
    if kind == "string" and not {"maxLength", "enum"} & set(node) and "format" not in node:
        yield path
    if kind == "array" and "maxItems" not in node:
        yield path
    if "additionalProperties" in node and "maxProperties" not in node:
        yield path
    if node.get("x-kubernetes-preserve-unknown-fields") and "maxProperties" not in node:
        yield path
    for key, inner in (node.get("properties") or {}).items():
        yield from _unbounded(inner, f"{path}.{key}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _unbounded(node[key], f"{path}[]" if key == "items" else f"{path}{{}}")


@pytest.mark.parametrize("crd", CRDS, ids=lambda crd: crd.name)
def test_every_string_list_and_map_of_the_crds_is_bounded(crd: Path) -> None:
    schema = yaml.safe_load(crd.read_text())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    # apiVersion and kind are the API server's own, checked by it before any schema is.
    assert sorted(_unbounded(schema, "")) == [".apiVersion", ".kind"]


@pytest.mark.parametrize(
    ("manifest", "said"),
    [
        (_deep_header("deep-header"), "spec.tools.mcp[0].headers.X-Deep"),
        (_agent("long", instructions="x" * 65537), "spec.instructions: Too long"),
        (
            _agent("crowded", tools=_mcp(headers={f"X-{n}": "v" for n in range(65)})),
            "spec.tools.mcp[0].headers: Too many: 65",
        ),
        (
            _agent("listy", tools=_mcp(headers={"X-List": [[["deep"]]]})),
            "spec.tools.mcp[0].headers.X-List",
        ),
        (
            _agent(
                "numbered", tools=_mcp(tools={"t": {"arguments": {"n": 7}}}, allowedTools=["t"])
            ),
            "spec.tools.mcp[0].tools.t.arguments.n",
        ),
        (
            _agent("keys", tools=_mcp(headers={"X": {"valueFrom": {}, "more": {"a": {"a": 1}}}})),
            "spec.tools.mcp[0].headers.X",
        ),
        (
            _agent(
                "far", model={"provider": "openai", "name": "m", "baseURL": "http://" + "a" * 2048}
            ),
            "spec.model.baseURL: Too long",
        ),
    ],
    ids=[
        "deep-header",
        "long-instructions",
        "many-headers",
        "list",
        "number",
        "object",
        "long-url",
    ],
)
def test_the_api_server_refuses_what_the_crd_bounds_naming_the_field(
    kube: Kube, manifest: str | dict[str, Any], said: str
) -> None:
    refused = _create(kube, manifest, dry_run=True)
    assert said in refused, refused


def test_decisions_cannot_grow_a_run_towards_the_object_limit(kube: Kube) -> None:
    """64 resolutions of 16384 characters each were a run of a megabyte within the old bounds.
    Appended by the test's own user, so that the decisions policy lets them through."""
    resolutions = [
        {"callId": f"c{n}", "outcome": "ran", "result": "r" * 4097, "by": "agentrun-test-admin"}
        for n in range(64)
    ]
    run = {
        "apiVersion": "agentrun.dev/v1alpha1",
        "kind": "AgentRun",
        "metadata": {"name": "grown"},
        "spec": {"agent": "texter", "resolutions": resolutions},
    }
    refused = _create(kube, run, dry_run=True)
    assert "spec.resolutions[0].result: Too long" in refused, refused


def test_a_header_value_is_a_string_or_a_secret_reference(kube: Kube) -> None:
    secret = {"valueFrom": {"secretKeyRef": {"name": "keys", "key": "token"}}, "prefix": "Bearer "}
    agent = _agent("headed", tools=_mcp(headers={"Authorization": secret, "X-Team": "blue"}))
    assert _create(kube, agent, dry_run=True) == ""


# --- what gets past the CRD, on the CRD as it is -------------------------------------------


def test_a_json_schema_nested_too_deep_is_refused_on_its_agent_and_the_replicas_run_on(
    kube: Kube, operators: Operators
) -> None:
    assert _create(kube, _deep_parameters("deep-schema")) == ""  # no CRD bounds its depth
    field = "spec.tools.http[0].parameters.x"
    wait_for(
        "the Agent to say why", lambda: _refused(kube, "deep-schema", field), 60, operators.logs
    )
    wait_for("an event naming the field", lambda: _warned(kube, "deep-schema", field), 30)
    apply_run(kube, "beside-deep-schema", "texter")
    wait_until_completed(kube, "beside-deep-schema", operators.logs, within=CANARY_WITHIN)
    assert _all_up(operators), operators.logs()
    kube.kubectl("delete", "agent", "deep-schema")  # nothing else of the session should meet it


# --- what got past an older CRD ----------------------------------------------------------------


def _loose(crd: Path) -> str:
    """The Agent CRD as a release before it bounded anything would have it: a spec of any shape."""
    document = yaml.safe_load(crd.read_text())
    version = document["spec"]["versions"][0]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec.clear()
    spec.update(type="object", **{"x-kubernetes-preserve-unknown-fields": True})
    return json.dumps(document)


@pytest.fixture(scope="module")
def older(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """A control plane of its own, whose Agent CRD bounds nothing: Agents written before the
    bounds were applied."""
    plane = start_control_plane(Path(tmp_path_factory.mktemp("older-control-plane")))
    try:
        admin = Kube(plane, "default", kubectl_binary())
        admin.kubectl("apply", "--server-side", "-f", str(CRDS[0]))
        admin.kubectl("apply", "--server-side", "-f", "-", stdin=_loose(CRDS[1]))
        admin.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/agents.agentrun.dev"
        )
        for namespace in ("hostile", "canary"):
            admin.kubectl("create", "namespace", namespace)
        yield plane
    finally:
        plane.stop()


HOSTILE: dict[str, tuple[str | dict[str, Any], str]] = {
    "deep-header": (_deep_header("deep-header"), "spec.tools.mcp[0].headers.X-Deep.a.a"),
    "huge": (
        _agent("huge", instructions="x" * (1200 * 1024)),
        "spec.instructions: String should have at most 65536 characters",
    ),
    "crowded": (
        _agent("crowded", tools=_mcp(headers={f"X-{n}": "v" * 64 for n in range(5000)})),
        "spec.tools.mcp.0.headers: Dictionary should have at most 64 items",
    ),
    "many-servers": (
        _agent(
            "many-servers",
            tools={"mcp": [{"name": f"s{n}", "url": "http://127.0.0.1:9/"} for n in range(2000)]},
        ),
        "spec.tools.mcp: Tuple should have at most 32 items",
    ),
    "odd-header": (
        _agent("odd-header", tools=_mcp(headers={"X-\u202eevil": "v", "X-Nul": "a\u0000b"})),
        "spec.tools.mcp.0.headers.X-\\u202eevil.[key]",
    ),
    "odd-value": (
        _agent("odd-value", tools=_mcp(headers={"X-Rtl": "a\u202eb"})),
        "spec.tools.mcp.0.headers.X-Rtl",
    ),
    "nul-url": (
        _agent("nul-url", tools=_mcp(url="http://127.0.0.1:9/\u0000\u202e")),
        "spec.tools.mcp.0.url",
    ),
}


@pytest.fixture(scope="module")
def besieged(
    older: ControlPlane,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Operators]:
    """Hostile Agents in namespace hostile, then two replicas watching every namespace, started
    after them (as a replica restarted while they exist is)."""
    hostile = Kube(older, "hostile", kubectl_binary())
    for manifest, _ in HOSTILE.values():
        assert _create(hostile, manifest) == ""
    apply_run(hostile, "victim", "deep-header")
    pool = operator_pool(Kube(older, "canary", kubectl_binary()), redis, effects, tmp_path_factory)
    pool.watch = ("--all-namespaces",)
    pool.start("replica-a")
    pool.start("replica-b")
    try:
        yield pool
    finally:
        pool.stop_all()


def test_replicas_stay_up_and_a_canary_in_another_namespace_finishes_on_time(
    older: ControlPlane, besieged: Operators
) -> None:
    canary = Kube(older, "canary", kubectl_binary())
    started = time.monotonic()
    apply_run(canary, "canary", "texter")
    wait_until_completed(canary, "canary", besieged.logs, within=CANARY_WITHIN)
    print(f"canary completed in {time.monotonic() - started:.1f}s beside {len(HOSTILE)} Agents")
    assert _all_up(besieged), besieged.logs()
    assert "RecursionError" not in besieged.logs()


@pytest.mark.parametrize("name", HOSTILE)
def test_each_hostile_agent_says_which_field_it_is_refused_for(
    older: ControlPlane, besieged: Operators, name: str
) -> None:
    hostile = Kube(older, "hostile", kubectl_binary())
    field = HOSTILE[name][1]
    wait_for(f"{name} to say why", lambda: _refused(hostile, name, field), 60, besieged.logs)
    wait_for(f"an event on {name}", lambda: _warned(hostile, name, field), 30, besieged.logs)
    assert _all_up(besieged), besieged.logs()


def test_a_run_of_an_agent_nested_too_deep_says_why_it_cannot_run(
    older: ControlPlane, besieged: Operators
) -> None:
    hostile = Kube(older, "hostile", kubectl_binary())

    def said() -> bool:
        return "nests deeper than" in condition(hostile, "victim", "Succeeded").get("message", "")

    wait_for("the run to say why", said, 60, besieged.logs)
    assert _all_up(besieged), besieged.logs()
