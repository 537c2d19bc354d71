"""Tools: async Python functions with a schema taken from their signature, or declared apart
from it (``Tool.declared``: the JSON schema an MCP server lists or an HTTP tool's spec gives).

A tool says what the kit needs to keep a run from repeating a side effect, and to settle a call
a crash left undecided:

* ``key_arguments`` — which arguments identify the effect (a booking is the same booking when the
  flight and passenger are the same). The call's idempotency key is derived from them, and a
  tool that accepts an ``idempotency_key`` parameter is handed it, so a remote service can
  deduplicate on its side too. A tool that names none is tracked by a per-call dispatch marker.
* ``read_only`` / ``idempotent`` — the MCP hints. Either makes the call safe to repeat: it is
  dispatched again on resume instead of being refused as indeterminate.
* ``requires_approval`` — the run checkpoints ``before_approval`` and stops until a person decides.
* ``settle`` — how a machine may find out what became of a call a crash left undecided
  (``Replay`` or ``Probe``, ``agentrun.runner._settlement``), instead of a person.

A tool that raises ``ToolError`` answered (the answer is recorded and shown to the model). Any
other exception (``ToolTransportError`` from a remote tool) means nobody knows whether the effect
happened: the claim is left in flight, the live run fails, and a resume reports the call as
indeterminate.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, get_type_hints

from pydantic import ConfigDict, JsonValue, ValidationError, create_model

from agentrun._errors import AgentRunError, ConfigurationError
from agentrun._outcomes import Outcome
from agentrun.runner._settlement import Probe, Replay

ToolFunction = Callable[..., Awaitable[Any]]
KEY_PARAMETER = "idempotency_key"


class Disposition(StrEnum):
    """What repeating a tool's call would do, which decides what a resume does with it.

    ``read_only`` and ``idempotent`` calls are simply made again when a crash leaves one
    undecided; a ``side_effecting`` one is refused as indeterminate until a person answers.
    """

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    SIDE_EFFECTING = "side_effecting"


class ToolError(AgentRunError):
    """A tool's deliberate refusal: it did not act, and says why (told to the model)."""


class StillInFlightError(ToolError):
    """The service is still working on an earlier request with this idempotency key (HTTP 409):
    told to the model like any refusal; a replay that meets it waits ``retry_after`` seconds
    (None: the service did not say) and asks again."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ToolTransportError(AgentRunError):
    """A remote tool was sent the call and no answer came back (or a failure that does not say
    whether it acted): nobody knows whether the effect happened. A call that is safe to repeat
    is simply made again on resume (so this is retryable); for any other the loop reports the
    call indeterminate."""

    outcome = Outcome.TOOL_UNREACHABLE


class ToolArgumentsError(AgentRunError):
    """The model's arguments do not fit the tool's signature; nothing was dispatched."""


class Arguments(Protocol):
    """How a tool's arguments are described to a model, checked, and handed to its function.

    Declared in Python, they come from the function's signature (``SignatureArguments``); a
    tool whose arguments someone else declares (an MCP server's listing, an HTTP tool's spec)
    brings a JSON schema instead (``agentrun.runner._json_arguments``).
    """

    @property
    def names(self) -> frozenset[str]:
        """The arguments a call may carry (``key_arguments`` must be among them)."""
        ...

    def schema(self) -> dict[str, JsonValue]:
        """The JSON schema of the arguments, as the model is shown it."""
        ...

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        """The arguments, checked; ``ToolArgumentsError`` when they do not fit."""
        ...

    def bind(self, values: dict[str, Any], key: str | None) -> dict[str, Any]:
        """The keyword arguments the tool's function is called with."""
        ...


class SignatureArguments:
    """Arguments read from an async function's signature; ``idempotency_key``, when the
    function takes it, is the call's key and not an argument the model gives."""

    def __init__(self, name: str, fn: ToolFunction) -> None:
        self.name = name
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        signature = inspect.signature(fn)
        for parameter in signature.parameters.values():
            if parameter.name == KEY_PARAMETER:
                continue
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise ConfigurationError(
                    f"tool {name!r}: *args/**kwargs cannot be described to a model"
                )
            annotation = hints.get(parameter.name, Any)
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[parameter.name] = (annotation, default)
        self.model = create_model(
            f"{name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        self.wants_key = KEY_PARAMETER in signature.parameters
        """Whether the function takes the idempotency key; read once, not per call."""
        self._schema: dict[str, JsonValue] = self.model.model_json_schema()
        """Built once: pydantic builds a model's JSON schema anew at every call, dearly for
        what it is, and a run shows the model its tools at every take."""
        self._schema.pop("title", None)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self.model.model_fields)

    def schema(self) -> dict[str, JsonValue]:
        return copy.deepcopy(self._schema)

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        try:
            return dict(self.model.model_validate(dict(arguments)))
        except ValidationError as exc:
            raise ToolArgumentsError(f"arguments for {self.name} do not fit: {exc}") from exc

    def bind(self, values: dict[str, Any], key: str | None) -> dict[str, Any]:
        return {**values, KEY_PARAMETER: key} if self.wants_key else values


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
    settle: Replay | Probe | None = None
    """How a machine may settle a call a crash left undecided; None: only a person can."""
    declared: Arguments | None = field(default=None, repr=False, compare=False)
    """Arguments declared apart from ``fn`` (a JSON schema); None: read from its signature."""
    arguments: Arguments = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not inspect.iscoroutinefunction(self.fn):
            raise ConfigurationError(f"tool {self.name!r} must be an async function")
        arguments = self.declared or SignatureArguments(self.name, self.fn)
        unknown = set(self.key_arguments) - arguments.names
        if unknown:
            raise ConfigurationError(
                f"tool {self.name!r}: key_arguments {sorted(unknown)} are not among its "
                f"arguments ({', '.join(sorted(arguments.names)) or 'none'}); name arguments it "
                "takes"
            )
        if isinstance(self.settle, Replay):
            wants_key = not isinstance(arguments, SignatureArguments) or arguments.wants_key
            if not self.key_arguments or not wants_key:
                raise ConfigurationError(
                    f"tool {self.name!r}: settle=Replay() sends the call again with the same "
                    "idempotency key, so the tool needs key_arguments and its function an "
                    "idempotency_key parameter (to pass on to the service); add them, or settle "
                    "with a Probe"
                )
        object.__setattr__(self, "arguments", arguments)

    @property
    def settlement(self) -> Replay | Probe | None:
        """How a call may be settled (its ``delay_seconds`` and ``attempts`` among it)."""
        return self.settle

    @property
    def safe_to_repeat(self) -> bool:
        return self.read_only or self.idempotent

    @property
    def disposition(self) -> Disposition:
        if self.read_only:
            return Disposition.READ_ONLY
        if self.idempotent:
            return Disposition.IDEMPOTENT
        return Disposition.SIDE_EFFECTING

    def schema(self) -> dict[str, JsonValue]:
        """What a provider shows the model: name, description, JSON schema of the arguments."""
        return {
            "name": self.name,
            "description": self.description,
            "parameters": self.arguments.schema(),
        }

    def definition(self) -> dict[str, JsonValue]:
        """Everything about the tool that shapes a run's behaviour (for the agent revision)."""
        return {
            **self.schema(),
            "key_arguments": list(self.key_arguments),
            "read_only": self.read_only,
            "idempotent": self.idempotent,
            "requires_approval": self.requires_approval,
            "version": self.version,
            # only when declared, so the revisions of agents without one stay as they were
            **({} if self.settle is None else {"settle": self.settle.definition()}),
        }

    def validate(self, arguments: Mapping[str, JsonValue]) -> dict[str, Any]:
        return self.arguments.validate(arguments)

    async def invoke(self, arguments: Mapping[str, JsonValue], *, key: str | None) -> str:
        """Run the tool; the result as text (JSON unless the tool returned a string)."""
        values = self.arguments.bind(self.validate(arguments), key)
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
    settle: Replay | Probe | None = None,
) -> Callable[[ToolFunction], Tool]:
    """Declare an async function as a tool; its docstring is the description. ``settle``: how a
    machine may settle a call a crash left undecided (``Replay()`` or ``Probe(fn)``)."""

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
            settle=settle,
        )

    return wrap
