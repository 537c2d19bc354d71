"""Kill a real worker with SIGKILL at every dispatch point, resume it, count the side effects.

For each tool (keyed, keyed-and-deduplicated-remotely, keyless) and each point of its dispatch,
a worker process runs the agent on a real SQLite store and kills itself there. A second worker
resumes. The invariants:

* a keyed side effect never happens twice;
* a keyless one is reported indeterminate (never guessed at, never repeated) when the kill left
  its dispatch marker in flight; a person — here, the test reading the service's own records,
  as an on-call engineer would — answers, and the run finishes;
* every run finishes, after the resume or after that answer.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentrun import Checkpointer, open_backend
from agentrun._decisions import resolve
from agentrun._messages import Usage
from agentrun.runner._pricing import DEFAULT_PRICES

WORKER = Path(__file__).with_name("worker.py")
KIND = {"charge_card": "charge", "book_flight": "booking", "send_sms": "sms"}
CALL_IDS = {"charge_card": "call_0_0", "book_flight": "call_1_0", "send_sms": "call_2_0"}

# (tool, point, whether the resume must refuse until a person answers)
CASES = [
    ("charge_card", "before_intent", False),
    ("charge_card", "after_intent", True),
    ("charge_card", "after_tool", True),
    ("charge_card", "after_outcome", False),
    ("charge_card", "during_checkpoint", False),
    ("send_sms", "before_intent", False),
    ("send_sms", "after_intent", True),
    ("send_sms", "after_tool", True),
    ("send_sms", "after_outcome", False),
    ("send_sms", "during_checkpoint", False),
    ("book_flight", "after_intent", False),
    ("book_flight", "after_tool", False),
    ("book_flight", "during_checkpoint", False),
]


def _worker(
    store: str, effects: Path, mode: str, target: str, point: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(WORKER), store, str(effects), "run-1", mode, target, point],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _count(effects: Path, kind: str) -> int:
    with sqlite3.connect(effects) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, key TEXT, detail TEXT)")
        return int(
            connection.execute("SELECT count(*) FROM effects WHERE kind = ?", (kind,)).fetchone()[0]
        )


async def _frontier(store: str) -> tuple[str, str]:
    backend = await open_backend(store)
    try:
        checkpoint = await Checkpointer(backend.checkpoints).latest("crash", "run-1")
        assert checkpoint is not None
        return checkpoint.boundary.value, checkpoint.pending[0].call.id
    finally:
        await backend.close()


MODEL_CALL_COST = DEFAULT_PRICES.cost("scripted", Usage(input_tokens=10, output_tokens=5))


async def _spent(store: str) -> int:
    backend = await open_backend(store)
    try:
        return await backend.ledger.spent("crash", "run-1")
    finally:
        await backend.close()


async def _answer_as_a_person(store: str, call_id: str, happened: bool) -> None:
    backend = await open_backend(store)
    try:
        checkpoint = await Checkpointer(backend.checkpoints).latest("crash", "run-1")
        assert checkpoint is not None
        await resolve(
            backend.idempotency,
            checkpoint,
            call_id,
            ran=happened,
            result="done (confirmed by the service's records)" if happened else None,
            by="on-call",
        )
    finally:
        await backend.close()


@pytest.mark.parametrize(
    ("target", "point", "undecidable"), CASES, ids=[f"{t}-{p}" for t, p, _ in CASES]
)
def test_a_kill_at_any_dispatch_point_never_repeats_a_side_effect(
    tmp_path: Path, target: str, point: str, undecidable: bool
) -> None:
    store = f"sqlite:///{tmp_path}/state.db"
    effects = tmp_path / "effects.db"

    killed = _worker(store, effects, "start", target, point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    happened_before_resume = _count(effects, KIND[target])
    if point == "during_checkpoint":
        frontier = asyncio.run(_frontier(store))
        assert frontier == ("after_model_call", CALL_IDS[target]), (
            "the kill must land inside the write transaction, leaving the previous frontier"
        )

    resumed = _worker(store, effects, "resume", target, "none")
    if undecidable:
        assert resumed.returncode == 4, resumed.stdout + resumed.stderr
        refused = json.loads(resumed.stdout)["indeterminate"]
        assert len(refused) == 1
        assert _count(effects, KIND[target]) == happened_before_resume, "refusing must not act"
        asyncio.run(_answer_as_a_person(store, refused[0], happened_before_resume == 1))
        resumed = _worker(store, effects, "resume", target, "none")

    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    for kind in KIND.values():
        assert _count(effects, kind) == 1, f"{kind} happened {_count(effects, kind)} times"
    # Each model call charged once, in the commit of the boundary that follows it: a kill
    # before a commit loses none that landed, a kill inside one leaves no charge half made.
    assert asyncio.run(_spent(store)) == 4 * MODEL_CALL_COST


def test_an_uninterrupted_worker_finishes_with_one_of_each(tmp_path: Path) -> None:
    """The baseline the crash cases are compared with: the worker really does all three."""
    effects = tmp_path / "effects.db"
    done = _worker(f"sqlite:///{tmp_path}/state.db", effects, "start", "charge_card", "none")
    assert done.returncode == 0, done.stderr
    assert [_count(effects, kind) for kind in KIND.values()] == [1, 1, 1]
