"""Every kopf registration of the operator, in one place; the work is in the modules named.

* ``_worker`` — a daemon per AgentRun that is not finished: the replicas are the worker pool.
* ``_observer`` — every watch event: the runs gauge, forgetting a deleted run under its lease,
  a finished run's ``observedGeneration``.
* ``_lifecycle`` — start-up and shut-down.
* ``_agent_probe`` — a timer per Agent that probes its endpoints and writes its status.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

import kopf

from agentrun._compat.kopf import decode_with, require_no_finalizer
from agentrun.operator import _events as events
from agentrun.operator import _stopping as stopping
from agentrun.operator._agent_probe import TICK, due, newly_invalid, probe
from agentrun.operator._agent_resource import AGENT_PLURAL
from agentrun.operator._claims import ours
from agentrun.operator._conditions import is_terminal
from agentrun.operator._lifecycle import start, stop
from agentrun.operator._nesting import loads
from agentrun.operator._observer import observe
from agentrun.operator._resource import GROUP, PLURAL, VERSION
from agentrun.operator._worker import Faulted, RunWorker

Logger = logging.Logger | logging.LoggerAdapter[Any]

RETRY_AFTER = 5.0
"""Seconds before a timer that failed (the API server away, say) ticks again, or a daemon that
failed outside its worker starts again. A run's worker retries what can pass itself, with a
growing wait, and stops for good on the rest (``worker``, ``retrying``)."""

GRACE = 20.0
"""Seconds a stopping daemon gets to reach its next step and hand its lease back: kopf sets
``stopped`` and waits this long (``cancellation_backoff``) before it cancels the daemon. The run
checks ``stopped`` before each model call and each dispatch, so a tool call in flight completes
and its outcome is recorded (cancelling it would leave a keyless call undecidable). Together with
``CANCELLED_GRACE`` it stays under the chart's ``terminationGracePeriodSeconds`` (30 s)."""

CANCELLED_GRACE = 5.0
"""Seconds a daemon still running after ``GRACE`` gets, once cancelled, to release its lease."""


def _to_run(
    body: kopf.Body, status: Mapping[str, Any], meta: Mapping[str, Any], memo: Any, **_: Any
) -> bool:
    """A daemon for a run that is not finished and not being deleted. Once it is being deleted,
    kopf stops the daemon (giving it ``GRACE``): our finalizer keeps the object until the run is
    forgotten, and a forget takes the run's lease, so nothing is forgotten before the daemon has
    let the lease go. None for a run another install claimed (``claims``)."""
    return (
        not meta.get("deletionTimestamp")
        and not is_terminal(status.get("conditions") or [])
        and ours(body, memo.context.config.controller_name)
    )


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


@kopf.daemon(
    GROUP,
    VERSION,
    PLURAL,
    when=_to_run,
    cancellation_backoff=GRACE,
    cancellation_timeout=CANCELLED_GRACE,
    backoff=RETRY_AFTER,
)
async def run_agent(
    *, body: kopf.Body, memo: Any, stopped: kopf.DaemonStopped, logger: Logger, **_: Any
) -> None:
    context = memo.context
    with context.newsroom.following(body["metadata"]["uid"]) as news:
        try:
            await RunWorker(context, body, lambda: told_to_stop(stopped), logger, news).work()
        except Faulted as fault:  # shown on the run; started again, it would only meet it again
            raise kopf.PermanentError(str(fault)) from fault


def keep_no_kopf_finalizer(spawned: Callable[..., Any]) -> None:
    """kopf puts a finalizer of its own on every object one of its daemons or timers runs for,
    to stop it before the object goes; the decorators offer no way out of it. This operator
    needs none, and one outliving its operator blocks deletions for good:

    * A run: ours (``finalizers``) keeps the object from the run's first store access until it
      is forgotten, and before that a run deleted is gone at once and its worker stops at the
      ``DELETED`` event (``news``). kopf's own cost ten requests a run in
      ``make bench-operator`` (two replicas racing to add it, then to remove it, mostly with a
      stale ``resourceVersion``).
    * An Agent: its probe only reads endpoints and patches the Agent's status, which a deleted
      Agent no longer has. With kopf's finalizer, every Agent left when an install is
      uninstalled (or when the second of two installs goes) could never be deleted, nor its
      namespace, until someone removed the finalizer by hand.

    So the handler is registered as requiring none; objects an earlier release gave the
    finalizer lose it at their next event, as kopf drops a finalizer nothing requires. kopf
    offers no public way to do it (``agentrun._compat.kopf``)."""
    require_no_finalizer(kopf.get_default_registry(), spawned)


keep_no_kopf_finalizer(run_agent)


def told_to_stop(stopped: kopf.DaemonStopped) -> bool:
    """The daemon's ``stopped``, or a stop signal already heard (``_stopping``): kopf sets
    ``stopped`` only once its shut-down has reached the daemon, and a run that went by its
    ``stopped`` alone began calls after the signal meanwhile."""
    return bool(stopped) or stopping.heard() is not None


@kopf.on.event(GROUP, VERSION, PLURAL)
async def seen(*, event: kopf.RawEvent, body: kopf.Body, memo: Any, **_: Any) -> None:
    await observe(memo.context, memo.forgetting, str(event.get("type")), body)


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
