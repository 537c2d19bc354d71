"""Agents registered in the image, found through the ``agentrun.agents`` entry-point group.

A deployment extends the image with a package that registers its agents; the CLI and the
operator find them by name. Each entry point names a ``RegisteredAgent``: the definition (whose
revision pins checkpoints) and the provider it talks to. ``AGENTRUN_AGENT_MODULES`` (a
comma-separated list of importable modules) adds every ``RegisteredAgent`` those modules define
at top level, for agents that are not packaged yet.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import entry_points

from agentrun._errors import ConfigurationError
from agentrun._outcomes import Outcome
from agentrun._redaction import SecretValues
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._pricing import DEFAULT_PRICES, PriceTable
from agentrun.runner._providers.base import Provider

GROUP = "agentrun.agents"


@dataclass(frozen=True)
class RegisteredAgent:
    """An agent as an image registers it: its definition, the provider it talks to, its prices,
    and the values of the secrets its requests read, which its runs mask wherever they appear
    (a declared agent's: ``DeclaredAgent``; an agent of the image reads its own keys, and may
    add them here)."""

    definition: AgentDefinition
    provider: Callable[[], Provider]
    prices: PriceTable = DEFAULT_PRICES
    secrets: SecretValues = field(default_factory=SecretValues, compare=False)


MODULES_VARIABLE = "AGENTRUN_AGENT_MODULES"


def _from_modules() -> dict[str, RegisteredAgent]:
    agents: dict[str, RegisteredAgent] = {}
    for name in filter(None, (m.strip() for m in os.environ.get(MODULES_VARIABLE, "").split(","))):
        try:
            module = importlib.import_module(name)
        except ImportError as error:
            raise ConfigurationError(
                f"{MODULES_VARIABLE} names module {name!r}, which cannot be imported: {error}"
            ) from error
        for value in vars(module).values():
            if isinstance(value, RegisteredAgent):
                agents[value.definition.name] = value
    return agents


def registered_agents() -> dict[str, RegisteredAgent]:
    agents: dict[str, RegisteredAgent] = {}
    for point in entry_points(group=GROUP):
        loaded = point.load()
        if not isinstance(loaded, RegisteredAgent):
            raise ConfigurationError(
                f"entry point {point.name!r} ({point.value}) in group {GROUP!r} is a "
                f"{type(loaded).__name__}, not a RegisteredAgent"
            )
        agents[point.name] = loaded
    agents.update(_from_modules())
    return agents


class AgentNotRegisteredError(ConfigurationError):
    """No agent of that name is registered in this installation."""

    outcome = Outcome.AGENT_NOT_REGISTERED

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        listed = ", ".join(sorted(known)) or "none"
        super().__init__(
            f"no agent named {name!r} is registered (known: {listed}); register it under the "
            f"{GROUP!r} entry-point group of a package installed in this image"
        )


def load_agent(name: str) -> RegisteredAgent:
    agents = registered_agents()
    if name not in agents:
        raise AgentNotRegisteredError(name, agents)
    return agents[name]
