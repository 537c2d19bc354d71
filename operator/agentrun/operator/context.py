"""What every handler of one operator process shares: config, stores, API, metrics, agents
(those in the image, and the resolver that also finds Agent resources), the watch's news and the
replicas it shows."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrun.backend import Backend
from agentrun.operator.agent_resolver import AgentResolver
from agentrun.operator.config import OperatorConfig
from agentrun.operator.kubeapi import KubeApi
from agentrun.operator.metrics import Metrics
from agentrun.operator.news import Newsroom
from agentrun.operator.peers import Peers
from agentrun.operator.slots import RunSlots
from agentrun.runner.registry import RegisteredAgent

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
    slots: RunSlots
    peers: Peers
    newsroom: Newsroom = field(default_factory=Newsroom)
