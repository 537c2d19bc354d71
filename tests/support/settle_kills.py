"""Many payments runs, their workers SIGKILLed at random, settled without a person, carried on.

``kill_settle_and_resume`` runs on any store (each store's folder calls it with its URL): worker
processes (``tests.support.settle_worker``) charge one order each at the honest
``PaymentService``; each is SIGKILLed — while the service holds its answer (the charge made, the
answer not yet sent: the crash that leaves a call undecidable), or at a random moment (before the
call, during it, or after the run finished) — then every run is settled (``settle_run``) and
carried on in this process. What must hold for every run: the run completes; every undecidable
call was settled by replaying it, none left to a person; the service charged the order exactly
once; and the result the run has is the answer the service stored for the run's key.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from pathlib import Path

from agentrun import Backend, Checkpointer
from agentrun._backend import StoreSet
from agentrun._errors import NothingCheckpointedError, RunLeaseError
from agentrun._idempotency import derive_key, remote_key
from agentrun.runner import AgentRunner, RunStatus, Settled, settle_run
from agentrun.runner._connections import Connections
from agentrun.runner._results import RunResult
from agentrun.testing.settle_services import PaymentService, serving
from tests.support.cli import cli_env
from tests.support.settle_agent import AMOUNT, payments_agent, turns
from tests.support.settle_worker import LEASE, TENANT

REPO = Path(__file__).resolve().parents[2]
AT_ONCE = 8
"""Workers alive at once: enough to overlap their runs, few enough for two cores."""
FREE_WITHIN = 15.0
"""Seconds a killed worker's one-second lease is waited for, on a loaded machine."""


def _worker_env() -> dict[str, str]:
    env = cli_env()
    env["PYTHONPATH"] = os.pathsep.join([env["PYTHONPATH"], str(REPO)])
    return env


async def kill_worker(
    service: PaymentService, store: str, run_id: str, *, held: bool, after: float = 0.0
) -> None:
    """Start a worker charging order ``run_id`` on ``store`` and SIGKILL it: once the service
    made the charge and holds its answer (``held``: the service is told to here), or ``after``
    seconds (it may have finished by then)."""
    if held:
        service.hold(run_id)
    worker = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.support.settle_worker",
        store,
        service.url,
        run_id,
        env=_worker_env(),
        cwd=REPO,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    if held:
        acted = await asyncio.to_thread(service.acted, run_id, 60.0)
        assert acted, f"{run_id}: the worker never charged"
    else:
        await asyncio.sleep(after)
    if worker.returncode is None:
        worker.kill()
    _, said = await worker.communicate()
    if held:
        service.release(run_id)
    assert worker.returncode in (0, -9), said.decode()


async def _once_free(backend: Backend, service_url: str, run_id: str) -> tuple[Settled, ...]:
    """Settle the run once the killed worker's lease has lapsed; what became of each call."""
    connections = Connections()
    agent = payments_agent(service_url, connections)
    deadline = asyncio.get_running_loop().time() + FREE_WITHIN
    try:
        while True:
            try:
                settled = await settle_run(backend, agent, TENANT, run_id, by="settle-kills")
            except RunLeaseError:
                assert asyncio.get_running_loop().time() < deadline, f"{run_id}: lease held"
                await asyncio.sleep(0.2)
                continue
            except NothingCheckpointedError:  # killed before its first frontier
                return ()
            return tuple(call.settled for call in settled)
    finally:
        await connections.aclose()


async def _carried_on(backend: Backend, service_url: str, run_id: str) -> RunResult:
    connections = Connections()
    assert isinstance(backend, StoreSet)
    runner = AgentRunner(
        provider=turns(run_id),
        idempotency=backend.idempotency,
        checkpoints=Checkpointer(
            backend.checkpoints, history=backend.history, commits=backend.commits
        ),
        leases=backend.leases,
        ledger=backend.ledger,
        lease_policy=LEASE,
        holder=f"carrier-{run_id}",
    )
    agent = payments_agent(service_url, connections)
    try:
        try:
            return await runner.resume(agent, run_id, tenant=TENANT)
        except NothingCheckpointedError:  # killed before its first frontier: nothing was sent
            return await runner.run(agent, "charge", tenant=TENANT, run_id=run_id)
    finally:
        await connections.aclose()


async def kill_settle_and_resume(store: str, backend: Backend, *, runs: int, seed: int) -> None:
    """See the module: ``runs`` runs on ``store`` (``backend`` is it, opened here), killed as
    ``seed`` draws; at least one of them while the service holds its answer."""
    draw = random.Random(seed)
    prefix = f"pay-{seed}-{draw.getrandbits(24):06x}"
    plans = {
        f"{prefix}-{n}": (n == 0 or draw.random() < 0.6, draw.uniform(0.3, 4.0))
        for n in range(runs)
    }
    with serving() as service:
        batches = list(plans.items())
        for at in range(0, runs, AT_ONCE):
            await asyncio.gather(
                *(
                    kill_worker(service, store, run_id, held=held, after=after)
                    for run_id, (held, after) in batches[at : at + AT_ONCE]
                )
            )
        settled = {run_id: await _once_free(backend, service.url, run_id) for run_id in plans}
        results = {run_id: await _carried_on(backend, service.url, run_id) for run_id in plans}
        for run_id, (held, _) in plans.items():
            key = remote_key(
                TENANT, run_id, derive_key("charge", {"order_id": run_id}, ("order_id",))
            )
            charged = service.made(run_id)
            assert [effect.key for effect in charged] == [key], run_id
            assert charged[0].amount_cents == AMOUNT
            assert Settled.LEFT_TO_A_PERSON not in settled[run_id], (run_id, settled[run_id])
            assert Settled.NO_SETTLEMENT not in settled[run_id], (run_id, settled[run_id])
            if held:
                assert settled[run_id] == (Settled.RAN,), (run_id, settled[run_id])
            result = results[run_id]
            assert result.status is RunStatus.COMPLETED, (run_id, result)
            told = [message.text for message in result.messages if message.role == "tool"]
            assert told == [service.answer_for(key)], run_id
