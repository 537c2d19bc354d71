"""HTTP tools: one request per call over the pool, the idempotency key as a header, secrets
read at each call and never kept."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest
from pydantic import JsonValue

from agentrun._decisions import resolve
from agentrun._errors import IndeterminateToolCallError
from agentrun._idempotency import ClaimState, derive_key, remote_key
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._connections import Connections
from agentrun.runner._http_tool import http_tool
from agentrun.runner._results import RunStatus
from agentrun.runner._secrets import MappingSecrets
from agentrun.runner._spec import HttpToolSpec
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import agent, runner, script, tool_results
from tests.runner.wire import endpoint
from tests.support.ports import free_port

BOOKING: dict[str, JsonValue] = {"flight": "LH1172", "passenger": "Ada Lovelace"}
TURNS = ([("reserve", BOOKING)], "done")
PARAMETERS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"flight": {"type": "string"}, "passenger": {"type": "string"}},
    "required": ["flight", "passenger"],
}
SECRETS = MappingSecrets({"airline/token": "tok-4471-payload", "airline/account": "acct-99-77"})


@pytest.fixture
async def pool() -> AsyncIterator[Connections]:
    connections = Connections()
    yield connections
    await connections.aclose()


def _agent(pool: Connections, url: str, **spec: object) -> AgentDefinition:
    declared = HttpToolSpec.model_validate(
        {
            "name": "reserve",
            "url": url + "/reservations",
            "parameters": PARAMETERS,
            "keyArguments": ["flight", "passenger"],
            **spec,
        }
    )
    return agent(http_tool(declared, connections=pool, secrets=SECRETS))


async def test_the_key_is_sent_and_differs_between_runs(
    pool: Connections, memory: MemoryBackend
) -> None:
    with endpoint() as server:
        for _ in range(2):
            server.answer(201, {"seat": "12A"})
        defined = _agent(pool, server.url)
        for run_id in ("r1", "r2"):
            result = await runner(memory, script(*TURNS)).run(
                defined, "go", tenant="t", run_id=run_id
            )
            assert result.status is RunStatus.COMPLETED
            assert tool_results(result.messages)["c0_0"] == '{"seat": "12A"}'

    keys = [sent.headers["Idempotency-Key"] for sent in server.received]
    assert [(sent.method, sent.path) for sent in server.received] == [("POST", "/reservations")] * 2
    assert [sent.json() for sent in server.received] == [BOOKING, BOOKING]
    assert keys[0] != keys[1]
    local = derive_key("reserve", BOOKING, ("flight", "passenger"))
    assert keys == [remote_key("t", "r1", local), remote_key("t", "r2", local)]


async def test_the_same_key_is_sent_again_when_a_resume_redispatches(
    pool: Connections, memory: MemoryBackend
) -> None:
    with endpoint() as server:
        server.answer(503, {"error": "try later"})
        defined = _agent(pool, server.url)
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
    pool: Connections, memory: MemoryBackend
) -> None:
    with endpoint() as server:
        server.answer(409, b"seat already taken")
        result = await runner(memory, script(*TURNS)).run(
            _agent(pool, server.url), "go", tenant="t", run_id="r"
        )
    assert result.status is RunStatus.COMPLETED
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith("error: ")
    assert "refused the request (409): seat already taken" in told
    record = await memory.idempotency.read(
        "t", "r", derive_key("reserve", BOOKING, ("flight", "passenger"))
    )
    assert record is not None
    assert record.state is ClaimState.COMPLETED


async def test_an_unkeyed_tool_sends_no_key(pool: Connections, memory: MemoryBackend) -> None:
    with endpoint() as server:
        server.answer(200, {"ok": True})
        await runner(memory, script(*TURNS)).run(
            _agent(pool, server.url, keyArguments=[]), "go", tenant="t", run_id="r"
        )
    assert "Idempotency-Key" not in server.received[0].headers


async def test_a_get_fills_the_url_template_and_sends_the_rest_as_the_query(
    pool: Connections, memory: MemoryBackend
) -> None:
    with endpoint() as server:
        server.answer(200, {"status": "on time"})
        defined = _agent(
            pool,
            server.url + "/flights/{flight}",
            method="GET",
            disposition="read_only",
            keyArguments=[],
        )
        turns = ([("reserve", {"flight": "LH 1172/b", "passenger": "Ada"})], "done")
        await runner(memory, script(*turns)).run(defined, "go", tenant="t", run_id="r")
    (sent,) = server.received
    assert (sent.method, sent.path) == ("GET", "/flights/LH%201172%2Fb/reservations?passenger=Ada")


async def test_secrets_are_read_at_each_call_and_never_kept(
    pool: Connections, memory: MemoryBackend
) -> None:
    secret = {"valueFrom": {"secretKeyRef": {"name": "airline", "key": "token"}}}
    account = {"valueFrom": {"secretKeyRef": {"name": "airline", "key": "account"}}}
    with endpoint() as server:
        server.answer(201, b'{"seat": "12A", "echo": "you sent acct-99-77"}')
        defined = _agent(
            pool,
            server.url,
            headers={"Authorization": {**secret, "prefix": "Token "}},
            arguments={"account": account},
        )
        assert "account" not in str(defined.tools[0].schema())
        result = await runner(memory, script(*TURNS)).run(defined, "go", tenant="t", run_id="r")
    (sent,) = server.received
    assert sent.headers["Authorization"] == "Token tok-4471-payload"
    assert sent.json() == {**BOOKING, "account": "acct-99-77"}
    told = tool_results(result.messages)["c0_0"]
    assert "acct-99-77" not in told
    assert "[REDACTED]" in told
    latest = await runner(memory, script(*TURNS)).checkpoints.latest("t", "r")
    assert latest is not None
    stored = latest.model_dump_json()
    assert "tok-4471-payload" not in stored
    assert "acct-99-77" not in stored


async def test_a_missing_secret_means_the_call_was_not_made(
    pool: Connections, memory: MemoryBackend
) -> None:
    missing = {"valueFrom": {"secretKeyRef": {"name": "airline", "key": "nope"}}}
    with endpoint() as server:
        result = await runner(memory, script(*TURNS)).run(
            _agent(pool, server.url, headers={"X-Key": missing}), "go", tenant="t", run_id="r"
        )
    assert server.received == []
    told = tool_results(result.messages)["c0_0"]
    assert told.startswith("error: the call was not made: secret airline/nope could not be read")


async def test_a_service_nobody_answers_on_means_the_call_was_not_made(
    pool: Connections, memory: MemoryBackend
) -> None:
    port = free_port()
    result = await runner(memory, script(*TURNS)).run(
        _agent(pool, f"http://127.0.0.1:{port}"), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert tool_results(result.messages)["c0_0"].startswith(
        "error: the call was not made: POST http://127.0.0.1:"
    )


@pytest.mark.parametrize("method", ["POST", "PUT"])
@pytest.mark.parametrize("fault", ["dropped", "too slow"])
async def test_a_request_sent_without_an_answer_leaves_the_call_indeterminate(
    pool: Connections, memory: MemoryBackend, fault: str, method: str
) -> None:
    """The service received the request, then the connection closed (or the tool's timeout
    passed) before any answer: whether it booked is unknown, so the side-effecting call is
    indeterminate and a resume does not send it again — nor does the HTTP client, whatever the
    method (RFC 9112 lets a client resend an idempotent one on a closed connection)."""
    with endpoint() as server:
        if fault == "dropped":
            server.drop()
            server.drop()  # what a resend would be answered with
        else:
            server.answer(201, {"seat": "12A"}, after=1.0)
        defined = _agent(pool, server.url, timeoutSeconds=0.3, method=method)
        with pytest.raises(IndeterminateToolCallError, match=r"reserve \(call c0_0\)") as raised:
            await runner(memory, script(*TURNS)).run(defined, "go", tenant="t", run_id="r")
        assert "nobody knows whether it acted" in str(raised.value.__cause__)
        with pytest.raises(IndeterminateToolCallError):
            await runner(memory, script(*TURNS), holder="worker-b").resume(defined, "r", tenant="t")
    assert [sent.json() for sent in server.received] == [BOOKING]


async def test_an_idle_connection_is_given_up_before_a_server_would_close_it(
    pool: Connections,
) -> None:
    """Servers close idle connections after a few seconds (uvicorn and Node after 5): a request
    sent on one as it closes fails after it was sent, which for a tool call means indeterminate.
    A connection idle for half that is not reused; one idle for a moment is."""
    accepted: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        while await reader.readuntil(b"\r\n\r\n"):
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    client = pool.client(timeout=5)
    try:
        for pause in (0.0, 0.2, 2.5):
            await asyncio.sleep(pause)
            assert (await client.get(url)).text == "ok"
    finally:
        server.close()
        for writer in accepted:
            writer.close()
    assert len(accepted) == 2  # the second request reused the first connection, the third not


async def test_a_cookie_a_server_sets_is_never_sent_back(pool: Connections) -> None:
    """A tool's client serves every run and tenant of a replica: a cookie one call was given
    (a session, a tenant's login) must not go out with the next call, whoever makes it."""
    cookies: list[str | None] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError):  # the client closing its end
            await answer(reader, writer)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            sent = dict(
                line.split(": ", 1) for line in head.decode().split("\r\n")[1:] if ": " in line
            )
            cookies.append({name.lower(): value for name, value in sent.items()}.get("cookie"))
            writer.write(
                b"HTTP/1.1 200 OK\r\nSet-Cookie: session=tenant-a; Path=/\r\n"
                b"Content-Length: 2\r\n\r\nok"
            )
            await writer.drain()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/"
    client = pool.client(timeout=5)
    try:
        for _ in range(2):
            assert (await client.get(url)).text == "ok"
    finally:
        server.close()
    assert cookies == [None, None]
