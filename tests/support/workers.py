"""One replica's ``RunWorker`` inside the test process, for tests that drive its waits directly.

The operator's context around it is the least a worker needs: no registered agents, no limit on
active runs, fresh metrics. What the test controls is the API client (a counting one, or one that
must not be asked), the store and the watch (``News``), which the test delivers events to.
"""

from __future__ import annotations

import logging
from typing import Any

from agentrun._backend import Backend
from agentrun.operator._agent_resolver import AgentResolver
from agentrun.operator._config import OperatorConfig
from agentrun.operator._context import OperatorContext
from agentrun.operator._decision_authentication import DecisionAuthentication
from agentrun.operator._heartbeat import Heartbeat
from agentrun.operator._kubeapi import KubeApi
from agentrun.operator._metrics import Metrics
from agentrun.operator._news import News
from agentrun.operator._peers import Peers
from agentrun.operator._quota_book import QuotaBook
from agentrun.operator._worker import RunWorker


def lone_worker(
    backend: Backend, api: KubeApi, body: dict[str, Any], news: News, *, poll: float
) -> RunWorker:
    """The worker replica ``replica-b`` would start for ``body``, polling every ``poll`` s."""
    config = OperatorConfig(
        store_url=backend.url, worker_id="replica-b", metrics_port=0, poll_interval=poll
    )
    context = OperatorContext(
        config=config,
        backend=backend,
        api=api,
        metrics=Metrics(),
        agents={},
        resolver=AgentResolver(api, {}),
        peers=Peers(config.worker_id),
        heartbeat=Heartbeat(backend.leases, config.worker_id),
        quotas=QuotaBook(api.list_quotas),
        decisions=DecisionAuthentication(api, accept_unauthenticated=False),
    )
    return RunWorker(context, body, lambda: False, logging.getLogger("test"), news)
