"""What every handler of one operator process shares: config, stores, API, metrics, agents
(those in the image, and the resolver that also finds Agent resources), the replicas the watch
shows and whether they still beat, the namespaces' RunQuotas, and what the API server says of
people's decisions."""

from __future__ import annotations

from dataclasses import dataclass

from agentrun._backend import Backend
from agentrun.operator._agent_resolver import AgentResolver
from agentrun.operator._config import OperatorConfig
from agentrun.operator._decision_authentication import DecisionAuthentication
from agentrun.operator._heartbeat import Heartbeat
from agentrun.operator._kubeapi import KubeApi
from agentrun.operator._metrics import Metrics
from agentrun.operator._peers import Peers
from agentrun.operator._quota_book import QuotaBook
from agentrun.runner._registry import RegisteredAgent

FINALIZER = "agentrun.dev/forget-run"
"""Held while the stores keep something for the run, so deleting it can forget that."""


@dataclass
class OperatorContext:
    config: OperatorConfig
    backend: Backend
    api: KubeApi
    metrics: Metrics
    agents: dict[str, RegisteredAgent]
    resolver: AgentResolver
    peers: Peers
    heartbeat: Heartbeat
    quotas: QuotaBook
    decisions: DecisionAuthentication
