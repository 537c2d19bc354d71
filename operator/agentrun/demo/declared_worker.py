"""A real worker process running the declared booking agent: the fake model server and the
booking MCP server are its caller's (``declared_crash``, a test), on loopback; the store is an
SQLite file.

    python -m agentrun.demo.declared_worker STORE_URL MODEL_URL MCP_URL MODE

MODE is ``start`` or ``resume`` (which waits for a dead worker's lease to lapse). Nothing here
kills anything: the test SIGKILLs this process while the MCP server holds one of its calls.
What it prints and its exit status are ``agentrun.testing.worker``'s: 0 finished, 3 the lease
stayed held elsewhere, 4 an undecidable call (its ids and the error's message).
"""

from __future__ import annotations

import asyncio
import os
import sys

from agentrun._leases import LeasePolicy
from agentrun.demo.declared import AIRLINE_TOKEN, MODEL_KEY, booking_spec
from agentrun.runner._declared import DeclaredAgent
from agentrun.runner._loop import AgentRunner
from agentrun.runner._secrets import MappingSecrets
from agentrun.stores._sqlite import open_backend
from agentrun.testing.worker import start_or_resume

TENANT, RUN_ID = "crash", "run-1"
SECRET_VALUES = {
    "/".join(MODEL_KEY): "model-key-for-the-demo-4417",
    "/".join(AIRLINE_TOKEN): "airline-token-for-the-demo-2290",
}
"""The model's key and the airline's token, as a Secret would hold them. No redaction pattern
recognises them, so only construction keeps them out of what the worker prints and stores: its
test searches both for them."""


async def main(store: str, model_url: str, mcp_url: str, mode: str) -> int:
    spec = booking_spec(provider="openai", model_url=model_url, mcp_url=mcp_url)
    declared = await DeclaredAgent.build(
        "booking-declared", spec, secrets=MappingSecrets(SECRET_VALUES)
    )
    backend = await open_backend(store)
    runner = AgentRunner.on_backend(
        backend,
        declared.registered(),
        lease_policy=LeasePolicy(ttl=1.0, renew_within=0.4),
        holder=f"declared-worker-{os.getpid()}",
    )
    try:
        return await start_or_resume(
            runner, declared.definition, mode, tenant=TENANT, run_id=RUN_ID
        )
    finally:
        await backend.close()
        await declared.aclose()


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main(*sys.argv[1:5])))
