"""The model key read from its Secret, kept a few seconds: rotated keys still take, GETs drop.

Two replicas with ``AGENTRUN_SECRET_MAX_AGE`` of 3 s run a declared agent whose key is in a
Secret. The fake model server records the ``Authorization`` of every request it gets; the API
server counts the ``GET secrets`` the runs cost (``apiserver_request_total``). The last test uses
``KubeSecrets`` in this process, where what it keeps can be looked at without a clock.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Iterator

import pytest
from kubernetes.config import new_client_from_config
from tests.support.agent_manifests import agent_secret, openai_agent
from tests.support.kube import ControlPlane, Kube
from tests.support.operator import Operators, wait_for

from agentrun.operator._kube_secrets import KubeSecrets, SecretCache
from agentrun.operator._kubeapi import KubeApi
from agentrun.runner._secrets import SecretKeyRef
from agentrun.testing.model_server import ModelServer, Turn, serving

MAX_AGE = 3.0
OPERATOR_ENV = {"AGENTRUN_SECRET_MAX_AGE": f"{MAX_AGE:g}"}
RUNS = 30
OLD_KEY = "sk-cache-test-old-4b1d0c"
NEW_KEY = "sk-cache-test-new-93e7aa"
READY = "{.status.conditions[?(@.type=='Ready')].status}"


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with serving((Turn(text="done"),)) as server:
        yield server


def _secret(kube: Kube, key: str, name: str = "keys") -> None:
    kube.kubectl("apply", "-f", "-", stdin=agent_secret(name, {"openai": key}))


def _runs(kube: Kube, prefix: str, count: int) -> str:
    return "".join(
        f"---\napiVersion: agentrun.dev/v1alpha1\nkind: AgentRun\nmetadata:\n"
        f"  name: {prefix}-{index:02d}\nspec:\n  agent: keyed\n  input: go\n"
        for index in range(count)
    )


def _succeeded(kube: Kube, prefix: str) -> int:
    listed = json.loads(kube.kubectl("get", "agentruns", "-o", "json").stdout)["items"]
    return sum(
        run["metadata"]["name"].startswith(prefix)
        and any(
            c["type"] == "Succeeded" and c["status"] == "True"
            for c in (run.get("status") or {}).get("conditions") or ()
        )
        for run in listed
    )


def _keys(model: ModelServer, since: float = 0.0) -> set[str]:
    return {seen.headers.get("Authorization", "") for seen in model.seen if seen.at >= since}


@pytest.fixture(scope="module")
def keyed(kube: Kube, operators: Operators, model: ModelServer) -> Kube:
    _secret(kube, OLD_KEY)
    agent = openai_agent("keyed", model.openai_url, secret="keys", instructions="Say done.")
    kube.kubectl("apply", "-f", "-", stdin=agent)
    wait_for(
        "the Agent to be Ready",
        lambda: "True" in kube.kubectl(
            "get", "agent", "keyed", "-o", f"jsonpath={READY}"
        ).stdout,
        60,
        operators.logs,
    )  # fmt: skip
    return kube


def test_a_batch_of_runs_reads_the_secret_once_a_max_age_per_replica(
    keyed: Kube, control_plane: ControlPlane, operators: Operators, model: ModelServer
) -> None:
    before = control_plane.requests()["GET secrets"]
    started = time.monotonic()
    keyed.kubectl("apply", "--server-side", "-f", "-", stdin=_runs(keyed, "batch", RUNS))
    wait_for(f"{RUNS} runs", lambda: _succeeded(keyed, "batch") == RUNS, 120, operators.logs)
    elapsed = time.monotonic() - started
    reads = control_plane.requests()["GET secrets"] - before
    # Read at every request it was one a run (RUNS); kept, one per replica and max age at most.
    bound = 2 * (math.ceil(elapsed / MAX_AGE) + 1)
    assert reads <= bound, (reads, bound, elapsed)
    assert reads < RUNS // 2, (reads, elapsed)
    assert _keys(model) == {f"Bearer {OLD_KEY}"}


def test_a_rotated_key_is_used_once_the_max_age_has_passed(
    keyed: Kube, operators: Operators, model: ModelServer
) -> None:
    keyed.kubectl("apply", "-f", "-", stdin=_runs(keyed, "warm", 1))
    wait_for("a run on the old key", lambda: _succeeded(keyed, "warm") == 1, 60, operators.logs)
    _secret(keyed, NEW_KEY)
    rotated = time.monotonic()
    time.sleep(MAX_AGE + 0.5)
    keyed.kubectl("apply", "-f", "-", stdin=_runs(keyed, "rotated", 4))
    wait_for("runs on the new key", lambda: _succeeded(keyed, "rotated") == 4, 60, operators.logs)
    assert _keys(model, since=rotated + MAX_AGE) == {f"Bearer {NEW_KEY}"}


async def test_a_kept_secret_is_read_afresh_after_a_refusal_and_once_for_many(
    kube: Kube, control_plane: ControlPlane
) -> None:
    """``KubeSecrets`` itself on the API server: what it keeps it uses until its max age, unless
    a service refused it; requests that ask at once share one read."""
    # The client's loader is untyped; it returns an ApiClient.
    api = KubeApi(new_client_from_config(config_file=str(kube.kubeconfig)))  # type: ignore[no-untyped-call]
    ref = SecretKeyRef(name="direct", key="openai")
    try:
        _secret(kube, OLD_KEY, name=ref.name)
        secrets = KubeSecrets(SecretCache(api, max_age=600), kube.namespace, "keyed")
        before = control_plane.requests()["GET secrets"]
        values = await asyncio.gather(*(secrets.resolve(ref) for _ in range(50)))
        assert set(values) == {OLD_KEY}
        assert control_plane.requests()["GET secrets"] - before == 1
        _secret(kube, NEW_KEY, name=ref.name)
        assert await secrets.resolve(ref) == OLD_KEY  # kept: the max age has not passed
        secrets.refused(ref)  # the model endpoint answered 401 to it
        assert await secrets.resolve(ref) == NEW_KEY
        uncached = KubeSecrets(SecretCache(api, max_age=0), kube.namespace, "keyed")
        before = control_plane.requests()["GET secrets"]
        for _ in range(3):
            assert await uncached.resolve(ref) == NEW_KEY
        assert control_plane.requests()["GET secrets"] - before == 3
    finally:
        api.close()
