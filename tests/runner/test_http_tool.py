"""``http_post_tool`` carries the call's idempotency key to the remote service as a header."""

from __future__ import annotations

import pytest
from pydantic import JsonValue

from agentrun.decisions import resolve
from agentrun.errors import IndeterminateToolCallError
from agentrun.idempotency import ClaimState, derive_key, remote_key
from agentrun.runner.agents import AgentDefinition
from agentrun.runner.http_tool import http_post_tool
from agentrun.runner.results import RunStatus
from agentrun.stores.memory import MemoryBackend
from tests.runner.helpers import agent, runner, script, tool_results
from tests.runner.wire import endpoint

PAYLOAD: dict[str, JsonValue] = {"flight": "LH1172", "passenger": "Ada Lovelace"}
TURNS = ([("reserve", {"payload": PAYLOAD})], "done")


def _agent(url: str, *, keyed: bool = True) -> AgentDefinition:
    return agent(http_post_tool("reserve", url + "/reservations", keyed=keyed))


async def test_the_key_is_sent_and_differs_between_runs(memory: MemoryBackend) -> None:
    with endpoint() as server:
        for _ in range(2):
            server.answer(201, {"seat": "12A"})
        defined = _agent(server.url)
        for run_id in ("r1", "r2"):
            result = await runner(memory, script(*TURNS)).run(
                defined, "go", tenant="t", run_id=run_id
            )
            assert result.status is RunStatus.COMPLETED
            assert tool_results(result.messages)["c0_0"] == '{"seat": "12A"}'

    keys = [sent.headers["Idempotency-Key"] for sent in server.received]
    assert [sent.json() for sent in server.received] == [PAYLOAD, PAYLOAD]
    assert keys[0] != keys[1]
    local = derive_key("reserve", {"payload": PAYLOAD}, ("payload",))
    assert keys == [remote_key("t", "r1", local), remote_key("t", "r2", local)]
    assert local not in keys  # the service sees a key scoped to the run, not the kit's own


async def test_the_same_key_is_sent_again_when_a_resume_redispatches(
    memory: MemoryBackend,
) -> None:
    with endpoint() as server:
        server.answer(503, {"error": "try later"})
        defined = _agent(server.url)
        with pytest.raises(IndeterminateToolCallError):
            await runner(memory, script(*TURNS)).run(defined, "go", tenant="t", run_id="r")
        # someone checks the service: the 503 means it did not act
        checkpoint = await runner(memory, script(*TURNS)).checkpoints.latest("t", "r")
        assert checkpoint is not None
        await resolve(memory.idempotency, checkpoint, "c0_0", ran=False, result=None, by="oncall")
        server.answer(201, {"seat": "12A"})
        result = await runner(memory, script(*TURNS), holder="worker-b").resume(
            defined, "r", tenant="t"
        )
    assert result.status is RunStatus.COMPLETED
    first, second = (sent.headers["Idempotency-Key"] for sent in server.received)
    assert first == second


async def test_a_4xx_is_the_service_refusing_and_is_told_to_the_model(
    memory: MemoryBackend,
) -> None:
    with endpoint() as server:
        server.answer(409, b"seat already taken")
        result = await runner(memory, script(*TURNS)).run(
            _agent(server.url), "go", tenant="t", run_id="r"
        )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith("error: ")
    assert "refused the request (409): seat already taken" in told
    record = await memory.idempotency.read(
        "t", "r", derive_key("reserve", {"payload": PAYLOAD}, ("payload",))
    )
    assert record is not None
    assert record.state is ClaimState.COMPLETED


async def test_an_unkeyed_post_sends_no_key(memory: MemoryBackend) -> None:
    with endpoint() as server:
        server.answer(200, {"ok": True})
        await runner(memory, script(*TURNS)).run(
            _agent(server.url, keyed=False), "go", tenant="t", run_id="r"
        )
    assert "Idempotency-Key" not in server.received[0].headers
