"""Deleting an AgentRun stops its run and forgets it: its checkpoint, transcript, records, charges.

Forgetting happens under the run's lease. Whoever forgets takes the lease first, which raises the
run's fence mark in the same step, so a holder that was paused and wakes up afterwards is refused
on its next write instead of writing into a run already forgotten; then it forgets, lets go, and
removes our finalizer. The lease record itself stays, as a fence that never falls; it names no
holder and costs a few bytes.

Who forgets, and when:

* The holder. Its worker sees ``deletionTimestamp`` (the runner asks before every model call and
  every dispatch), lets the call in flight complete, releases the lease and forgets at once
  (``RunWorker.work``): a deleted run makes no call after the delete reaches the operator, and is
  gone within a second or two of its step ending.
* A run nobody holds (finished, suspended, waiting on a person): the replica the run prefers
  (``_peers``) takes the lease and forgets it at once; the others look two poll intervals
  later, by when it is usually gone (their ``DELETED`` event ends their try: ``Forgetting.gone``),
  rather than each racing for the same lease and the same finalizer.
* A run another replica holds: this replica does not wait for it; it asks again every
  ``poll_interval`` in the background (``Forgetting``), so when the holder has forgotten it the
  object is gone, and when the holder died instead its lease lapses after the TTL and this
  replica forgets it then. Namespace deletion deletes every AgentRun in it: the same path.

A store or the API server away is waited for, longer each time (``_retrying.Backoff``); an error
that trying again cannot mend (a 403, a bug) is shown on the run as ``OperatorFault`` and this
replica stops trying to forget it until it restarts: a person has to act.

It is driven by watch events, not by a kopf deletion handler: kopf only runs those while its own
finalizer is on the object, and kopf's finalizer goes with the daemon once a run is finished —
exactly the runs that most often get deleted. Every replica may try; forgetting is idempotent and
the finalizer's removal is guarded by a JSON-patch test, so exactly one removes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from typing import Any

from agentrun._checkpointing import Checkpointer
from agentrun._errors import RunLeaseError
from agentrun.operator._admission import Place
from agentrun.operator._claims import ours
from agentrun.operator._context import FINALIZER, OperatorContext
from agentrun.operator._finalizers import drop_finalizer
from agentrun.operator._reporter import RunReporter
from agentrun.operator._retrying import Backoff, recoverable
from agentrun.operator._tenancy import tenant_of

FORGET_TTL = 30.0
"""Seconds the lease taken to forget a run lasts, should the forgetting replica die meanwhile."""

log = logging.getLogger(__name__)


def being_forgotten(body: Mapping[str, Any]) -> bool:
    """The run is being deleted and the stores may still keep something of it."""
    meta = body["metadata"]
    return bool(meta.get("deletionTimestamp")) and FINALIZER in (meta.get("finalizers") or ())


async def forget_stored(context: OperatorContext, tenant: str, run_id: str) -> None:
    """Forget everything the stores keep of the run under ``tenant``; the caller holds its
    lease there."""
    backend = context.backend
    await Checkpointer(backend.checkpoints, history=backend.history).forget(tenant, run_id)
    await backend.idempotency.forget(tenant, run_id)
    await backend.ledger.forget(tenant, run_id)


async def forget_run(context: OperatorContext, body: Mapping[str, Any], read: bool = True) -> bool:
    """Forget the run under its lease and remove our finalizer; False, having done nothing,
    while another worker holds the lease. With ``read`` False the run is taken as ``body`` shows
    it, a watch event that just came: a deletion, once begun, is never undone, forgetting twice
    forgets nothing more, and the finalizer's removal tests what it removes."""
    meta = body["metadata"]
    namespace, name, run_id = meta["namespace"], meta["name"], meta["uid"]
    current = await context.api.get(namespace, name) if read else body
    if current is None or current["metadata"]["uid"] != run_id or not being_forgotten(current):
        return True  # already forgotten: nothing of it is left to forget
    if not ours(current, context.config.controller_name):
        return True  # another install's run, in another install's stores
    # Never pinned (no lease was ever taken): its namespace's tenant, as it would have been.
    tenant = await tenant_of(context.api, current)
    if tenant is not None:
        backend = context.backend
        try:
            lease = await backend.leases.acquire(
                tenant, run_id, context.config.worker_id, ttl=FORGET_TTL
            )
        except RunLeaseError:
            return False
        try:
            await forget_stored(context, tenant, run_id)
            # A worker that died at work left its place under the quota taken: it goes too.
            await Place(backend.quotas, namespace, lease).give_back()
        finally:
            await backend.leases.release(lease)
    await drop_finalizer(context.api, current)
    return True


class Forgetting:
    """The runs this replica tries to forget in the background, one task per run, so that a
    watch event never waits on another worker's lease."""

    def __init__(self) -> None:
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._faulted: set[str] = set()
        """Runs whose forgetting met an error trying again cannot mend: not tried again on their
        next watch event (the fault's own status write is one), which would only meet it again."""

    def see(self, context: OperatorContext, body: Mapping[str, Any]) -> None:
        """A watch event of a run: if it is being deleted, forget it as soon as nobody holds it
        (at once in the replica the run prefers, two poll intervals later in the others)."""
        run_id: str = body["metadata"]["uid"]
        if being_forgotten(body) and run_id not in self._tasks and run_id not in self._faulted:
            first = context.peers.preferred(run_id) == context.config.worker_id
            delay = 0.0 if first else 2 * context.config.poll_interval
            task = asyncio.create_task(
                self._until_forgotten(context, body, delay), name=f"forget {run_id}"
            )
            self._tasks[run_id] = task
            task.add_done_callback(lambda _: self._tasks.pop(run_id, None))

    def gone(self, run_id: str) -> None:
        """The run's ``DELETED`` event: nothing of it is left to forget here."""
        task = self._tasks.get(run_id)
        if task is not None:
            task.cancel()
        self._faulted.discard(run_id)

    async def _until_forgotten(
        self, context: OperatorContext, body: Mapping[str, Any], delay: float
    ) -> None:
        run_id: str = body["metadata"]["uid"]
        backoff = Backoff(context.config.poll_interval)
        await asyncio.sleep(delay)
        read = delay > 0  # the event that started this try is the run as it stands
        while True:
            try:
                if await forget_run(context, body, read):
                    return
                wait = context.config.poll_interval  # another worker holds it: ask again
                backoff.reset()
            except Exception as error:
                if not recoverable(error):
                    self._faulted.add(run_id)
                    await RunReporter(context, body, log).fault(error)
                    return
                wait = backoff.next()
                log.warning("could not forget run %s yet (again in %.1fs): %s", run_id, wait, error)
            read = True  # a try later: the body is no longer the run as it stands
            await asyncio.sleep(wait)

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
