"""The operator connects only where its egress policy allows (issue 23 §5), on the real API
server with a real operator process whose environment carries the policy the chart would set.

An Agent author points the model, an MCP server and an HTTP tool at loopback, at the cloud's
metadata address, at a name that resolves to loopback, and at an allowed URL that redirects to a
refused one. A listener on loopback records every request: it must receive none, and each
Agent's status must say what the policy refused, for which field, and nothing of whether
anything listens there. Allowing the URL (a new replica with the setting changed) makes the
Agent Ready. Nothing is sent anywhere but loopback: 169.254.169.254 is refused before any
connection is tried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.support.agent_manifests import agent_secret, openai_agent
from tests.support.kube import Kube
from tests.support.listeners import Listener, listening
from tests.support.operator import Operators, operator_pool, wait_for
from tests.support.redis_server import RedisServer


@pytest.fixture(scope="module")
def target() -> Iterator[Listener]:
    """What every refused URL leads to: it must hear nothing while it is refused."""
    with listening() as listener:
        yield listener


@pytest.fixture(scope="module")
def redirecting(target: Listener) -> Iterator[Listener]:
    """An allowed endpoint that redirects every request to ``target`` by a name for loopback."""
    with listening(redirect_to=f"http://localhost:{target.port}") as listener:
        yield listener


def agent(name: str, url: str, more: str = "") -> str:
    return openai_agent(name, url, secret="model-keys", instructions="Answer.", more=more)


def status_of(kube: Kube, name: str) -> dict[str, Any]:
    found = json.loads(kube.kubectl("get", "agent", name, "-o", "json").stdout)
    return dict(found.get("status") or {})


def ready_condition(kube: Kube, name: str, generation: int = 1) -> dict[str, Any] | None:
    status = status_of(kube, name)
    if status.get("observedGeneration") != generation:
        return None
    return next((c for c in status.get("conditions") or () if c["type"] == "Ready"), None)


def probed(kube: Kube, operators: Operators, name: str, generation: int = 1) -> dict[str, Any]:
    """The Agent's Ready condition once a probe of ``generation`` wrote it."""
    wait_for(
        f"{name} to be probed",
        lambda: ready_condition(kube, name, generation),
        60,
        operators.logs,
    )
    condition = ready_condition(kube, name, generation)
    assert condition is not None
    return condition


@pytest.fixture(scope="module")
def strict(
    kube: Kube,
    redis: RedisServer,
    effects: Path,
    tmp_path_factory: pytest.TempPathFactory,
    target: Listener,
    redirecting: Listener,
) -> Iterator[Operators]:
    """One replica allowing only the redirecting endpoint's /v1, with the Agents applied."""
    pool = operator_pool(
        kube, redis, effects, tmp_path_factory, AGENTRUN_EGRESS_ALLOW=f"{redirecting.url}/v1"
    )
    kube.kubectl("apply", "-f", "-", stdin=agent_secret("model-keys", {"openai": "sk-egress"}))
    manifests = [
        agent("loopback", f"{target.url}/v1"),
        agent("named", f"http://localhost:{target.port}/v1"),
        agent("redirected", f"{redirecting.url}/v1"),
        agent(
            "metadata",
            "http://169.254.169.254/v1",
            more=f"""\
                tools:
                  mcp:
                    - name: internal
                      url: http://localhost:{target.port}/mcp
                  http:
                    - name: credentials
                      method: GET
                      url: http://169.254.169.254/latest/meta-data/iam/{{role}}
                      parameters:
                        type: object
                        properties: {{role: {{type: string}}}}
                        required: [role]
                """,
        ),
    ]
    kube.kubectl("apply", "-f", "-", stdin="\n---\n".join(manifests))
    pool.start("strict")
    try:
        yield pool
    finally:
        pool.stop_all()


REFUSED = {
    "loopback": [r"egress policy refuses 127\.0\.0\.1 \(loopback\) for spec\.model\.baseURL"],
    "named": [
        r"egress policy refuses localhost \(it resolves to (127\.0\.0\.1|::1), loopback\) "
        r"for spec\.model\.baseURL"
    ],
    "redirected": [
        r"egress policy refuses localhost \(it resolves to (127\.0\.0\.1|::1), loopback\) "
        r"for spec\.model\.baseURL"
    ],
    "metadata": [
        r"egress policy refuses 169\.254\.169\.254 \(link-local\) for spec\.model\.baseURL",
        r"egress policy refuses localhost \(it resolves to (127\.0\.0\.1|::1), loopback\) "
        r"for spec\.tools\.mcp\[0\]\.url",
        r"egress policy refuses 169\.254\.169\.254 \(link-local\) for spec\.tools\.http\[0\]\.url",
    ],
}


def test_a_refused_destination_is_never_connected_to_and_the_status_says_why(
    strict: Operators, kube: Kube, target: Listener, redirecting: Listener
) -> None:
    for name, said in REFUSED.items():
        condition = probed(kube, strict, name)
        assert (condition["status"], condition["reason"]) == ("False", "EgressRefused"), condition
        for expected in said:
            assert re.search(expected, condition["message"]), condition["message"]
        assert "chart's egress.allow" in condition["message"]
        model = status_of(kube, name)["model"]
        assert model["reachable"] is False
        assert "egress policy refuses" in model["message"]
    [internal] = status_of(kube, "metadata")["toolServers"]
    assert internal["reachable"] is False
    assert "for spec.tools.mcp[0].url" in internal["message"]
    print(kube.kubectl("get", "agents", "-o", "wide").stdout)
    print(ready_condition(kube, "metadata"))
    assert target.received == []
    assert redirecting.received  # it was asked, and its redirect was not followed
    assert set(redirecting.received) == {"GET /v1/models"}


def test_with_the_url_allowed_the_agent_is_ready(
    strict: Operators, kube: Kube, target: Listener, redirecting: Listener
) -> None:
    for name in REFUSED:
        probed(kube, strict, name)
    strict.stop_all()
    strict.start("allowing", AGENTRUN_EGRESS_ALLOW=f"{redirecting.url}/v1,{target.url}/v1")
    for name in REFUSED:  # a new generation: probed at the next tick, not in 30 s
        kube.kubectl(
            "patch", "agent", name, "--type=merge", "-p", '{"spec": {"instructions": "Again."}}'
        )
    wait_for(
        "loopback to be Ready",
        lambda: (ready_condition(kube, "loopback", 2) or {}).get("status") == "True",
        60,
        strict.logs,
    )
    assert "GET /v1/models" in target.received
    # Allowed by its address under a prefix, 127.0.0.1 is not allowed by another name for it,
    # nor by the name a redirect gives it; the metadata address stays refused.
    for name in ("named", "redirected", "metadata"):
        condition = probed(kube, strict, name, 2)
        assert (condition["status"], condition["reason"]) == ("False", "EgressRefused")
    assert set(target.received) == {"GET /v1/models"}
