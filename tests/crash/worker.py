"""A real worker process for the crash tests: it runs an agent on a real store and SIGKILLs
itself at one named point of one tool call's dispatch.

    python worker.py STORE_URL EFFECTS_DB RUN_ID MODE TARGET POINT

MODE is ``start`` or ``resume``; TARGET is the tool whose dispatch is cut (``charge_card``: keyed,
not idempotent; ``book_flight``: keyed, the service deduplicates; ``send_sms``: no key); POINT is
``none`` or one of

* ``before_intent`` — just before the call's intent is claimed in the idempotency store;
* ``after_intent`` — the claim is in flight, the tool has been handed the call but not acted;
* ``after_tool`` — the tool acted (the effect is in EFFECTS_DB), its outcome is not recorded;
* ``after_outcome`` — the outcome is recorded, the next checkpoint is not written;
* ``during_checkpoint`` — inside the SQLite transaction that commits that next boundary (its
  frontier and segment, with the model call's charge where it follows one).

The self-inflicted SIGKILL is a real one; nothing is cleaned up. What it prints and its exit
status are ``agentrun.testing.worker``'s: 0 finished, 3 the lease is held elsewhere, 4 an
undecidable call.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from typing import Any

from pydantic import JsonValue

from agentrun import Checkpointer, open_backend
from agentrun._backend import StoreSet
from agentrun._idempotency import derive_key, marker_key
from agentrun._leases import LeasePolicy
from agentrun.runner import AgentDefinition, AgentRunner, ScriptedProvider, tool
from agentrun.testing.worker import start_or_resume

STORE, EFFECTS, RUN_ID, MODE, TARGET, POINT = sys.argv[1:7]
TENANT = "crash"
CALL_IDS = {"charge_card": "call_0_0", "book_flight": "call_1_0", "send_sms": "call_2_0"}


def die(point: str) -> None:
    if point == POINT:
        os.kill(os.getpid(), signal.SIGKILL)


def effects() -> sqlite3.Connection:
    connection = sqlite3.connect(EFFECTS, isolation_level=None, timeout=10)
    connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, key TEXT, detail TEXT)")
    return connection


def effect(kind: str, key: str, detail: str) -> None:
    with effects() as connection:
        connection.execute("INSERT INTO effects VALUES (?, ?, ?)", (kind, key, detail))


def in_tool(name: str, act: Any) -> Any:
    if name == TARGET:
        die("after_intent")
    result = act()
    if name == TARGET:
        Faults.armed = True
        die("after_tool")
    return result


@tool(key_arguments=("order_id",))
async def charge_card(order_id: str, amount_cents: int) -> str:
    """Charge the customer's card (the processor does not deduplicate)."""
    return str(in_tool("charge_card", lambda: effect("charge", order_id, str(amount_cents))))


@tool(key_arguments=("flight", "passenger"), idempotent=True)
async def book_flight(flight: str, passenger: str, idempotency_key: str | None = None) -> str:
    """Book a seat; the airline deduplicates on the idempotency key."""

    def book() -> str:
        with effects() as connection:
            seen = connection.execute(
                "SELECT 1 FROM effects WHERE kind = 'booking' AND key = ?", (idempotency_key,)
            ).fetchone()
            if seen is None:
                connection.execute(
                    "INSERT INTO effects VALUES ('booking', ?, ?)", (idempotency_key, flight)
                )
        return "seat 12A"

    return str(in_tool("book_flight", book))


@tool()
async def send_sms(phone: str, text: str) -> str:
    """Text the passenger (the gateway does not deduplicate)."""
    return str(in_tool("send_sms", lambda: effect("sms", phone, text)))


AGENT = AgentDefinition(
    name="crash",
    instructions="charge, book, text",
    model="scripted",
    tools=(charge_card, book_flight, send_sms),
)
SCRIPT: list[dict[str, JsonValue]] = [
    {
        "tool_calls": [
            {"name": "charge_card", "arguments": {"order_id": "o-1", "amount_cents": 4200}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    {
        "tool_calls": [
            {"name": "book_flight", "arguments": {"flight": "LH1172", "passenger": "Ada"}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    {
        "tool_calls": [{"name": "send_sms", "arguments": {"phone": "+4989", "text": "booked"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    {"text": "done", "usage": {"input_tokens": 10, "output_tokens": 5}},
]
TARGET_KEY = {
    "charge_card": derive_key("charge_card", {"order_id": "o-1"}, ("order_id",)),
    "book_flight": None,
    "send_sms": marker_key(CALL_IDS["send_sms"]),
}[TARGET]


class Faults:
    """Wraps the real stores; only decides when to die, never changes what they do."""

    armed = False

    class Idempotency:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

        async def begin(self, tenant: str, run_id: str, key: str, **kw: Any) -> Any:
            if key == TARGET_KEY:
                die("before_intent")
            return await self.inner.begin(tenant, run_id, key, **kw)

        async def record(self, tenant: str, run_id: str, key: str, outcome: str, **kw: Any) -> None:
            await self.inner.record(tenant, run_id, key, outcome, **kw)
            if key == TARGET_KEY:
                die("after_outcome")

    class Commits:
        """The commit store the worker commits whole boundaries with, as deployed."""

        def __init__(self, inner: Any) -> None:
            self.inner = inner

        async def commit(self, boundary: Any) -> Any:
            if Faults.armed and POINT == "during_checkpoint":
                calls = 0

                def kill_midway() -> int:
                    nonlocal calls
                    calls += 1
                    if calls >= 3:
                        os.kill(os.getpid(), signal.SIGKILL)
                    return 0

                # The real transaction runs on the store's own connection (behind the StoreSet's
                # checks, ``inner``); the progress handler fires inside it, between SQLite VM
                # steps, before COMMIT.
                await self.inner.inner._database.read(
                    "arm", lambda c: c.set_progress_handler(kill_midway, 20)
                )
            return await self.inner.commit(boundary)


async def main() -> int:
    backend = await open_backend(STORE)
    assert isinstance(backend, StoreSet)
    assert backend.commits is not None
    runner = AgentRunner(
        provider=ScriptedProvider(SCRIPT),
        idempotency=Faults.Idempotency(backend.idempotency),
        checkpoints=Checkpointer(
            backend.checkpoints,
            history=backend.history,
            commits=Faults.Commits(backend.commits),
        ),
        leases=backend.leases,
        ledger=backend.ledger,
        lease_policy=LeasePolicy(ttl=1.0, renew_within=0.4),
        holder=f"crash-worker-{os.getpid()}",
    )
    try:
        return await start_or_resume(runner, AGENT, MODE, tenant=TENANT, run_id=RUN_ID)
    finally:
        await backend.close()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
