"""Every kopf registration of the operator, in one place; the work is in the modules named.

* ``_observer`` — every watch event of an AgentRun: the scheduler's decision whether the run
  has work for a worker of this replica (``_scheduler``, ``_worker``; a run that waits has
  none), the runs gauge, forgetting a deleted run under its lease, a finished run's
  ``observedGeneration``.
* ``_agent_book`` — every watch event of an Agent: the resolver reads Agents from it, and the
  runs waiting on one are woken when it changes.
* ``_quota_book`` — every watch event of a RunQuota: runs take their places under it
  (``_admission``), and its namespace's queued runs are looked at when it changes
  (``_quota_queue``).
* ``_lifecycle`` — start-up and shut-down.
* ``_agent_probe`` — a timer per Agent that probes its endpoints and writes its status.

kopf runs no daemon per run: a daemon, and the polls it made, cost every replica CPU and
requests for every unfinished run, the waiting ones included.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import kopf

from agentrun._compat.kopf import decode_with, require_no_finalizer
from agentrun.operator import _events as events
from agentrun.operator import _stopping as stopping
from agentrun.operator._agent_probe import TICK, due, newly_invalid, probe
from agentrun.operator._agent_resource import AGENT_PLURAL
from agentrun.operator._lifecycle import start, stop
from agentrun.operator._nesting import loads
from agentrun.operator._observer import observe
from agentrun.operator._quota_resource import QUOTA_PLURAL
from agentrun.operator._resource import GROUP, PLURAL, VERSION

Logger = logging.Logger | logging.LoggerAdapter[Any]

RETRY_AFTER = 5.0
"""Seconds before a timer that failed (the API server away, say) ticks again."""


# One object nested too deep must not end the watch that lists it, nor the replica (``nesting``).
decode_with(loads)


@kopf.on.startup()
async def startup(*, settings: kopf.OperatorSettings, memo: Any, logger: Logger, **_: Any) -> None:
    if (heard := stopping.heard()) is not None:
        # Told to stop before kopf listened (``stopping``): a start-up cancelled is kopf's own
        # way out of a start, and it stops the operator before any run is taken.
        logger.warning("%s came while starting: stopping before taking any run", heard.name)
        raise asyncio.CancelledError
    await start(settings, memo, logger)


@kopf.on.cleanup()
async def cleanup(*, memo: Any, **_: Any) -> None:
    await stop(memo)


def keep_no_kopf_finalizer(spawned: Callable[..., Any]) -> None:
    """kopf puts a finalizer of its own on every object one of its daemons or timers runs for,
    to stop it before the object goes; the decorators offer no way out of it. This operator
    needs none, and one outliving its operator blocks deletions for good: an Agent's probe only
    reads endpoints and patches the Agent's status, which a deleted Agent no longer has. With
    kopf's finalizer, every Agent left when an install is uninstalled (or when the second of
    two installs goes) could never be deleted, nor its namespace, until someone removed the
    finalizer by hand. (Runs have no kopf daemon any more; ours, ``finalizers``, keeps a run
    from its first store access until it is forgotten.)

    So the handler is registered as requiring none; objects an earlier release gave the
    finalizer lose it at their next event, as kopf drops a finalizer nothing requires. kopf
    offers no public way to do it (``agentrun._compat.kopf``)."""
    require_no_finalizer(kopf.get_default_registry(), spawned)


@kopf.on.event(GROUP, VERSION, PLURAL)
async def seen(*, event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    await observe(memo.context, memo.forgetting, memo.scheduler, str(event.get("type")), body)


@kopf.on.event(GROUP, VERSION, AGENT_PLURAL)
async def agent_seen(*, event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    memo.context.resolver.book.seen(str(event.get("type")), body)


@kopf.on.event(GROUP, VERSION, QUOTA_PLURAL)
async def quota_seen(*, event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    kind, meta = str(event.get("type")), body["metadata"]
    memo.context.quotas.seen(kind, body)
    memo.context.metrics.quota_is(
        str(meta["namespace"]), str(meta["name"]), None if kind == "DELETED" else body
    )


@kopf.timer(GROUP, VERSION, AGENT_PLURAL, interval=TICK, backoff=RETRY_AFTER)
async def probe_agent(*, body: kopf.Body, memo: Any, patch: kopf.Patch, **_: Any) -> None:
    # Decided here at each tick, not by a ``when`` filter: kopf evaluates those only when the
    # object changes, so a timer filtered out after a probe would never tick again.
    if due(body):
        context = memo.context
        status = await probe(context.api, context.resolver.connections, body)
        # What an endpoint answered (an error body may echo a header) goes through the one
        # masking path like every other status write; the revision is a digest, kept as it is.
        masker = context.backend.masker
        patch.status.update(
            {k: v if k == "revision" else masker.json(v) for k, v in status.items()}
        )
        if (invalid := newly_invalid(body, status)) is not None:
            events.notice(masker, body, "InvalidSpec", invalid, warning=True)


keep_no_kopf_finalizer(probe_agent)
