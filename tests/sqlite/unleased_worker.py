"""A worker process that resumes one run with an ``AgentRunner`` given no lease store, built as
the reference contract builds it, on a SQLite file the other workers share.

    python unleased_worker.py STORE_URL EFFECTS GO_ON AT

At wall-clock time ``AT`` it resumes run ``RUN`` of tenant ``TENANT``, whose frontier holds one
outstanding ``book_flight`` call. The tool is declared idempotent (the airline deduplicates), so
a resume dispatches it whatever its record says: only the resume claim keeps a second worker
from dispatching it too. It notes each dispatch in the SQLite file EFFECTS, then waits until the
file GO_ON exists, so the test decides when the dispatch ends and a second worker asks while
the first is still inside it. The worker prints one JSON line and exits:

* 0, ``{"status": ..., "holder": ...}``: it carried the run on to its end;
* 3, ``{"refused": "ResumeConflictError", "holder": ...}``: another worker holds the claim (named).
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
import time
from pathlib import Path

from agentrun import Checkpointer, open_backend
from agentrun._backend import Backend
from agentrun._errors import ResumeConflictError
from agentrun.runner import AgentDefinition, AgentRunner, ScriptedProvider, tool

TENANT = "acme"
RUN = "run-unleased"
GO_ON_WITHIN = 60.0
_FILES: dict[str, Path] = {}


@tool(key_arguments=("flight", "passenger"), idempotent=True)
async def book_flight(flight: str, passenger: str, idempotency_key: str | None = None) -> str:
    """Book a seat; the airline deduplicates on the idempotency key."""
    with sqlite3.connect(_FILES["effects"], isolation_level=None, timeout=10) as effects:
        effects.execute("CREATE TABLE IF NOT EXISTS dispatches (flight TEXT, pid INTEGER)")
        effects.execute("INSERT INTO dispatches VALUES (?, ?)", (flight, os.getpid()))
    waited = 0.0
    while not _FILES["go_on"].exists() and waited < GO_ON_WITHIN:
        await asyncio.sleep(0.01)
        waited += 0.01
    return "seat 12A"


AGENT = AgentDefinition(name="booking", instructions="book", model="scripted", tools=(book_flight,))
SCRIPT = ScriptedProvider(
    [
        {"tool_calls": [{"name": "book_flight", "arguments": {"flight": "LH1", "passenger": "A"}}]},
        {"text": "booked"},
    ]
)


def unleased(backend: Backend) -> AgentRunner:
    """A runner over ``backend``'s idempotency and checkpoint stores and no lease store."""
    return AgentRunner(
        provider=SCRIPT,
        idempotency=backend.idempotency,
        checkpoints=Checkpointer(backend.checkpoints, history=backend.history),
    )


async def main(url: str, at: float) -> int:
    async with await open_backend(url) as backend:
        runner = unleased(backend)
        await asyncio.sleep(max(0.0, at - time.time()))
        try:
            result = await runner.resume(AGENT, RUN, tenant=TENANT)
        except ResumeConflictError as refused:
            print(json.dumps({"refused": type(refused).__name__, "holder": refused.holder}))
            return 3
        print(json.dumps({"status": result.status.value, "holder": runner.holder}))
        return 0


if __name__ == "__main__":
    _FILES.update(effects=Path(sys.argv[2]), go_on=Path(sys.argv[3]))
    raise SystemExit(asyncio.run(main(sys.argv[1], float(sys.argv[4]))))
