"""Tools: async Python functions with a schema taken from their signature.

A tool says three things the kit needs to keep a run from repeating a side effect:

* ``key_arguments`` — which arguments identify the effect (a booking is the same booking when the
  flight and passenger are the same). The call's idempotency key is derived from them, and a
  tool that accepts an ``idempotency_key`` parameter is handed it, so a remote service can
  deduplicate on its side too. A tool that names none is tracked by a per-call dispatch marker.
* ``read_only`` / ``idempotent`` — the MCP hints. Either makes the call safe to repeat: it is
  dispatched again on resume instead of being refused as indeterminate.
* ``requires_approval`` — the run checkpoints ``before_approval`` and stops until a person decides.

A tool that raises ``ToolError`` answered (the answer is recorded and shown to the model). Any
other exception means nobody knows whether the effect happened: the claim is left in flight, the
live run fails, and a resume reports the call as indeterminate.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError, create_model

from agentrun.errors import AgentRunError, ConfigurationError

ToolFunction = Callable[..., Awaitable[Any]]
KEY_PARAMETER = "idempotency_key"


class ToolError(AgentRunError):
    """A tool's deliberate refusal: it did not act, and says why (told to the model)."""


class ToolArgumentsError(AgentRunError):
    """The model's arguments do not fit the tool's signature; nothing was dispatched."""


def _arguments_model(name: str, fn: ToolFunction) -> type[BaseModel]:
    hints = get_type_hints(fn)
    fields: dict[str, Any] = {}
    for parameter in inspect.signature(fn).parameters.values():
        if parameter.name == KEY_PARAMETER:
            continue
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise ConfigurationError(
                f"tool {name!r}: *args/**kwargs cannot be described to a model"
            )
        annotation = hints.get(parameter.name, Any)
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[parameter.name] = (annotation, default)
    return create_model(f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


@dataclass(frozen=True)
class Tool:
    """An async function the model may call, with what the kit needs to never repeat its effect:
    its key arguments, whether it is safe to repeat, whether it needs a person's approval."""

    name: str
    fn: ToolFunction = field(repr=False)
    description: str = ""
    key_arguments: tuple[str, ...] = ()
    read_only: bool = False
    idempotent: bool = False
    requires_approval: bool = False
    version: str = "1"
    arguments: type[BaseModel] = field(init=False, repr=False, compare=False)
    wants_key: bool = field(init=False, repr=False, compare=False)
    """Whether ``fn`` takes the idempotency key (``KEY_PARAMETER``); read once, not per call."""

    def __post_init__(self) -> None:
        if not inspect.iscoroutinefunction(self.fn):
            raise ConfigurationError(f"tool {self.name!r} must be an async function")
        model = _arguments_model(self.name, self.fn)
        unknown = set(self.key_arguments) - set(model.model_fields)
        if unknown:
            raise ConfigurationError(
                f"tool {self.name!r}: key_arguments {sorted(unknown)} are not parameters of "
                f"{self.fn.__name__}; name parameters it takes"
            )
        object.__setattr__(self, "arguments", model)
        object.__setattr__(
            self, "wants_key", KEY_PARAMETER in inspect.signature(self.fn).parameters
        )

    @property
    def safe_to_repeat(self) -> bool:
        return self.read_only or self.idempotent

    def schema(self) -> dict[str, JsonValue]:
        """What a provider shows the model: name, description, JSON schema of the arguments."""
        parameters: dict[str, JsonValue] = self.arguments.model_json_schema()
        parameters.pop("title", None)
        return {"name": self.name, "description": self.description, "parameters": parameters}

    def definition(self) -> dict[str, JsonValue]:
        """Everything about the tool that shapes a run's behaviour (for the agent revision)."""
        return {
            **self.schema(),
            "key_arguments": list(self.key_arguments),
            "read_only": self.read_only,
            "idempotent": self.idempotent,
            "requires_approval": self.requires_approval,
            "version": self.version,
        }

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        try:
            return dict(self.arguments.model_validate(dict(arguments)))
        except ValidationError as exc:
            raise ToolArgumentsError(f"arguments for {self.name} do not fit: {exc}") from exc

    async def invoke(self, arguments: Mapping[str, JsonValue], *, key: str | None) -> str:
        """Run the tool; the result as text (JSON unless the tool returned a string)."""
        values = self.validate(arguments)
        if self.wants_key:
            values[KEY_PARAMETER] = key
        result = await self.fn(**values)
        return result if isinstance(result, str) else json.dumps(result, sort_keys=True)


def tool(
    *,
    key_arguments: tuple[str, ...] = (),
    read_only: bool = False,
    idempotent: bool = False,
    requires_approval: bool = False,
    name: str | None = None,
    version: str = "1",
) -> Callable[[ToolFunction], Tool]:
    """Declare an async function as a tool; its docstring is the description."""

    def wrap(fn: ToolFunction) -> Tool:
        return Tool(
            name=name or fn.__name__,
            fn=fn,
            description=inspect.getdoc(fn) or "",
            key_arguments=key_arguments,
            read_only=read_only,
            idempotent=idempotent,
            requires_approval=requires_approval,
            version=version,
        )

    return wrap
