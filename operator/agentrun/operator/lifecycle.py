"""Operator start-up and shut-down: settings, the stores, the API client, metrics, agents."""

from __future__ import annotations

import logging
from typing import Any

import kopf

from agentrun.errors import ConfigurationError
from agentrun.operator.config import OperatorConfig
from agentrun.operator.context import OperatorContext
from agentrun.operator.kubeapi import KubeApi
from agentrun.operator.metrics import Metrics
from agentrun.runner.registry import registered_agents
from agentrun.stores import open_backend


async def start(
    settings: kopf.OperatorSettings, memo: Any, logger: logging.Logger | logging.LoggerAdapter[Any]
) -> None:
    config = OperatorConfig.from_environment()
    # kopf's own bookkeeping goes under our prefix, and it posts only errors as events: the
    # events a person reads are the ones this operator posts on purpose.
    settings.persistence.finalizer = "agentrun.dev/daemon"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="agentrun.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="agentrun.dev", key="last-handled-configuration"
    )
    settings.posting.level = logging.ERROR
    try:
        backend = await open_backend(config.store_url)
    except ConfigurationError as error:
        # No retry can help (a store that may evict keys, a malformed URL): a person has to
        # change it, so the operator exits saying what, rather than retrying every minute.
        raise kopf.PermanentError(str(error)) from error
    metrics = Metrics()
    metrics.serve(config.metrics_port)
    agents = registered_agents()
    memo.context = OperatorContext(
        config=config, backend=backend, api=KubeApi(), metrics=metrics, agents=agents
    )
    logger.info(
        "worker %s ready with agents %s on %s",
        config.worker_id,
        ", ".join(f"{n} ({a.definition.revision})" for n, a in sorted(agents.items())),
        backend.url,
    )


async def stop(memo: Any) -> None:
    context: OperatorContext | None = getattr(memo, "context", None)
    if context is not None:
        await context.backend.close()
        context.api.close()
