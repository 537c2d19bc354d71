"""Every kopf registration of the operator, in one place; the work is in the modules named.

* ``worker`` — a daemon per AgentRun that is not finished: the replicas are the worker pool.
* ``forget`` — deleting an AgentRun forgets what the stores keep for it.
* ``lifecycle`` — start-up and shut-down.
* ``agent_probe`` — a timer per Agent that probes its endpoints and writes its status.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import kopf

from agentrun.operator.agent_probe import TICK, due, probe
from agentrun.operator.agent_resource import AGENT_PLURAL
from agentrun.operator.conditions import is_terminal
from agentrun.operator.forget import forget_run
from agentrun.operator.lifecycle import start, stop
from agentrun.operator.resource import GROUP, PLURAL, VERSION
from agentrun.operator.worker import RunWorker

Logger = logging.Logger | logging.LoggerAdapter[Any]

RETRY_AFTER = 5.0
"""Seconds before a daemon that failed unexpectedly (the API server away, say) starts again."""

GRACE = 25.0
"""Seconds a stopping daemon gets to reach its next step and hand its lease back."""


def _not_finished(status: Mapping[str, Any], **_: Any) -> bool:
    return not is_terminal(status.get("conditions") or [])


@kopf.on.startup()
async def startup(*, settings: kopf.OperatorSettings, memo: Any, logger: Logger, **_: Any) -> None:
    await start(settings, memo, logger)


@kopf.on.cleanup()
async def cleanup(*, memo: Any, **_: Any) -> None:
    await stop(memo)


@kopf.daemon(
    GROUP, VERSION, PLURAL, when=_not_finished, cancellation_timeout=GRACE, backoff=RETRY_AFTER
)
async def run_agent(
    *, body: kopf.Body, memo: Any, stopped: kopf.DaemonStopped, logger: Logger, **_: Any
) -> None:
    await RunWorker(memo.context, body, lambda: bool(stopped), logger).work()


@kopf.on.event(GROUP, VERSION, PLURAL)
async def forget(*, body: kopf.Body, memo: Any, **_: Any) -> None:
    await forget_run(memo.context, body)


@kopf.timer(GROUP, VERSION, AGENT_PLURAL, interval=TICK, backoff=RETRY_AFTER)
async def probe_agent(*, body: kopf.Body, memo: Any, patch: kopf.Patch, **_: Any) -> None:
    # Decided here at each tick, not by a ``when`` filter: kopf evaluates those only when the
    # object changes, so a timer filtered out after a probe would never tick again.
    if due(body):
        context = memo.context
        patch.status.update(await probe(context.api, context.resolver.connections, body))
