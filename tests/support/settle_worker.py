"""A worker process of the settle kill tests: it runs one payments run on a real store.

    python -m tests.support.settle_worker STORE_URL SERVICE_URL RUN_ID

The run charges order RUN_ID (``tests.support.settle_agent``) with a one-second lease, so a
test that SIGKILLs it waits a second, not a minute, for the run to be free. What it prints and
its exit status are ``agentrun.testing.worker``'s.
"""

from __future__ import annotations

import asyncio
import os
import sys

from agentrun import Checkpointer, open_backend
from agentrun._backend import StoreSet
from agentrun._leases import LeasePolicy
from agentrun.runner import AgentRunner
from agentrun.runner._connections import Connections
from agentrun.testing.worker import start_or_resume
from tests.support.settle_agent import payments_agent, turns

TENANT = "settle"
LEASE = LeasePolicy(ttl=1.0, renew_within=0.4)


async def main(store: str, service: str, run_id: str) -> int:
    backend = await open_backend(store)
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
        holder=f"settle-worker-{os.getpid()}",
    )
    try:
        agent = payments_agent(service, connections)
        return await start_or_resume(runner, agent, "start", tenant=TENANT, run_id=run_id)
    finally:
        await connections.aclose()
        await backend.close()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(*sys.argv[1:4])))
