"""Settling a call a crash left undecided, by asking a real service on loopback what happened.

Each test makes the call as a worker makes it (the service acts), loses the answer the way a
crash loses it, then asks with ``settle_call`` (or ``settle_run`` over a store) and checks the
verdict against the service's own books: the result is the service's, a side effect happened
once, a negative answer settles nothing unless declared authoritative, and nothing secret the
service echoes reaches the verdict or the store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

import pytest
from pydantic import JsonValue

from agentrun._checkpointing import Checkpointer
from agentrun._decisions import resolve
from agentrun._errors import ConfigurationError, IndeterminateToolCallError, RunLeaseError
from agentrun._frontier import PendingCall
from agentrun._idempotency import derive_key, remote_key
from agentrun._messages import ToolCall
from agentrun._redaction import Masker, SecretValues
from agentrun.runner import DidNotRun, Probe, Ran, Replay, RunStatus, Settled, tool
from agentrun.runner._connections import Connections
from agentrun.runner._egress import CLUSTER_RANGES, EgressPolicy
from agentrun.runner._http_tool import http_tool
from agentrun.runner._mcp_tools import McpServer
from agentrun.runner._run_settler import settle_run
from agentrun.runner._secrets import MappingSecrets, Remembering
from agentrun.runner._settlement import Answer
from agentrun.runner._settling import Verdict, settle_call
from agentrun.runner._spec import HttpToolSpec, McpServerSpec
from agentrun.runner._tools import Tool, ToolTransportError
from agentrun.stores._memory import MemoryBackend
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.settle_services import PaymentService, serving
from tests.runner.helpers import agent, runner, script, tool_results

TENANT, RUN = "acme", "run-1"
ORDER: dict[str, JsonValue] = {"order_id": "o-1", "amount_cents": 4200}
PARAMETERS: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer"}},
    "required": ["order_id", "amount_cents"],
}
LOOKUP: dict[str, Any] = {
    "http": {"url": "{base}/charges/{{idempotencyKey}}"},
    "ran": {"status": [200], "pointer": "/state", "equals": ["confirmed"]},
    "didNotRun": {"status": [404]},
    "result": "/receipt",
}
TOKEN = "tok-5521-lookup-credential"
SECRETS = MappingSecrets({"pay/token": TOKEN})
MASKER = Masker.build()


@pytest.fixture
def service() -> Iterator[PaymentService]:
    with serving() as payments:
        yield payments


@pytest.fixture
async def pool() -> AsyncIterator[Connections]:
    connections = Connections()
    yield connections
    await connections.aclose()


class Waits:
    """A ``sleep`` that only notes what it was asked to wait."""

    def __init__(self) -> None:
        self.asked: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.asked.append(seconds)


def charge_tool(
    pool: Connections,
    service: PaymentService,
    settle: dict[str, Any],
    *,
    secrets: MappingSecrets | Remembering = SECRETS,
    **more: Any,
) -> Tool:
    probe = settle.get("probe")
    if probe is not None and "http" in probe:
        url = probe["http"]["url"].format(base=service.url)
        settle = {**settle, "probe": {**probe, "http": {**probe["http"], "url": url}}}
    spec = HttpToolSpec.model_validate(
        {
            "name": "charge",
            "url": service.url + "/charges",
            "parameters": PARAMETERS,
            "keyArguments": ["order_id"],
            "settle": settle,
            **more,
        }
    )
    return http_tool(spec, connections=pool, secrets=secrets)


def pending(
    made: Tool, arguments: Mapping[str, JsonValue] = ORDER, *, masked: bool = False
) -> PendingCall:
    """The call as the frontier names it."""
    key = derive_key(made.name, arguments, made.key_arguments) if made.key_arguments else None
    call = ToolCall(id="call_1", name=made.name, arguments=dict(arguments))
    return PendingCall(call=call, idempotency_key=key, arguments_masked=masked)


async def made_and_lost(made: Tool, call: PendingCall) -> str:
    """Make the call as the worker did (the service acts); its answer, which the crash lost."""
    key = None if call.idempotency_key is None else remote_key(TENANT, RUN, call.idempotency_key)
    return await made.invoke(call.call.arguments, key=key)


async def settled(
    made: Tool, call: PendingCall, *, masker: Masker = MASKER, waits: Waits | None = None
) -> Verdict:
    return await settle_call(
        made, call, tenant=TENANT, run_id=RUN, masker=masker, sleep=waits or Waits()
    )


# -- replay with the same key ------------------------------------------------------------------


async def test_an_honest_service_replays_the_first_outcome(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"replay": {}})
    call = pending(made)
    first = await made_and_lost(made, call)
    verdict = await settled(made, call)
    assert verdict.outcome == "ran"
    assert verdict.result == first
    assert len(service.made("o-1")) == 1
    assert [seen.key for seen in service.seen] == [
        remote_key(TENANT, RUN, call.idempotency_key or "")
    ] * 2
    assert verdict.evidence.startswith(
        f"replayed POST {service.url}/charges with the same Idempotency-Key"
    )


async def test_still_in_flight_waits_and_asks_again(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"replay": {}, "attempts": 3})
    call = pending(made)
    first = await made_and_lost(made, call)
    service.conflict(2, retry_after=0.25)
    waits = Waits()
    verdict = await settled(made, call, waits=waits)
    assert (verdict.outcome, verdict.result) == ("ran", first)
    assert waits.asked == [0.25, 0.25]
    assert "still in flight" in verdict.evidence
    assert len(service.made("o-1")) == 1


async def test_still_in_flight_past_the_attempts_is_left_to_a_person(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"replay": {}, "attempts": 2})
    call = pending(made)
    await made_and_lost(made, call)
    service.conflict(5)
    waits = Waits()
    verdict = await settled(made, call, waits=waits)
    assert verdict.outcome is None
    assert "2 times" in verdict.evidence
    assert waits.asked == [2.0]  # no Retry-After: a pause of a few seconds


async def test_a_key_reused_with_other_data_is_left_to_a_person(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"replay": {}})
    await made_and_lost(made, pending(made))
    other = pending(made, {"order_id": "o-1", "amount_cents": 9900})  # same key, other amount
    verdict = await settled(made, other)
    assert verdict.outcome is None
    assert "(422)" in verdict.evidence
    assert len(service.effects) == 1


# -- probe ---------------------------------------------------------------------------------------


async def test_a_probe_that_finds_the_charge_settles_it_as_ran_with_the_pointed_result(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"probe": LOOKUP})
    call = pending(made)
    first = await made_and_lost(made, call)
    verdict = await settled(made, call)
    assert (verdict.outcome, verdict.result) == ("ran", first)
    assert verdict.evidence.startswith(f"probed GET {service.url}/charges/")
    assert len(service.effects) == 1


@pytest.mark.parametrize("authoritative", [False, True])
async def test_a_probe_saying_not_found_settles_only_when_declared_authoritative(
    pool: Connections, service: PaymentService, authoritative: bool
) -> None:
    """The lookup lags: it says "not found" about a charge that went through. Trusted, that
    would charge again; so only the tool's declaration may make it conclusive."""
    made = charge_tool(
        pool, service, {"probe": {**LOOKUP, "didNotRunIsAuthoritative": authoritative}}
    )
    call = pending(made)
    await made_and_lost(made, call)
    service.lagging = True
    verdict = await settled(made, call)
    if authoritative:
        assert verdict.outcome == "didNotRun"
    else:
        assert verdict.outcome is None
        assert "does not declare that answer authoritative" in verdict.evidence
    assert "404" in verdict.evidence


async def test_a_probe_that_never_answers_is_asked_attempts_times_then_left(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"probe": LOOKUP, "attempts": 2}, timeoutSeconds=0.3)
    call = pending(made)
    await made_and_lost(made, call)
    service.silent = True
    waits = Waits()
    started = time.monotonic()
    verdict = await settled(made, call, waits=waits)
    assert verdict.outcome is None
    assert verdict.evidence.startswith("asked 2 times")
    assert "no answer came back" in verdict.evidence
    assert waits.asked == [2.0]
    assert time.monotonic() - started < 5


async def test_a_probes_answer_outside_its_conditions_settles_nothing(
    pool: Connections, service: PaymentService
) -> None:
    made = charge_tool(pool, service, {"probe": {**LOOKUP, "didNotRun": None}, "attempts": 1})
    verdict = await settled(made, pending(made))  # never made: the lookup says 404
    assert verdict.outcome is None
    assert "outside the probe's conditions" in verdict.evidence


# -- what cannot be asked ------------------------------------------------------------------------


@pytest.mark.parametrize("settle", [{"replay": {}}, {"probe": LOOKUP}])
async def test_masked_arguments_are_left_to_a_person_without_asking(
    pool: Connections, service: PaymentService, settle: dict[str, Any]
) -> None:
    made = charge_tool(pool, service, settle)
    verdict = await settled(made, pending(made, masked=True))
    assert verdict.outcome is None
    assert "the real values are gone" in verdict.evidence
    assert service.seen == []


async def test_a_keyless_call_is_left_to_a_person_when_settling_asks_by_key() -> None:
    async def lookup(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
        raise AssertionError("a keyless call must not be probed by its key")

    @tool(settle=Probe(lookup, needs_key=True))
    async def send(text: str) -> str:
        """Send a text."""
        return text

    verdict = await settled(send, pending(send, {"text": "hi"}))
    assert verdict.outcome is None
    assert "no idempotency key" in verdict.evidence


# -- secrets the service echoes ------------------------------------------------------------------


async def test_a_secret_the_service_echoes_is_masked_in_the_verdict_and_the_store(
    pool: Connections, service: PaymentService, memory: MemoryBackend
) -> None:
    """The run's lookup credential comes back in the probe's answer and in the replayed
    charge; neither the verdict nor anything the store keeps holds it."""
    service.echo_header = "Authorization"
    values = SecretValues()
    token = {"valueFrom": {"secretKeyRef": {"name": "pay", "key": "token"}}, "prefix": "Bearer "}
    probe = {**LOOKUP, "http": {**LOOKUP["http"], "headers": {"Authorization": token}}}
    made = charge_tool(
        pool,
        service,
        {"probe": probe},
        headers={"Authorization": token},
        secrets=Remembering(SECRETS, values),
        timeoutSeconds=0.5,
    )
    defined = agent(made)
    service.hold("o-1")  # the answer does not arrive within the tool's timeout
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge", ORDER)], "done")).run(
            defined, "pay", tenant=TENANT, run_id=RUN
        )
    service.release("o-1")
    assert TOKEN in service.effects[0].answer  # the service did echo it
    settled_calls = await settle_run(
        memory, defined, TENANT, RUN, by="settler", secrets=values, sleep=Waits()
    )
    (only,) = settled_calls
    assert only.settled is Settled.RAN
    assert TOKEN not in only.model_dump_json()
    assert "[REDACTED]" in (only.result or "")
    done = await runner(memory, script([("charge", ORDER)], "done"), holder="worker-b").resume(
        defined, RUN, tenant=TENANT
    )
    assert done.status is RunStatus.COMPLETED
    kept = [r.model_dump_json() for r in await memory.idempotency.records(TENANT, RUN)]
    latest = await memory.checkpoints.latest(TENANT, RUN)
    assert latest is not None
    kept.append(latest.decode())
    assert not [text for text in kept if TOKEN in text]
    assert len(service.effects) == 1


# -- a whole run: the crash lands between the service acting and the answer arriving ----------


async def test_the_run_completes_with_the_services_result_and_one_charge(
    pool: Connections, service: PaymentService, memory: MemoryBackend
) -> None:
    made = charge_tool(pool, service, {"replay": {}}, timeoutSeconds=0.5)
    defined = agent(made)
    turns = ([("charge", ORDER)], "done")
    service.hold("o-1")
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script(*turns)).run(defined, "pay", tenant=TENANT, run_id=RUN)
    service.release("o-1")
    (only,) = await settle_run(memory, defined, TENANT, RUN, by="settler", sleep=Waits())
    assert only.settled is Settled.RAN
    done = await runner(memory, script(*turns), holder="worker-b").resume(
        defined, RUN, tenant=TENANT
    )
    assert done.status is RunStatus.COMPLETED
    (charge,) = service.effects
    assert tool_results(done.messages)["c0_0"] == charge.answer
    assert await settle_run(memory, defined, TENANT, RUN, by="settler") == ()


async def test_a_call_of_a_tool_without_a_settlement_is_left_to_a_person(
    pool: Connections, service: PaymentService, memory: MemoryBackend
) -> None:
    spec = HttpToolSpec.model_validate(
        {
            "name": "charge",
            "url": service.url + "/charges",
            "parameters": PARAMETERS,
            "keyArguments": ["order_id"],
            "timeoutSeconds": 0.5,
        }
    )
    defined = agent(http_tool(spec, connections=pool))
    service.hold("o-1")
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge", ORDER)], "done")).run(
            defined, "pay", tenant=TENANT, run_id=RUN
        )
    service.release("o-1")
    (only,) = await settle_run(memory, defined, TENANT, RUN, by="settler")
    assert only.settled is Settled.NO_SETTLEMENT
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge", ORDER)], "done"), holder="worker-b").resume(
            defined, RUN, tenant=TENANT
        )


# -- MCP tools -----------------------------------------------------------------------------------


async def _mcp_tool(
    pool: Connections, airline: McpBooks, settle: dict[str, Any], **override: Any
) -> Tool:
    spec = McpServerSpec.model_validate(
        {
            "name": "airline",
            "url": airline.url,
            "allowedTools": ["book_flight"],
            "tools": {
                "book_flight": {
                    "disposition": "side_effecting",
                    "keyArguments": ["flight", "passenger"],
                    "settle": settle,
                    **override,
                }
            },
        }
    )
    (booking,) = await McpServer(spec, connections=pool).discover()
    return booking


BOOKING: dict[str, JsonValue] = {"flight": "LH1172", "passenger": "Ada"}


async def test_an_mcp_replay_sends_the_same_key_and_gets_the_same_seat(
    pool: Connections, airline: McpBooks
) -> None:
    booking = await _mcp_tool(pool, airline, {"replay": {}})
    call = pending(booking, BOOKING)
    first = await made_and_lost(booking, call)
    verdict = await settled(booking, call)
    assert (verdict.outcome, verdict.result) == ("ran", first)
    assert len(airline.bookings) == 1
    first_key, again_key = (made.key for made in airline.made("book_flight"))
    assert first_key == again_key
    assert "tools/call book_flight to MCP server 'airline'" in verdict.evidence


async def test_an_mcp_probe_asks_a_read_only_tool_of_the_same_server(
    pool: Connections, airline: McpBooks
) -> None:
    probe = {
        "mcp": {"tool": "find_booking", "arguments": {"reference": "{idempotencyKey}"}},
        "ran": {"pointer": "/state", "equals": ["booked"]},
        "didNotRun": {"pointer": "/state", "equals": ["not_found"]},
        "didNotRunIsAuthoritative": True,
        "result": "/seat",
    }
    booking = await _mcp_tool(pool, airline, {"probe": probe})
    never = pending(booking, {"flight": "LH1", "passenger": "Bob"})
    assert (await settled(booking, never)).outcome == "didNotRun"
    call = pending(booking, BOOKING)
    await made_and_lost(booking, call)
    verdict = await settled(booking, call)
    assert (verdict.outcome, verdict.result) == ("ran", "12A")
    assert len(airline.made("book_flight")) == 1


async def test_an_mcp_probe_must_name_a_read_only_tool_the_server_lists(
    pool: Connections, airline: McpBooks
) -> None:
    for tool_name in ("charge_card", "no_such_tool"):
        probe = {"mcp": {"tool": tool_name}, "ran": {"pointer": "/state"}}
        with pytest.raises(ConfigurationError, match="is not a tool the server lists as read-only"):
            await _mcp_tool(pool, airline, {"probe": probe})
    wrong = {"mcp": {"tool": "find_booking", "arguments": {"reference": "{seat}"}}}
    with pytest.raises(ConfigurationError, match=r"placeholders \['seat'\] are not arguments"):
        await _mcp_tool(pool, airline, {"probe": {**wrong, "ran": {"pointer": "/state"}}})


# -- tools written in code -----------------------------------------------------------------------


async def test_a_code_tool_replays_its_function_and_probes_with_its_own(
    memory: MemoryBackend,
) -> None:
    ledger: dict[str, str] = {}

    @tool(key_arguments=("order_id",), settle=Replay())
    async def charge(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> str:
        """Charge once per key."""
        assert idempotency_key is not None
        return ledger.setdefault(idempotency_key, f"charged {amount_cents} for {order_id}")

    call = pending(charge)
    first = await made_and_lost(charge, call)
    assert (await settled(charge, call)).result == first
    assert len(ledger) == 1

    async def lookup(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
        return Ran(ledger[key or ""]) if key in ledger else DidNotRun()

    @tool(key_arguments=("order_id",), settle=Probe(lookup))
    async def charge_again(order_id: str, amount_cents: int) -> str:
        """Charge."""
        return "unused"

    probed = pending(charge_again)
    ledger[remote_key(TENANT, RUN, probed.idempotency_key or "")] = "charged by hand"
    verdict = await settled(charge_again, probed)
    assert (verdict.outcome, verdict.result) == ("ran", "charged by hand")
    ledger.clear()
    assert (await settled(charge_again, probed)).outcome is None  # not authoritative


async def test_a_person_answering_while_the_service_is_asked_wins(memory: MemoryBackend) -> None:
    """The probe is under way when a person records an answer (here, from inside the probe:
    the moment it is asked): the settler writes nothing over it, and says so."""
    answered: list[bool] = []

    async def lookup(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
        checkpoint = await Checkpointer(memory.checkpoints).latest(TENANT, RUN)
        assert checkpoint is not None
        answered.append(
            await resolve(
                memory.idempotency, checkpoint, "c0_0", ran=False, result=None, by="a person"
            )
        )
        return Ran("charged, says the service")

    async def charge(order_id: str) -> str:
        raise ToolTransportError("sent, and no answer came back")

    made = tool(key_arguments=("order_id",), settle=Probe(lookup))(charge)
    defined = agent(made)
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge", {"order_id": "o-1"})], "done")).run(
            defined, "pay", tenant=TENANT, run_id=RUN
        )
    (only,) = await settle_run(memory, defined, TENANT, RUN, by="settler", sleep=Waits())
    assert answered == [True]
    assert only.settled is Settled.ANSWERED_MEANWHILE
    record = await memory.idempotency.read(
        TENANT, RUN, pending(made, {"order_id": "o-1"}).idempotency_key or ""
    )
    assert record is None  # the person's "did not run" stands: the next resume makes the call


async def test_two_settlers_of_one_run_never_both_answer(memory: MemoryBackend) -> None:
    """The second settler finds the run's lease held by the first, mid-probe, and writes
    nothing; the first records the one answer."""
    asked = asyncio.Event()
    answer = asyncio.Event()

    async def lookup(arguments: Mapping[str, JsonValue], key: str | None) -> Answer:
        asked.set()
        await answer.wait()
        return Ran("charged, says the service")

    async def charge(order_id: str) -> str:
        raise ToolTransportError("sent, and no answer came back")

    defined = agent(tool(key_arguments=("order_id",), settle=Probe(lookup))(charge))
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script([("charge", {"order_id": "o-1"})], "done")).run(
            defined, "pay", tenant=TENANT, run_id=RUN
        )
    first = asyncio.create_task(settle_run(memory, defined, TENANT, RUN, by="replica-a"))
    await asyncio.wait_for(asked.wait(), timeout=10)
    with pytest.raises(RunLeaseError):
        await settle_run(memory, defined, TENANT, RUN, by="replica-b")
    answer.set()
    (only,) = await first
    assert only.settled is Settled.RAN
    record = await memory.idempotency.read(
        TENANT, RUN, pending(defined.tools[0], {"order_id": "o-1"}).idempotency_key or ""
    )
    assert record is not None
    assert record.outcome == "charged, says the service"


async def test_a_probe_goes_only_where_the_egress_policy_lets_it(service: PaymentService) -> None:
    """The probe uses the tool's own connections: a policy that refuses loopback refuses the
    probe before anything is sent, and that settles nothing."""
    strict = Connections(
        policy=EgressPolicy.of([], [(network, "cluster") for network in CLUSTER_RANGES])
    )
    try:
        made = charge_tool(strict, service, {"probe": LOOKUP, "attempts": 1})
        verdict = await settled(made, pending(made))
    finally:
        await strict.aclose()
    assert verdict.outcome is None
    assert "the call was not made" in verdict.evidence
    assert service.seen == []


async def test_a_negative_that_is_not_authoritative_leaves_the_run_indeterminate(
    pool: Connections, service: PaymentService, memory: MemoryBackend
) -> None:
    made = charge_tool(pool, service, {"probe": LOOKUP}, timeoutSeconds=0.5)
    defined = agent(made)
    turns = ([("charge", ORDER)], "done")
    service.hold("o-1")
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script(*turns)).run(defined, "pay", tenant=TENANT, run_id=RUN)
    service.release("o-1")
    service.lagging = True
    (only,) = await settle_run(memory, defined, TENANT, RUN, by="settler", sleep=Waits())
    assert only.settled is Settled.LEFT_TO_A_PERSON
    assert "does not declare that answer authoritative" in only.evidence
    with pytest.raises(IndeterminateToolCallError):
        await runner(memory, script(*turns), holder="worker-b").resume(defined, RUN, tenant=TENANT)
    assert len(service.effects) == 1
