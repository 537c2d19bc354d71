"""Carrying a run on: what is repeated, what is replayed, what is refused.

Each test kills the first worker (``Crash``) at a chosen point, throws its runner away, and
resumes with a new runner that has only the stores, as a new process would.
"""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys

import pytest

from agentrun._checkpointing import Checkpointer, CheckpointPolicy
from agentrun._errors import (
    ConfigurationError,
    IndeterminateToolCallError,
    RevisionMismatchError,
    StoreUnavailableError,
)
from agentrun._frontier import Boundary
from agentrun._idempotency import ClaimState, derive_key, marker_key
from agentrun._resume import ToolDisposition, plan_resume
from agentrun.demo.booking import BOOKING
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._loop import AgentRunner
from agentrun.runner._results import RunStatus
from agentrun.runner._tools import Tool, ToolError
from agentrun.stores._memory import MemoryBackend
from tests.runner.helpers import (
    TURN_COST,
    Boundaries,
    Crash,
    Probe,
    Recording,
    agent,
    runner,
    script,
    tool_results,
)

ONE_CALL = ([("act", {"item": "x"})], "done")
KEYED = ("item",)


def _tracking(key_arguments: tuple[str, ...], call_id: str = "c0_0") -> str:
    return derive_key("act", {"item": "x"}, key_arguments) if key_arguments else marker_key(call_id)


async def test_resume_from_after_model_call_does_not_ask_the_model_again(
    memory: MemoryBackend,
) -> None:
    probe = Probe("act")
    defined = agent(probe.tool(key_arguments=KEYED))
    first = script(*ONE_CALL)
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(memory, first, boundaries=crash).run(defined, "go", tenant="t", run_id="r")
    assert first.calls == 1
    assert probe.calls == []

    second = script(*ONE_CALL)
    result = await runner(memory, second, holder="worker-b").resume(defined, "r", tenant="t")
    assert result.status is RunStatus.COMPLETED
    assert result.resumed
    assert second.calls == 1  # only the final answer; the reply held in the frontier is reused
    assert probe.calls == ["x"]
    assert result.iteration == 2
    assert await memory.ledger.spent("t", "r") == 2 * TURN_COST == result.cost_micros


@pytest.mark.parametrize("key_arguments", [KEYED, ()], ids=["keyed", "keyless"])
async def test_recorded_outcome_is_replayed_without_calling_the_tool(
    memory: MemoryBackend, key_arguments: tuple[str, ...]
) -> None:
    """Killed after the outcome was recorded, before any checkpoint said so."""
    probe = Probe("act")
    defined = agent(probe.tool(key_arguments=key_arguments))
    skip_results = CheckpointPolicy(
        boundaries=frozenset({Boundary.AFTER_MODEL_CALL, Boundary.BEFORE_APPROVAL})
    )
    crash = Boundaries(crash_at=(Boundary.AFTER_TOOL_RESULT, 1))
    with pytest.raises(Crash):
        await runner(memory, script(*ONE_CALL), boundaries=crash, policy=skip_results).run(
            defined, "go", tenant="t", run_id="r"
        )
    assert crash.receipts[-1] is None  # that boundary was not written
    record = await memory.idempotency.read("t", "r", _tracking(key_arguments))
    assert record is not None
    assert record.state is ClaimState.COMPLETED
    assert record.outcome == "act did x"

    resumed = runner(memory, script(*ONE_CALL), holder="worker-b")
    checkpoint = await resumed.checkpoints.latest("t", "r")
    assert checkpoint is not None
    assert checkpoint.boundary is Boundary.AFTER_MODEL_CALL
    plan = await plan_resume(checkpoint, memory.idempotency)
    assert [d.disposition for d in plan.decisions] == [ToolDisposition.COMPLETED]

    result = await resumed.resume(defined, "r", tenant="t")
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == ["x"]  # not called again
    assert tool_results(result.messages)["c0_0"] == "act did x"


@pytest.mark.parametrize("key_arguments", [KEYED, ()], ids=["keyed", "keyless"])
async def test_intent_is_recorded_before_the_tool_runs(
    memory: MemoryBackend, key_arguments: tuple[str, ...]
) -> None:
    seen = []

    async def look(item: str) -> None:
        seen.append(await memory.idempotency.read("t", "r", _tracking(key_arguments)))

    probe = Probe("act", during=look)
    result = await runner(memory, script(*ONE_CALL)).run(
        agent(probe.tool(key_arguments=key_arguments)), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    (claim,) = seen
    assert claim is not None
    assert claim.state is ClaimState.IN_FLIGHT
    assert (claim.holder, claim.fence) == ("worker-a", 1)
    after = await memory.idempotency.read("t", "r", _tracking(key_arguments))
    assert after is not None
    assert after.state is ClaimState.COMPLETED


async def test_a_tool_that_crashes_is_indeterminate_and_resume_refuses(
    memory: MemoryBackend,
) -> None:
    async def explode(item: str) -> None:
        raise RuntimeError("connection reset by peer")

    probe = Probe("act", during=explode)
    defined = agent(probe.tool())
    with pytest.raises(IndeterminateToolCallError) as live:
        await runner(memory, script(*ONE_CALL)).run(defined, "go", tenant="t", run_id="r")
    assert live.value.calls == (("c0_0", "act"),)
    assert isinstance(live.value.__cause__, RuntimeError)
    assert not live.value.retryable
    record = await memory.idempotency.read("t", "r", marker_key("c0_0"))
    assert record is not None
    assert record.state is ClaimState.IN_FLIGHT
    assert await memory.leases.held("t", "r") is None

    second = script(*ONE_CALL)
    with pytest.raises(IndeterminateToolCallError) as refused:
        await runner(memory, second, holder="worker-b").resume(defined, "r", tenant="t")
    assert refused.value.calls == (("c0_0", "act"),)
    assert "act (call c0_0)" in str(refused.value)
    assert probe.calls == ["x"]
    assert second.calls == 0
    assert await memory.leases.held("t", "r") is None


async def test_a_run_cancelled_during_a_call_says_so_and_is_no_tool_failure(
    memory: MemoryBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """Cancelling the run (the worker shutting down) while a call is in flight is not the tool
    failing: it is logged as a cancellation, as a warning, and the call's claim stays in flight
    for whoever carries the run on (it cannot know whether the call happened)."""
    entered = asyncio.Event()

    async def wait_forever(item: str) -> None:
        entered.set()
        await asyncio.Event().wait()

    caplog.set_level(logging.DEBUG, logger="agentrun.runner._dispatch")
    probe = Probe("act", during=wait_forever)
    running = asyncio.create_task(
        runner(memory, script(*ONE_CALL)).run(agent(probe.tool()), "go", tenant="t", run_id="r")
    )
    await entered.wait()
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    said = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.endswith("._dispatch")]
    assert said == [
        (
            logging.WARNING,
            "run r was cancelled while tool act (call c0_0) was in flight; its claim stays in "
            "flight, so carrying the run on asks whether the call happened",
        )
    ]
    record = await memory.idempotency.read("t", "r", marker_key("c0_0"))
    assert record is not None
    assert record.state is ClaimState.IN_FLIGHT


async def test_a_tool_error_is_recorded_and_shown_to_the_model(memory: MemoryBackend) -> None:
    async def refuse(item: str) -> None:
        raise ToolError("sold out")

    probe = Probe("act", during=refuse)
    provider = Recording(script(*ONE_CALL))
    result = await runner(memory, provider).run(
        agent(probe.tool(key_arguments=KEYED)), "go", tenant="t", run_id="r"
    )
    assert result.status is RunStatus.COMPLETED
    assert tool_results(provider.shown[-1])["c0_0"] == "error: sold out"
    record = await memory.idempotency.read("t", "r", _tracking(KEYED))
    assert record is not None
    assert record.state is ClaimState.COMPLETED
    assert record.outcome == "error: sold out"


@pytest.mark.parametrize(
    "hints",
    [{"read_only": True}, {"idempotent": True, "key_arguments": KEYED}],
    ids=["read_only", "idempotent"],
)
async def test_safe_to_repeat_calls_are_dispatched_again(
    memory: MemoryBackend, hints: dict[str, object]
) -> None:
    async def die_once(item: str) -> None:
        if len(probe.calls) == 1:
            raise Crash("killed after the tool acted")

    probe = Probe("act", during=die_once)
    defined = agent(probe.tool(**hints))
    with pytest.raises(Crash):
        await runner(memory, script(*ONE_CALL)).run(defined, "go", tenant="t", run_id="r")

    result = await runner(memory, script(*ONE_CALL), holder="worker-b").resume(
        defined, "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == ["x", "x"]
    assert probe.keys[0] == probe.keys[1]  # the same key both times (None when unkeyed)
    assert (probe.keys[0] is not None) == ("key_arguments" in hints)


async def test_unknown_tools_and_bad_arguments_are_told_to_the_model(
    memory: MemoryBackend,
) -> None:
    probe = Probe("act")
    provider = Recording(script([("nope", {}), ("act", {"wrong": 1})], "sorry"))
    result = await runner(memory, provider).run(agent(probe.tool()), "go", tenant="t", run_id="r")
    assert result.status is RunStatus.COMPLETED
    told = tool_results(provider.shown[-1])
    assert told["c0_0"] == "error: there is no tool named 'nope'"
    assert told["c0_1"].startswith("error: arguments for act do not fit")
    assert probe.calls == []
    for call_id in ("c0_0", "c0_1"):
        assert await memory.idempotency.read("t", "r", marker_key(call_id)) is None


async def test_a_pending_call_with_masked_arguments_is_withheld_on_resume(
    memory: MemoryBackend,
) -> None:
    secret = "sk-proj-" + "Q7" * 20
    probe = Probe("act")
    defined = agent(probe.tool())
    turns = ([("act", {"item": f"use {secret}"})], "done")
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(memory, script(*turns), boundaries=crash).run(
            defined, "go", tenant="t", run_id="r"
        )
    stored = await memory.checkpoints.latest("t", "r")
    assert stored is not None
    assert secret.encode() not in stored

    provider = Recording(script(*turns))
    result = await runner(memory, provider, holder="worker-b").resume(defined, "r", tenant="t")
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == []
    assert tool_results(provider.shown[-1])["c0_0"].startswith("error: this call was not made")

    # the live run, which has the real arguments, does dispatch it
    live = await runner(memory, script(*turns)).run(defined, "go", tenant="t", run_id="r2")
    assert live.status is RunStatus.COMPLETED
    assert probe.calls == [f"use {secret}"]


async def test_run_refuses_a_run_id_that_already_has_a_checkpoint(memory: MemoryBackend) -> None:
    defined = agent(Probe("act").tool())
    await runner(memory, script(*ONE_CALL)).run(defined, "go", tenant="t", run_id="r")
    with pytest.raises(ConfigurationError, match="already has a checkpoint; resume it"):
        await runner(memory, script(*ONE_CALL), holder="worker-b").run(
            defined, "again", tenant="t", run_id="r"
        )
    assert await memory.leases.held("t", "r") is None


@pytest.mark.parametrize("with_leases", [True, False], ids=["lease", "own-memory-lease"])
async def test_revision_mismatch_is_refused_and_the_run_is_released(
    memory: MemoryBackend, with_leases: bool
) -> None:
    probe = Probe("act")
    defined = agent(probe.tool())
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(memory, script(*ONE_CALL), boundaries=crash, leases=with_leases).run(
            defined, "go", tenant="t", run_id="r"
        )
    changed = agent(probe.tool(), instructions="Do something else.")
    with pytest.raises(RevisionMismatchError) as refused:
        await runner(memory, script(*ONE_CALL), holder="worker-b", leases=with_leases).resume(
            changed, "r", tenant="t"
        )
    assert (refused.value.pinned, refused.value.offered) == (defined.revision, changed.revision)
    assert probe.calls == []
    assert await memory.leases.held("t", "r") is None
    # released: a third worker can carry it on with the pinned definition
    result = await runner(memory, script(*ONE_CALL), holder="worker-c", leases=with_leases).resume(
        defined, "r", tenant="t"
    )
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == ["x"]


def test_revision_is_stable_across_processes() -> None:
    code = "from agentrun.demo.booking import BOOKING; print(BOOKING.revision)"
    revisions = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert revisions == {BOOKING.revision}


def test_revision_changes_when_a_tool_schema_changes() -> None:
    async def as_text(item: str) -> str:
        return item

    async def as_number(item: int) -> str:
        return str(item)

    async def with_option(item: str, urgent: bool = False) -> str:
        return item

    def defined(fn: object, **hints: object) -> AgentDefinition:
        return agent(Tool(name="act", fn=fn, **hints))  # type: ignore[arg-type]

    base = defined(as_text)
    assert defined(as_text).revision == base.revision
    others = {
        defined(as_number).revision,
        defined(with_option).revision,
        defined(as_text, read_only=True).revision,
        defined(as_text, requires_approval=True).revision,
        defined(as_text, version="2").revision,
        agent(Tool(name="act", fn=as_text), instructions="other").revision,
    }
    assert base.revision not in others
    assert len(others) == 6


async def test_a_safe_to_repeat_call_with_masked_arguments_is_withheld_not_sent_masked(
    memory: MemoryBackend,
) -> None:
    secret = "sk-proj-" + "Q7" * 20
    probe = Probe("act")
    defined = agent(probe.tool(read_only=True))
    turns = ([("act", {"item": f"look up {secret}"})], "done")
    crash = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 1))
    with pytest.raises(Crash):
        await runner(memory, script(*turns), boundaries=crash).run(
            defined, "go", tenant="t", run_id="r"
        )
    provider = Recording(script(*turns))
    result = await runner(memory, provider, holder="worker-b").resume(defined, "r", tenant="t")
    assert result.status is RunStatus.COMPLETED
    assert probe.calls == []
    assert tool_results(provider.shown[-1])["c0_0"].startswith("error: this call was not made")


class _RefusesFrontiersWithCalls:
    """A checkpoint store that is unreachable for a frontier naming calls, and fine otherwise."""

    def __init__(self, inner: MemoryBackend) -> None:
        self.inner = inner.checkpoints

    async def put(self, tenant: str, run_id: str, payload: bytes, *, fence: int) -> None:
        if b'"pending":[]' not in payload:
            raise StoreUnavailableError("test store", "write a checkpoint", OSError("down"))
        await self.inner.put(tenant, run_id, payload, fence=fence)

    async def latest(self, tenant: str, run_id: str) -> bytes | None:
        return await self.inner.latest(tenant, run_id)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


async def test_a_call_that_is_not_safe_to_repeat_waits_for_its_frontier(
    memory: MemoryBackend,
) -> None:
    """Without the frontier naming it, a resume could not know the call may have been made."""
    probe = Probe("act")
    defined = agent(probe.tool())
    live = AgentRunner(
        provider=script(*ONE_CALL),
        idempotency=memory.idempotency,
        checkpoints=Checkpointer(_RefusesFrontiersWithCalls(memory)),
        leases=memory.leases,
    )
    with pytest.raises(StoreUnavailableError):
        await live.run(defined, "go", tenant="t", run_id="r")
    assert probe.calls == []
    assert await memory.leases.held("t", "r") is None


async def test_a_policy_without_the_boundary_still_writes_a_frontier_naming_a_call(
    memory: MemoryBackend,
) -> None:
    probe = Probe("act")
    defined = agent(probe.tool(), Probe("look").tool(read_only=True))
    only_results = CheckpointPolicy(boundaries=frozenset({Boundary.AFTER_TOOL_RESULT}))
    seen = Boundaries()
    turns = ([("look", {"item": "x"})], [("act", {"item": "y"})], "done")
    await runner(memory, script(*turns), boundaries=seen, policy=only_results).run(
        defined, "go", tenant="t", run_id="r"
    )
    written = [
        [p.call.name for p in checkpoint.pending]
        for checkpoint, receipt in zip(seen.seen, seen.receipts, strict=True)
        if receipt is not None and checkpoint.boundary is Boundary.AFTER_MODEL_CALL
    ]
    # The read-only call's frontier is skipped as the policy says; the other one's is not.
    assert written == [["act"]]
    assert probe.calls == ["y"]
