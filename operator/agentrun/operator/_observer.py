"""What every replica does with every watch event of an AgentRun, holder or not.

* Tell the scheduler (``_scheduler``): it decides from the event whether the run has work to do
  here, and hands a worker at work on the run the news (``_news``), so that it waits on the
  watch rather than asking the API server.
* Note the replica holding it (``_peers``): which replica claims a new run is picked among those.
* Count it: ``agentrun_runs{reason}`` is computed from the watch, which every replica of an install
  sees whole, so every replica reports every run of its install by the reason of its
  ``Succeeded`` condition, and a deleted run leaves the gauge with its ``DELETED`` event (a replica
  only counting what it itself did went stale as runs moved between replicas).
* Forget it, when it is being deleted (``_forget``).
* Catch a finished run's ``observedGeneration`` up with a spec edited after it finished: no daemon
  writes a finished run's status any more.

Runs another install claimed are left alone (``_claims``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentrun._outcomes import SUCCEEDED
from agentrun.operator._claims import ours
from agentrun.operator._conditions import PENDING, find, is_terminal
from agentrun.operator._context import OperatorContext
from agentrun.operator._forget import Forgetting
from agentrun.operator._scheduler import Scheduler
from agentrun.operator._status import StatusWriter


async def observe(
    context: OperatorContext,
    forgetting: Forgetting,
    scheduler: Scheduler,
    event_type: str,
    body: Mapping[str, Any],
) -> None:
    meta, status = body["metadata"], body.get("status") or {}
    scheduler.seen(event_type, body)
    if not ours(body, context.config.controller_name):
        return
    conditions = status.get("conditions") or []
    if event_type == "DELETED":
        context.metrics.run_is(meta["uid"], None)
        forgetting.gone(meta["uid"])
        return
    if holder := (status.get("lease") or {}).get("holder"):
        context.peers.saw(str(holder))  # a replica of this install, alive (``peers``)
    succeeded = find(conditions, SUCCEEDED) or {}
    context.metrics.run_is(meta["uid"], str(succeeded.get("reason") or PENDING.reason))
    forgetting.see(context, body)
    if (
        not meta.get("deletionTimestamp")
        and is_terminal(conditions)
        and int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 1)
    ):
        writer = StatusWriter(context.api, meta["namespace"], meta["name"], context.backend.masker)
        await writer.catch_up()
