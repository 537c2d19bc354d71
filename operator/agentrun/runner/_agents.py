"""An agent definition and the revision that pins it.

``revision`` is a digest of everything that shapes the run's behaviour: instructions, model, each
tool's schema, hints and declared version, and any other settings the agent declares (a declared
agent's provider, endpoint and sampling settings). A checkpoint pins it, and a resume under another
revision is refused: resuming into a changed agent is a different run wearing the first one's
identity, and an audit record that names a revision the run did not use is one that lies.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import cached_property

from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun.runner._tools import Tool


@dataclass(frozen=True)
class AgentDefinition:
    """An agent: its instructions, model and tools. Its ``revision`` (a digest of all of them)
    pins every checkpoint, so a run never resumes into a changed agent."""

    name: str
    instructions: str
    model: str
    tools: tuple[Tool, ...] = ()
    max_iterations: int = 25
    settings: dict[str, JsonValue] = field(default_factory=dict)
    """Whatever else shapes the behaviour; part of the revision when there is any."""
    _by_name: dict[str, Tool] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            raise ConfigurationError("agent name is empty; give the agent a name")
        by_name: dict[str, Tool] = {}
        for each in self.tools:
            if each.name in by_name:
                raise ConfigurationError(f"agent {self.name!r} has two tools named {each.name!r}")
            by_name[each.name] = each
        object.__setattr__(self, "_by_name", by_name)

    @cached_property
    def revision(self) -> str:
        shaping: dict[str, JsonValue] = {
            "name": self.name,
            "instructions": self.instructions,
            "model": self.model,
            "max_iterations": self.max_iterations,
            "tools": [each.definition() for each in self.tools],
        }
        if self.settings:  # only then, so the revisions of agents without any stay as they were
            shaping["settings"] = self.settings
        body = json.dumps(
            shaping,
            sort_keys=True,
            separators=(",", ":"),
        )
        return "rev-" + hashlib.sha256(body.encode()).hexdigest()[:16]

    def tool(self, name: str) -> Tool | None:
        return self._by_name.get(name)
