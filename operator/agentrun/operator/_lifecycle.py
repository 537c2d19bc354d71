"""Operator start-up and shut-down: settings, the stores, the API client, metrics, agents, and
the OTLP export of spans when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set (the chart's ``tracing``).

Everything the operator writes for people is masked with the backend's ``Masker``: the status
writers and the events' poster take it from the backend (``context.backend.masker``), and the
log's filters (``LogMasking``) are installed here, before the first run is picked up, and removed
at shut-down.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterable
from typing import Any

import kopf

from agentrun._compat.kopf import changing_handlers, spawning_handlers
from agentrun._errors import ConfigurationError
from agentrun._redaction import Masker, MaskingFilter
from agentrun.operator import _stopping as stopping
from agentrun.operator._agent_book import AgentBook
from agentrun.operator._agent_resolver import AgentResolver
from agentrun.operator._config import DEFAULT_CONTROLLER, OperatorConfig
from agentrun.operator._context import OperatorContext
from agentrun.operator._decision_authentication import DecisionAuthentication
from agentrun.operator._forget import Forgetting
from agentrun.operator._heartbeat import Heartbeat
from agentrun.operator._kubeapi import KubeApi
from agentrun.operator._metrics import Metrics
from agentrun.operator._metrics_server import serve as serve_metrics
from agentrun.operator._metrics_tls import server_context
from agentrun.operator._peers import Peers
from agentrun.operator._quota_book import QuotaBook
from agentrun.operator._scheduler import Scheduler
from agentrun.operator._scrape_reviews import ScrapeReviews
from agentrun.runner._connections import Connections
from agentrun.runner._registry import registered_agents
from agentrun.runner._tracing import export_if_configured
from agentrun.stores import open_backend

INSTANT_EXIT = 0.5
"""Seconds kopf waits for a daemon it stopped before it patches the object to look again."""


MASKED_LOGGERS = ("agentrun", "kopf")
"""The packages whose loggers' records are masked: the kit's (a tool's output quoted by the
runner, a store's error) and kopf's (the per-run lines of ``kopf.objects``, which kopf also posts
as events, and a handler's failure with its traceback)."""


class LogMasking:
    """Masks the operator's log, in two places, both installed at start-up and removed by
    ``stop`` (whoever starts the operator owns them):

    * On the loggers of ``MASKED_LOGGERS`` loaded at start-up (each module logs through its own,
      named after it, and the operator has imported them all by then), where their records are
      made: a logger's filters see each of its records before any handler, so a handler added
      after start-up (an OTLP log exporter, a test's capture) writes masked lines too. A
      logger's filters do not see its children's records, hence one filter per logger.
    * On the root's handlers present at start-up (kopf's logging set-up), for every other
      logger's records, a tool's own above all. The filter rewrites the record itself, so a
      root handler added later, called after those, writes it masked as well; only a handler
      added later on another package's logger sees that package's records as they were made.
    """

    def __init__(self, masker: Masker) -> None:
        self.filter = MaskingFilter(masker)
        self.loggers = [
            logging.getLogger(name)
            for name in sorted(sys.modules)
            if name in MASKED_LOGGERS or name.startswith(tuple(f"{p}." for p in MASKED_LOGGERS))
        ]
        self.loggers.append(logging.getLogger("kopf.objects"))  # no module of that name
        self.handlers = list(logging.getLogger().handlers)

    def install(self) -> None:
        for each in (*self.loggers, *self.handlers):
            each.addFilter(self.filter)

    def remove(self) -> None:
        for each in (*self.loggers, *self.handlers):
            each.removeFilter(self.filter)


class NoDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base ("essence": the spec, labels and annotations it compares events by),
    kept empty. kopf builds it at every watch event of every object, in both replicas, to find
    what changed for its on-create/update/delete handlers, and to restart the idle countdown of
    daemons and timers with an ``idle``: this operator registers neither (``refuse_diff_users``
    holds it to that), so the essence was work for nothing, a twentieth of a replica's CPU at
    1,000 runs even built from only the parts it keeps. An empty essence, stored nowhere, makes
    every event's diff empty."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return kopf.BodyEssence()


def refuse_diff_users(registry: kopf.OperatorRegistry) -> None:
    """``NoDiffBase`` is right only while nothing of kopf's reads a diff: no on-create, update,
    resume, delete or field handler, and no daemon or timer with an ``idle``. Raises naming the
    first handler that would, so adding one fails at start-up rather than never firing.

    kopf has no public listing of a registry's handlers (``agentrun._compat.kopf``)."""
    changing = changing_handlers(registry)
    idling = [h for h in spawning_handlers(registry) if getattr(h, "idle", None) is not None]
    for handler in (*changing, *idling):
        raise kopf.PermanentError(
            f"kopf handler {handler.id} needs a diff base, which NoDiffBase keeps empty: "
            "install kopf.AnnotationsDiffBaseStorage in lifecycle.start instead"
        )


def daemon_finalizer(controller: str) -> str:
    """kopf's finalizer name for this install, one per controller name: two installs would
    otherwise take turns adding and removing it. No handler requires it any more
    (``_main.keep_no_kopf_finalizer``); it is still set so that kopf drops it from the runs and
    Agents earlier releases gave it to, at their next event. The default install keeps the name
    every earlier release used."""
    return "agentrun.dev/daemon" if controller == DEFAULT_CONTROLLER else f"{controller}-daemon"


async def raise_a_pending_stop() -> None:
    """Stop here, at the end of start-up, if the operator was told to stop while it started.

    Two ways a stop can come then and be missed:

    * kopf stops an operator told to stop while it starts (a SIGTERM once it listens) by
      cancelling the start-up activity. A cancellation is delivered only where a coroutine
      awaits, and start-up spends seconds in code that does not (importing the agents, below the
      store's opening): one that came then was delivered after the activity had counted as done,
      where kopf does not take it for a stop, and the replica finished starting and ran on. The
      request stays counted on the task (``Task.cancelling``), so it is raised here.
    * kopf starts listening only once start-up has run its first step, up to its first await
      (it creates the activity's task, lets it run once, then installs its signal handlers): a
      SIGTERM in that step, after ``startup`` asked ``_stopping.heard``, reached only
      ``_stopping``'s handler and kopf never heard of it; the replica took a run and stayed up
      until killed (``tests/kube/test_operator_start_stop.py``, under load). The ``sleep(0)``
      below lets kopf's own installing step run first, so from here on kopf hears every signal,
      and ``heard`` tells of any that came before.

    From here on ``_stopping`` hears every signal too, at once, ahead of kopf (``keep_listening``):
    a run's stop check sees it before kopf has got round to setting its daemon's ``stopped``.
    """
    await asyncio.sleep(0)
    stopping.keep_listening()
    task = asyncio.current_task()
    if stopping.heard() is not None or (task is not None and task.cancelling()):
        raise asyncio.CancelledError


async def start(
    settings: kopf.OperatorSettings, memo: Any, logger: logging.Logger | logging.LoggerAdapter[Any]
) -> None:
    config = OperatorConfig.from_environment()
    # kopf's own bookkeeping goes under our prefix, and it posts only errors as events: the
    # events a person reads are the ones this operator posts on purpose.
    settings.persistence.finalizer = daemon_finalizer(config.controller_name)
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="agentrun.dev")
    refuse_diff_users(kopf.get_default_registry())
    settings.persistence.diffbase_storage = NoDiffBase(
        prefix="agentrun.dev", key="last-handled-configuration"
    )
    settings.posting.level = logging.ERROR
    # A run's daemon that stops within this time of kopf telling it to (a finished run's: the
    # watch's news wakes it) spares kopf an annotation patch to look again 20 s later.
    settings.background.instant_exit_timeout = INSTANT_EXIT
    # Events say which install posted them (``From:`` in ``kubectl describe``) and which replica.
    settings.posting.reporting_component = config.controller_name
    settings.posting.reporting_instance = config.worker_id
    try:
        export_if_configured()
        backend = await open_backend(config.store_url)
    except ConfigurationError as error:
        # No retry can help (a store that may evict keys, a malformed URL): a person has to
        # change it, so the operator exits saying what, rather than retrying every minute.
        raise kopf.PermanentError(str(error)) from error
    memo.log_masking = LogMasking(backend.masker)
    memo.log_masking.install()
    metrics = Metrics()
    agents = registered_agents()
    api = KubeApi(metrics=metrics, threads=config.kube_threads)
    if config.metrics_secure:
        serve_metrics(
            config.metrics_port,
            metrics.registry,
            ScrapeReviews(api.api_client),
            server_context(config.metrics_cert_dir),
        )
    else:
        serve_metrics(config.metrics_port, metrics.registry)
    memo.context = OperatorContext(
        config=config,
        backend=backend,
        api=api,
        metrics=metrics,
        agents=agents,
        resolver=AgentResolver(
            api,
            agents,
            Connections(policy=config.egress),
            secret_max_age=config.secret_max_age,
            book=AgentBook(api.get_agent),
        ),
        peers=Peers(config.worker_id),
        heartbeat=Heartbeat(backend.leases, config.worker_id),
        quotas=QuotaBook(api.list_quotas),
        decisions=DecisionAuthentication(
            api, accept_unauthenticated=config.accept_unauthenticated_decisions
        ),
    )
    memo.forgetting = Forgetting()
    memo.scheduler = Scheduler(memo.context)
    memo.context.resolver.book.changed = memo.scheduler.agent_changed
    memo.context.quotas.changed = memo.scheduler.quota_queue.poke
    await raise_a_pending_stop()
    memo.context.heartbeat.start()
    memo.scheduler.start()
    logger.info(
        "worker %s of %s ready with agents %s on %s",
        config.worker_id,
        config.controller_name,
        ", ".join(f"{n} ({a.definition.revision})" for n, a in sorted(agents.items())),
        backend.url,
    )


async def stop(memo: Any) -> None:
    """Hand the runs at work back (``Scheduler.stop``), then this replica's heartbeat, so that
    the other replicas take the runs at once, then close what start opened."""
    scheduler: Scheduler | None = getattr(memo, "scheduler", None)
    if scheduler is not None:
        await scheduler.stop()
    context: OperatorContext | None = getattr(memo, "context", None)
    if context is not None:
        await context.heartbeat.stop()
    log_masking: LogMasking | None = getattr(memo, "log_masking", None)
    if log_masking is not None:
        log_masking.remove()
    forgetting: Forgetting | None = getattr(memo, "forgetting", None)
    if forgetting is not None:
        await forgetting.close()
    if context is not None:
        await context.backend.close()
        await context.resolver.aclose()
        context.api.close()
