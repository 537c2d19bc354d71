"""How a tool declares that a machine may settle its call when a crash left it undecided.

A side-effecting call in flight when its worker died is *indeterminate*: the kit cannot know
whether the service acted, so the resume refuses it until somebody answers. Many services can
say themselves, and a tool may declare how to ask them (``agentrun.runner._settling`` asks):

* ``Replay`` — send the same call again with the same idempotency key. A service that honours
  keys answers with the first outcome (Stripe, the IETF ``Idempotency-Key`` draft), which
  settles the call as ran with that result. Only a keyed tool can be replayed: without a key a
  replay is a second call.
* ``Probe`` — ask a read-only question whose answer says "it ran, with this result" or "it did
  not run". A negative answer settles the call as not run only when the tool declares it
  authoritative (``did_not_run_is_authoritative``): a lookup that lags behind the action it
  looks up says "not found" about a charge that went through, and "did not run" lets the call
  be made again.

Both wait ``delay_seconds`` after the call turned indeterminate before a machine settles it (a
person already looking answers first), and ask at most ``attempts`` times before leaving it to a
person. A tool written in Python declares them directly (``tool(settle=...)``); an HTTP tool or
an MCP tool declared as data writes a ``SettleSpec`` (``settle:`` in the Agent), which the tool
turns into one of them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Literal, cast
from urllib.parse import quote

from pydantic import Field, JsonValue, model_validator

from agentrun._base import SpecModel
from agentrun._errors import ConfigurationError
from agentrun.runner._request_fields import URL, Headers, placeholders

DEFAULT_DELAY_SECONDS = 30.0
"""Long enough for a person already looking at the run to answer first; short enough that a
rolling restart does not page anyone."""
DEFAULT_ATTEMPTS = 3
KEY_PLACEHOLDER = "idempotencyKey"
"""The placeholder a probe's templates write the call's idempotency key with."""


@dataclass(frozen=True)
class Ran:
    """The service says the call took effect; ``result`` is what the call returned."""

    result: str
    evidence: str = ""
    """What was asked and answered, for the record (the result, when empty)."""


@dataclass(frozen=True)
class DidNotRun:
    """The service says the call never took effect."""

    evidence: str = ""


@dataclass(frozen=True)
class Unknown:
    """The answer settles nothing (an error, a timeout, an answer outside the conditions)."""

    why: str


Answer = Ran | DidNotRun | Unknown
ProbeFunction = Callable[[Mapping[str, JsonValue], str | None], Awaitable[Answer]]
"""``fn(arguments, idempotency_key)``: the call's arguments as the model gave them, and the key
the call was sent with, which the tool's function was handed (None for a keyless tool)."""


@dataclass(frozen=True, kw_only=True)
class Settlement:
    """When a machine may settle a call (``delay_seconds`` after it turned indeterminate) and
    how often it asks (``attempts``) before leaving it to a person."""

    delay_seconds: float = DEFAULT_DELAY_SECONDS
    attempts: int = DEFAULT_ATTEMPTS

    def __post_init__(self) -> None:
        if not 1 <= self.delay_seconds <= 3600:
            raise ConfigurationError(
                f"settle: delay_seconds is {self.delay_seconds}; give 1 to 3600 seconds"
            )
        if not 1 <= self.attempts <= 10:
            raise ConfigurationError(f"settle: attempts is {self.attempts}; give 1 to 10")

    def definition(self) -> dict[str, JsonValue]:
        """What of it shapes a run's behaviour (part of the agent revision)."""
        return {"delay_seconds": self.delay_seconds, "attempts": self.attempts}


@dataclass(frozen=True, kw_only=True)
class Replay(Settlement):
    """Settle by making the same call again with the same arguments and idempotency key."""

    sends: str = field(default="", compare=False)
    """What a replay sends, as the evidence names it (an HTTP tool's method and URL); empty: the
    tool's own function."""

    def definition(self) -> dict[str, JsonValue]:
        return {"mode": "replay", **super().definition()}


@dataclass(frozen=True)
class Probe(Settlement):
    """Settle by asking ``fn`` (a read-only question to the service) what happened."""

    fn: ProbeFunction = field(repr=False)
    did_not_run_is_authoritative: bool = False
    needs_key: bool = field(default=False, kw_only=True)
    """Whether the probe asks by the call's idempotency key: a keyless call is then left to a
    person at once."""
    declared: JsonValue = field(default=None, kw_only=True, compare=False)
    """The declaration the probe was made from (an Agent's ``settle``), for the revision; None:
    the function's qualified name stands for it."""

    def definition(self) -> dict[str, JsonValue]:
        asks = self.declared
        if asks is None:
            asks = f"{self.fn.__module__}.{self.fn.__qualname__}"
        return {
            "mode": "probe",
            "probe": asks,
            "did_not_run_is_authoritative": self.did_not_run_is_authoritative,
            **super().definition(),
        }


# -- as an Agent declares it ------------------------------------------------------------------

JsonPointer = Annotated[str, Field(max_length=1024, pattern=r"^(/[^/]*)*$")]
"""RFC 6901: empty for the whole document, else ``/``-separated tokens (``~1`` is ``/``)."""
Template = Annotated[str, Field(max_length=8192)]


NOT_JSON = object()
"""An answer that is no JSON document: no pointer names anything in it."""


def pointed(document: object, pointer: str) -> tuple[bool, JsonValue]:
    """Whether ``pointer`` names a value in ``document`` (parsed JSON), and the value."""
    if document is NOT_JSON:
        return False, None
    at = document
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(at, dict) and token in at:
            at = at[token]
        elif isinstance(at, list) and token.isdigit() and int(token) < len(at):
            at = at[int(token)]
        else:
            return False, None
    return True, cast(JsonValue, at)


def as_text(value: JsonValue) -> str:
    """A value as a template or a comparison writes it: a string as it is, anything else as
    JSON (``true``, ``3``)."""
    return value if isinstance(value, str) else json.dumps(value)


class AnswerCondition(SpecModel):
    """What an answer must be to mean one thing: its HTTP status among ``status`` (HTTP probes),
    and the value at ``pointer`` in its JSON among ``equals`` (or, without ``equals``, present).
    Every part given must hold."""

    status: Annotated[tuple[Annotated[int, Field(ge=100, le=599)], ...], Field(max_length=16)] = ()
    pointer: JsonPointer | None = None
    equals: Annotated[tuple[Annotated[str, Field(max_length=1024)], ...], Field(max_length=32)] = ()
    """Values compared as text: a number or a boolean at the pointer as JSON writes it."""

    @model_validator(mode="after")
    def _says_something(self) -> AnswerCondition:
        if self.equals and self.pointer is None:
            raise ValueError("equals needs pointer: the JSON pointer whose value is compared")
        if not self.status and self.pointer is None:
            raise ValueError("a condition needs status or pointer; one with neither holds always")
        return self

    def holds(self, status: int | None, document: object) -> bool:
        if self.status and status not in self.status:
            return False
        if self.pointer is None:
            return True
        found, value = pointed(document, self.pointer)
        return found and (not self.equals or as_text(value) in self.equals)


class HttpProbe(SpecModel):
    """A read-only GET: ``url`` may hold ``{argument}`` and ``{idempotencyKey}`` placeholders;
    ``headers`` are written as a tool's (a secret among them is read at each request)."""

    url: URL
    headers: Headers = Field(default_factory=dict)


class McpProbe(SpecModel):
    """A read-only tool of the same MCP server, called with ``arguments``: each a template over
    the same placeholders as an HTTP probe's URL."""

    tool: str = Field(min_length=1, max_length=128)
    arguments: Annotated[
        dict[Annotated[str, Field(max_length=128)], Template], Field(max_length=64)
    ] = Field(default_factory=dict)


class ProbeSpec(SpecModel):
    """The question (``http`` or ``mcp``) and what its answers mean."""

    http: HttpProbe | None = None
    mcp: McpProbe | None = None
    ran: AnswerCondition | None = None
    did_not_run: AnswerCondition | None = None
    did_not_run_is_authoritative: bool = False
    result: JsonPointer | None = None
    """What of an answer that says "ran" becomes the call's result; None: the whole answer."""

    @model_validator(mode="after")
    def _one_question_and_a_meaning(self) -> ProbeSpec:
        if (self.http is None) == (self.mcp is None):
            raise ValueError("settle.probe needs exactly one of http (a GET) or mcp (a tool)")
        if self.ran is None and self.did_not_run is None:
            raise ValueError(
                "settle.probe needs ran or didNotRun (or both): the conditions that say what an "
                "answer means"
            )
        if self.did_not_run_is_authoritative and self.did_not_run is None:
            raise ValueError("settle.probe.didNotRunIsAuthoritative needs didNotRun conditions")
        if self.mcp is not None and any(c.status for c in (self.ran, self.did_not_run) if c):
            raise ValueError(
                "settle.probe: status conditions are for HTTP probes; an MCP probe's answer has "
                "no status: use pointer and equals"
            )
        return self

    @property
    def templates(self) -> tuple[str, ...]:
        if self.http is not None:
            return (self.http.url,)
        assert self.mcp is not None
        return tuple(self.mcp.arguments.values())

    def placeholders(self) -> set[str]:
        return {name for template in self.templates for name in placeholders(template)}

    def judge(self, asked: str, status: int | None, text: str) -> Answer:
        """What an answer means; ``ran`` is tried first (a call that may have run is never
        made again on an answer that also matches ``didNotRun``)."""
        said = f"{asked}: {'' if status is None else f'{status} '}{text}"
        try:
            document: object = json.loads(text)
        except ValueError:
            document = NOT_JSON
        if self.ran is not None and self.ran.holds(status, document):
            if self.result is None:
                return Ran(text, evidence=said)
            found, value = pointed(document, self.result)
            if not found:
                return Unknown(f"{said} (it says ran, but has no {self.result} for the result)")
            return Ran(as_text(value), evidence=said)
        if self.did_not_run is not None and self.did_not_run.holds(status, document):
            return DidNotRun(evidence=said)
        return Unknown(f"{said} (outside the probe's conditions)")


class ReplaySpec(SpecModel):
    """Replay the call with the same idempotency key; nothing to configure (``replay: {}``)."""


class SettleSpec(SpecModel):
    """How a machine may settle a call of this tool that a crash left undecided: ``replay``
    or ``probe``, after ``delaySeconds``, asking at most ``attempts`` times."""

    delay_seconds: float = Field(default=DEFAULT_DELAY_SECONDS, ge=1, le=3600)
    attempts: int = Field(default=DEFAULT_ATTEMPTS, ge=1, le=10)
    replay: ReplaySpec | None = None
    probe: ProbeSpec | None = None

    @model_validator(mode="after")
    def _one_mode(self) -> SettleSpec:
        if (self.replay is None) == (self.probe is None):
            raise ValueError("settle needs exactly one of replay ({}) or probe")
        return self

    def check(self, *, kind: Literal["http", "mcp"], keyed: bool, fixed: Iterable[str]) -> None:
        """Refuse (``ValueError``, naming the field and the fix) what cannot work on a tool of
        ``kind`` that has key arguments (``keyed``) and always sends ``fixed`` arguments."""
        if self.replay is not None and not keyed:
            raise ValueError(
                "settle.replay needs keyArguments: without an idempotency key a replay is a "
                "second call; name the arguments that identify the effect in keyArguments, or "
                "settle with a probe"
            )
        if self.probe is None:
            return
        if self.probe.mcp is not None and kind == "http":
            raise ValueError(
                "settle.probe.mcp is for MCP tools (a tool of the same server); an HTTP tool "
                "probes with settle.probe.http"
            )
        named = self.probe.placeholders()
        if KEY_PLACEHOLDER in named and not keyed:
            raise ValueError(
                "settle.probe uses {idempotencyKey}, and the tool has no keyArguments, so its "
                "calls carry no key; name keyArguments, or probe by the call's arguments"
            )
        hidden = sorted(named & set(fixed))
        if hidden:
            raise ValueError(
                f"settle.probe placeholders {hidden} name fixed arguments; placeholders are the "
                "arguments the model gives (a secret would be written where it is logged), and "
                "{idempotencyKey}"
            )

    def check_arguments(self, arguments: Iterable[str]) -> None:
        """Refuse a probe placeholder naming an argument the tool does not take."""
        if self.probe is None:
            return
        unknown = sorted(self.probe.placeholders() - set(arguments) - {KEY_PLACEHOLDER})
        if unknown:
            raise ValueError(
                f"settle.probe placeholders {unknown} are not arguments of the tool "
                f"({', '.join(sorted(arguments)) or 'none'}); use its arguments' names or "
                "{idempotencyKey}"
            )

    def settlement(self, ask: ProbeFunction | None, *, sends: str = "") -> Replay | Probe:
        """The settlement the tool declares, asking with ``ask`` when it probes."""
        if self.probe is None:
            return Replay(delay_seconds=self.delay_seconds, attempts=self.attempts, sends=sends)
        assert ask is not None
        return Probe(
            ask,
            self.probe.did_not_run_is_authoritative,
            delay_seconds=self.delay_seconds,
            attempts=self.attempts,
            needs_key=KEY_PLACEHOLDER in self.probe.placeholders(),
            declared=self.model_dump(mode="json", by_alias=True, exclude_none=True),
        )


class MissingPlaceholderError(ValueError):
    """A template names an argument the call does not carry (an optional one left out)."""


def fill(
    template: str,
    arguments: Mapping[str, JsonValue],
    key: str | None,
    *,
    escape: Callable[[str], str] = lambda text: text,
) -> str:
    """``template`` with each placeholder written from the call: ``{idempotencyKey}`` its key,
    any other the argument of that name (``escape`` applied: ``url_escape`` in a URL)."""
    values: dict[str, str] = {}
    for name in placeholders(template):
        value = key if name == KEY_PLACEHOLDER else arguments.get(name)
        if value is None:
            raise MissingPlaceholderError(f"the call has no {name} to write into {template}")
        values[name] = escape(as_text(value))
    return template.format_map(values)


def url_escape(text: str) -> str:
    return quote(text, safe="")
