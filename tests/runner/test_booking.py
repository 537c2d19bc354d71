"""The booking demo agent end to end, and what the frontier holds at each of the three boundaries.

As docs/contract.md#checkpoints-are-written-only-at-three-boundaries says: ``after_model_call``
holds the model's reply and the calls it asked for, none of them dispatched; ``after_tool_result``
holds every result of the turn and nothing pending; usage, cost, iteration and the history handle
are filled in. The stand-in airline and SMS gateway say whether a
call had been dispatched when the checkpoint was taken.
"""

from __future__ import annotations

import asyncio

import pytest

from agentrun import Backend
from agentrun._frontier import Boundary, Checkpoint
from agentrun._idempotency import marker_key
from agentrun._messages import Usage
from agentrun.demo import services
from agentrun.demo.booking import BOOKING, SCRIPT
from agentrun.runner._pricing import DEFAULT_PRICES
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.runner._results import RunStatus
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import Boundaries, runner, tool_results

FINAL = "Booked one seat on LH1172 for Ada Lovelace and sent her a text."


def _usage_after(turns: int) -> Usage:
    total = Usage()
    for step in SCRIPT[:turns]:
        total = total + Usage.model_validate(step["usage"])
    return total


def _cost_after(turns: int) -> int:
    return sum(
        DEFAULT_PRICES.cost("scripted", Usage.model_validate(step["usage"]))
        for step in SCRIPT[:turns]
    )


async def test_booking_agent_runs_to_completion(stores: Backend) -> None:
    provider = ScriptedProvider(SCRIPT)
    result = await runner(stores, provider).run(BOOKING, "book Ada", tenant="acme", run_id="r1")

    assert result.status is RunStatus.COMPLETED
    assert result.output == FINAL
    assert result.iteration == 4 == provider.calls
    assert result.usage == _usage_after(4)
    assert result.cost_micros == _cost_after(4) == 6132
    assert await stores.ledger.spent("acme", "r1") == 6132
    assert [(f, p) for f, p, _, _ in services.bookings()] == [("LH1172", "Ada Lovelace")]
    assert len(services.messages()) == 1
    assert await stores.leases.held("acme", "r1") is None
    stored = await stores.checkpoints.latest("acme", "r1")
    assert stored is not None
    assert b"after_model_call" in stored


async def test_frontier_at_each_boundary(memory: MemoryBackend) -> None:
    boundaries = Boundaries()
    live = runner(memory, ScriptedProvider(SCRIPT), history=True, boundaries=boundaries)
    stored: list[Checkpoint] = []
    effects: list[tuple[int, int, bool]] = []

    async def look(checkpoint: Checkpoint) -> None:
        latest = await live.checkpoints.latest(checkpoint.tenant, checkpoint.run_id)
        assert latest is not None
        stored.append(latest)
        notify_marker = await memory.idempotency.read("acme", "r1", marker_key("call_2_0"))
        effects.append((len(services.bookings()), len(services.messages()), bool(notify_marker)))

    boundaries.then = look
    result = await live.run(BOOKING, "book Ada", tenant="acme", run_id="r1")
    assert result.status is RunStatus.COMPLETED

    kinds = [c.boundary for c in boundaries.seen]
    amc, atr = Boundary.AFTER_MODEL_CALL, Boundary.AFTER_TOOL_RESULT
    assert kinds == [amc, atr, amc, atr, amc, atr, amc]
    # effects (bookings, messages, notify's dispatch marker) seen at each boundary: at
    # after_model_call the call asked for has not been dispatched; at after_tool_result it has.
    assert effects == [
        (0, 0, False),
        (0, 0, False),
        (0, 0, False),  # book_flight asked for, not dispatched
        (1, 0, False),
        (1, 0, False),  # notify_passenger asked for, no marker, nothing sent
        (1, 1, True),
        (1, 1, True),
    ]

    for index, checkpoint in enumerate(boundaries.seen):
        turn = index // 2 + 1
        assert checkpoint.iteration == turn
        assert checkpoint.usage == _usage_after(turn)
        assert checkpoint.cost_micros == _cost_after(turn)
        assert checkpoint.fence == 1
        assert checkpoint.agent_revision == BOOKING.revision
        last_reply = [m for m in checkpoint.messages if m.role == "assistant"][-1]
        assert last_reply.text == SCRIPT[turn - 1]["text"]
        results = tool_results(checkpoint.messages)
        asked = [call.id for call in last_reply.tool_calls]
        if checkpoint.boundary is amc:
            assert checkpoint.messages[-1] == last_reply  # the reply itself is held
            assert tuple(p.call for p in checkpoint.pending) == last_reply.tool_calls
            assert not any(call in results for call in asked)
        else:
            assert checkpoint.pending == ()
            assert asked
            assert all(call in results for call in asked)
        assert checkpoint.approval is None

    pending = {p.call.name: p for c in boundaries.at(amc) for p in c.pending}
    assert pending["book_flight"].safe_to_repeat
    assert pending["book_flight"].idempotency_key is not None
    assert pending["notify_passenger"].idempotency_key is None
    assert not pending["notify_passenger"].safe_to_repeat

    # what the store holds: the transcript out of line, the handle and its length filled in
    for checkpoint, persisted in zip(boundaries.seen, stored, strict=True):
        assert persisted.messages == ()
        assert persisted.history_handle is not None
        assert persisted.history_length == len(checkpoint.messages)
        assert persisted.iteration == checkpoint.iteration
        assert persisted.cost_micros == checkpoint.cost_micros
        assert persisted.usage == checkpoint.usage
        assert persisted.pending == checkpoint.pending
    assert await live.checkpoints.transcript(stored[-1]) == result.messages


async def test_booking_cancelled_mid_booking_resumes_with_one_seat(
    stores: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker stopped after the airline booked but before the run heard back: the booking is
    idempotent and keyed, so the resume sends it again with the same key and the airline
    deduplicates."""
    monkeypatch.setenv("AGENTRUN_DEMO_LINGER", "book")
    monkeypatch.setenv("AGENTRUN_DEMO_LINGER_SECONDS", "30")
    first = runner(stores, ScriptedProvider(SCRIPT), holder="worker-a")
    task = asyncio.create_task(first.run(BOOKING, "book Ada", tenant="acme", run_id="r1"))
    for _ in range(1000):  # until the airline has booked (the tool then lingers)
        if services.bookings():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await stores.leases.held("acme", "r1") is None

    monkeypatch.delenv("AGENTRUN_DEMO_LINGER")
    provider = ScriptedProvider(SCRIPT)
    result = await runner(stores, provider, holder="worker-b").resume(BOOKING, "r1", tenant="acme")
    assert result.status is RunStatus.COMPLETED
    assert result.resumed
    assert result.fence == 2
    assert provider.calls == 2  # the notify turn and the final answer: booking is not re-asked
    (flight, passenger, _seat, requests), *more = services.bookings()
    assert not more
    assert (flight, passenger) == ("LH1172", "Ada Lovelace")
    assert requests == 2  # sent twice, booked once
    assert len(services.messages()) == 1


async def test_each_reply_carries_its_own_model_call(stores: Backend) -> None:
    """Every assistant message keeps the tokens, price and time of the model call that produced
    it, and they add up to the run's totals; every other message is stored as it always was,
    with no ``model_call`` in its JSON."""
    result = await runner(stores, ScriptedProvider(SCRIPT)).run(
        BOOKING, "book Ada", tenant="acme", run_id="r1"
    )
    replies = [m for m in result.messages if m.role == "assistant"]
    calls = [m.model_call for m in replies if m.model_call is not None]
    assert len(calls) == len(replies) == 4
    assert [c.usage for c in calls] == [Usage.model_validate(s["usage"]) for s in SCRIPT[:4]]
    assert sum(c.cost_micros for c in calls) == result.cost_micros == 6132
    assert all(c.latency_ms >= 0 for c in calls)
    others = [m for m in result.messages if m.role != "assistant"]
    assert others
    assert all(m.model_call is None for m in others)
    assert all(b"model_call" not in m.__pydantic_serializer__.to_json(m) for m in others)
    stored = await stores.checkpoints.latest("acme", "r1")
    assert stored is not None
    assert b'"latency_ms"' in stored
