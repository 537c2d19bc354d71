"""Small pieces the runner tests share: tools that count, a boundary recorder, a crash.

A crash is simulated in-process by raising ``Crash`` (a ``BaseException``, so nothing in the
runner mistakes it for a tool's answer) from the place the process would have died: a tool that
acted, or the boundary observer right after a checkpoint was written. What survives is exactly
what a killed process leaves: the stores. The runner in the test is then thrown away and a new
one (with a fresh provider) resumes from the stores alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.trace import Tracer
from pydantic import JsonValue

from agentrun import Backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer, CheckpointPolicy, WriteReceipt
from agentrun._continuation import ContinuationPolicy
from agentrun._frontier import Boundary, Checkpoint
from agentrun._leases import MONOTONIC, Clock, LeasePolicy
from agentrun._messages import Message
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._loop import AgentRunner
from agentrun.runner._pricing import DEFAULT_PRICES, PriceTable
from agentrun.runner._providers.base import ModelReply, Provider
from agentrun.runner._providers.scripted import ScriptedProvider
from agentrun.runner._secrets import SecretKeyRef
from agentrun.runner._tools import Tool
from agentrun.stores._memory import MemoryLeaseStore

Turn = Sequence[tuple[str, dict[str, Any]]] | str


class Crash(BaseException):
    """The process died here."""


def script(*turns: Turn) -> ScriptedProvider:
    """A provider whose replies are ``turns``: a list of (tool, arguments) calls, or final text.

    Every reply uses 100 input and 10 output tokens (180 micros at the default prices).
    """
    steps: list[dict[str, JsonValue]] = []
    for index, turn in enumerate(turns):
        usage: dict[str, JsonValue] = {"input_tokens": 100, "output_tokens": 10}
        if isinstance(turn, str):
            steps.append({"text": turn, "usage": usage})
            continue
        calls: list[JsonValue] = [
            {"id": f"c{index}_{n}", "name": name, "arguments": arguments}
            for n, (name, arguments) in enumerate(turn)
        ]
        steps.append({"text": f"turn {index}", "tool_calls": calls, "usage": usage})
    return ScriptedProvider(steps)


TURN_COST = 100 * 2 + 10 * 8  # micros per scripted reply at DEFAULT_PRICES


def stop_before_the_dispatch() -> Callable[[], bool]:
    """A run's ``stop``: no before its first model call, yes before its first dispatch, so the
    run ends ``interrupted`` with the first turn's call outstanding in its frontier."""
    answers = iter((False, True))
    return lambda: next(answers, False)


@dataclass
class Probe:
    """A tool that records every call it gets; ``during`` runs inside the call."""

    name: str
    during: Callable[[str], Awaitable[Any]] | None = None
    calls: list[str] = field(default_factory=list)
    keys: list[str | None] = field(default_factory=list)

    def tool(self, **hints: Any) -> Tool:
        async def act(item: str, idempotency_key: str | None = None) -> str:
            self.calls.append(item)
            self.keys.append(idempotency_key)
            if self.during is not None:
                await self.during(item)
            return f"{self.name} did {item}"

        return Tool(name=self.name, fn=act, description=f"the {self.name} probe", **hints)


def agent(*tools: Tool, instructions: str = "Do what you are asked.") -> AgentDefinition:
    return AgentDefinition(name="probe", instructions=instructions, model="scripted", tools=tools)


@dataclass
class Boundaries:
    """Records every checkpoint the runner hands to ``on_boundary``; can crash after one."""

    crash_at: tuple[Boundary, int] | None = None
    then: Callable[[Checkpoint], Awaitable[None]] | None = None
    seen: list[Checkpoint] = field(default_factory=list)
    receipts: list[WriteReceipt | None] = field(default_factory=list)

    async def __call__(
        self, checkpoint: Checkpoint, receipt: WriteReceipt | None, error: Exception | None
    ) -> None:
        self.seen.append(checkpoint)
        self.receipts.append(receipt)
        if self.then is not None:
            await self.then(checkpoint)
        if self.crash_at is not None:
            boundary, nth = self.crash_at
            if sum(1 for c in self.seen if c.boundary is boundary) == nth:
                raise Crash(f"killed right after checkpoint {boundary.value} #{nth}")

    def at(self, boundary: Boundary) -> list[Checkpoint]:
        return [c for c in self.seen if c.boundary is boundary]


def runner(
    stores: Backend,
    provider: Provider,
    *,
    holder: str = "worker-a",
    leases: bool = True,
    ledger: bool = True,
    history: bool = False,
    whole: bool = True,
    boundaries: Boundaries | None = None,
    policy: CheckpointPolicy | None = None,
    lease_policy: LeasePolicy | None = None,
    continuation: ContinuationPolicy | None = None,
    prices: PriceTable = DEFAULT_PRICES,
    spans: Tracer | None = None,
    clock: Clock = MONOTONIC,
) -> AgentRunner:
    """A runner over ``stores``; ``leases=False`` leaves it its own memory lease store.
    With ``whole`` (the default, as ``AgentRunner.on_backend`` does) a boundary is one commit
    of the backend's ``CommitStore``; without it, each store is written on its own."""
    return AgentRunner(
        provider=provider,
        idempotency=stores.idempotency,
        checkpoints=Checkpointer(
            stores.checkpoints,
            policy,
            history=stores.history if history else None,
            commits=stores.commits if whole and isinstance(stores, StoreSet) else None,
        ),
        leases=stores.leases if leases else MemoryLeaseStore(),
        ledger=stores.ledger if ledger else None,
        prices=prices,
        lease_policy=lease_policy or LeasePolicy(ttl=10.0, renew_within=3.0),
        continuation=continuation,
        holder=holder,
        on_boundary=boundaries,
        spans=spans,
        clock=clock,
    )


def tool_results(messages: Sequence[Message]) -> dict[str | None, str]:
    """call id -> the text of its tool message."""
    return {m.tool_call_id: m.text for m in messages if m.role == "tool"}


class Recording:
    """A provider that remembers every conversation it was shown (what the model saw)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.shown: list[tuple[Message, ...]] = []

    async def complete(
        self, *, model: str, messages: Sequence[Message], tools: Sequence[dict[str, JsonValue]]
    ) -> ModelReply:
        self.shown.append(tuple(messages))
        return await self.inner.complete(model=model, messages=messages, tools=tools)


@dataclass
class KeptSecrets:
    """A resolver that keeps what it read, as the operator's does; it records what was refused."""

    values: dict[str, str]
    refusals: list[str] = field(default_factory=list)

    async def resolve(self, ref: SecretKeyRef) -> str:
        return self.values[str(ref)]

    def refused(self, ref: SecretKeyRef) -> None:
        self.refusals.append(str(ref))
