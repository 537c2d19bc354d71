"""The run a worker process makes, for crash tests and demos that kill one and start another.

Such a test runs each worker as a process of its own, SIGKILLs it at a moment it chooses and
starts a new one to carry the run on; what it checks is what the new one says. ``start_or_resume``
is the part every such worker shares: ``start`` begins the run; ``resume`` carries it on, first
waiting out the lease of the worker that died (the lease is what keeps two workers off one run,
so a resume that finds it held waits rather than failing). The worker says how the run ended in
one JSON line on stdout and in its exit status (``WorkerExit``):

* 0, ``FINISHED``: the run stopped, ``{"status": ..., "output": ..., "fence": ...}``;
* 3, ``LEASE_HELD``: the lease stayed held elsewhere for all of ``lease_wait``, nothing printed;
* 4, ``INDETERMINATE``: a call the kit cannot decide, ``{"indeterminate": [call ids],
  "message": ...}``, the message the error carries (it names the calls, never their arguments).

A test that reads stdout should also search it for its secrets: what the worker prints is one
more place a key could leak to.
"""

from __future__ import annotations

import asyncio
import json
from enum import IntEnum

from agentrun._errors import IndeterminateToolCallError, RunLeaseError
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._loop import AgentRunner
from agentrun.runner._results import RunResult

LEASE_POLL_SECONDS = 0.1
"""How often a resume asks again for a lease held elsewhere."""


class WorkerExit(IntEnum):
    """A worker process's exit status: how its run ended."""

    FINISHED = 0
    LEASE_HELD = 3
    INDETERMINATE = 4


async def start_or_resume(
    runner: AgentRunner,
    agent: AgentDefinition,
    mode: str,
    *,
    tenant: str,
    run_id: str,
    prompt: str = "go",
    lease_wait: float = 10.0,
) -> WorkerExit:
    """Start run ``run_id`` of ``agent`` with ``prompt`` (``mode`` ``start``), or resume it once
    its lease is free, waiting at most ``lease_wait`` seconds (``resume``); print the ending as
    JSON and return the exit status. Closing the runner's stores is the caller's: it opened them.
    """
    if mode not in ("start", "resume"):
        raise ValueError(f"mode is {mode!r}: give start (a new run) or resume (carry it on)")
    try:
        if mode == "start":
            result = await runner.run(agent, prompt, tenant=tenant, run_id=run_id)
        else:
            resumed = await _resume_once_free(runner, agent, tenant, run_id, lease_wait)
            if resumed is None:
                return WorkerExit.LEASE_HELD
            result = resumed
    except IndeterminateToolCallError as error:
        calls = [call_id for call_id, _ in error.calls]
        print(json.dumps({"indeterminate": calls, "message": str(error)}))
        return WorkerExit.INDETERMINATE
    ending = {"status": result.status.value, "output": result.output, "fence": result.fence}
    print(json.dumps(ending))
    return WorkerExit.FINISHED


async def _resume_once_free(
    runner: AgentRunner, agent: AgentDefinition, tenant: str, run_id: str, lease_wait: float
) -> RunResult | None:
    """The resume, asked again while the lease is held elsewhere; None if it stayed held."""
    deadline = asyncio.get_running_loop().time() + lease_wait
    while True:
        try:
            return await runner.resume(agent, run_id, tenant=tenant)
        except RunLeaseError:
            if asyncio.get_running_loop().time() >= deadline:
                return None
            await asyncio.sleep(LEASE_POLL_SECONDS)
