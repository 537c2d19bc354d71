"""A model that repeats its own key: the key is masked in all the operator writes (issue 23 §3).

The key is a value no redaction pattern recognises, kept in a Secret the Agent names (and that
opts in to being used by Agents). The model, the fake OpenAI-compatible server on loopback, says
the key in its final answer, which the operator writes into the run's ``Succeeded`` condition and
its ``Completed`` event. Real operator replicas on the real API server and a real Redis; what is
searched is what a person could read: the AgentRun, the events, ``kubectl describe``, every key
of the store read raw, and the replicas' logs.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from tests.support.agent_manifests import openai_agent
from tests.support.agentruns import apply_run, condition, wait_until_completed
from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for
from tests.support.redis_server import RedisServer

from agentrun._redaction import MASK, Redactor
from agentrun.testing.model_server import ModelServer, Turn, serving

KEY = "echoed-model-key-" + secrets.token_hex(12)
"""The model's key: in a Secret, and repeated by the model in its answer."""

SCRIPT = (Turn(text=f"Done. The key you sent me is {KEY}, by the way."),)


@pytest.fixture(scope="module")
def model() -> Iterator[ModelServer]:
    with serving(SCRIPT) as server:
        yield server


@pytest.fixture(scope="module")
def echoer(kube: Kube, operators: Operators, model: ModelServer) -> Kube:
    kube.kubectl("create", "secret", "generic", "echo-keys", f"--from-literal=openai={KEY}")
    kube.kubectl("annotate", "secret", "echo-keys", "agentrun.dev/agents=*")
    manifest = openai_agent(
        "echoer", model.openai_url, secret="echo-keys", instructions="Say what you were sent."
    )
    kube.kubectl("apply", "-f", "-", stdin=manifest)
    apply_run(kube, "echoed", "echoer")
    wait_until_completed(kube, "echoed", operators.logs, within=90)
    return kube


def _store(redis: RedisServer) -> list[str]:
    """Every key of the store and what it holds, read raw."""
    kept = []
    for key in redis.cli("--scan").split():
        kind = redis.cli("TYPE", key).strip()
        command = {"hash": "HGETALL", "zset": "ZRANGE", "list": "LRANGE", "stream": "XRANGE"}
        args = {"ZRANGE": ("0", "-1"), "LRANGE": ("0", "-1"), "XRANGE": ("-", "+")}
        verb = command.get(kind, "GET")
        kept.append(f"{key}: {redis.cli(verb, key, *args.get(verb, ()))}")
    return kept


def test_the_key_is_one_no_pattern_would_mask() -> None:
    assert Redactor.build().mask(KEY) == KEY


def test_the_answer_shows_masked_where_the_model_echoed_the_key(
    echoer: Kube, model: ModelServer
) -> None:
    assert {seen.headers.get("Authorization") for seen in model.seen} == {f"Bearer {KEY}"}
    message = condition(echoer, "echoed", "Succeeded")["message"]
    assert message == f"Done. The key you sent me is {MASK}, by the way."


def test_the_echoed_key_is_in_no_status_event_description_store_or_log(
    echoer: Kube, operators: Operators, redis: RedisServer
) -> None:
    wait_for(
        "the Completed event",
        lambda: "Completed" in echoer.kubectl("get", "events", "-o", "json").stdout,
        30,
        operators.logs,
    )
    places = {
        "agentrun": echoer.kubectl("get", "agentrun", "echoed", "-o", "json").stdout,
        "events": echoer.kubectl("get", "events", "-o", "json").stdout,
        "describe": echoer.kubectl("describe", "agentrun", "echoed").stdout,
        **{f"store {n}": text for n, text in enumerate(_store(redis))},
        **{f"log of {r.name}": r.output() for r in operators.replicas},
    }
    leaks = [where for where, text in places.items() if KEY in text]
    assert not leaks, leaks
    assert MASK in places["describe"]
    assert any(MASK in text for where, text in places.items() if where.startswith("store"))
