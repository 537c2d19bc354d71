"""Secret references: what a declared agent names instead of a key, resolved only at dispatch.

A declaration (an agent spec, a Kubernetes resource) never holds a key, a token or a password:
it holds a ``SecretReference`` (``{"valueFrom": {"secretKeyRef": {"name": ..., "key": ...}}}``,
the shape Kubernetes uses for environment variables). The value is asked of a ``SecretResolver``
the caller supplies — a mapping or the environment in the kit, a Kubernetes Secret reader in the
operator — at the moment a request is made, kept in memory for that request only, and never put
into anything the kit persists: the arguments a model gave (which a frontier keeps) never contain
it, because the model never sees it; headers are not persisted at all.

A remote service may still echo a secret back (an error page quoting the header it got), and
so may the model (a reply that repeats a token a tool was handed, or its own key). So every value
read for an agent is remembered as it is read (``Remembering``) in the agent's ``SecretValues``,
which the run's ``Masker`` masks wherever they appear (``Masker.with_secrets``), the model's
replies and the final answer included: one masking for the transcript, the stores, the status and
the events. ``Revealed`` masks an answer with the values its request used before the answer
joins the conversation, with the same ``SecretValues``, for what is written with no run's masker
(an Agent's probe).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from pydantic import Field

from agentrun._base import SpecModel
from agentrun._errors import AgentRunError
from agentrun._outcomes import Outcome
from agentrun._redaction import SecretValues


class SecretKeyRef(SpecModel):
    """One key of one named secret (a Kubernetes Secret in the operator)."""

    name: str = Field(min_length=1, max_length=253)
    key: str = Field(min_length=1, max_length=253)

    def __str__(self) -> str:
        return f"{self.name}/{self.key}"


class ValueFrom(SpecModel):
    secret_key_ref: SecretKeyRef


class SecretReference(SpecModel):
    """Where a value comes from, written where the value would be; ``prefix`` goes before it
    (``"Bearer "`` for an Authorization header whose secret holds only the token)."""

    value_from: ValueFrom
    prefix: str = Field(default="", max_length=1024)

    @classmethod
    def to(cls, name: str, key: str, *, prefix: str = "") -> SecretReference:
        ref = SecretKeyRef(name=name, key=key)
        return cls(value_from=ValueFrom(secret_key_ref=ref), prefix=prefix)

    @property
    def ref(self) -> SecretKeyRef:
        return self.value_from.secret_key_ref


MaybeSecret = str | SecretReference
"""A value written in a declaration: given as it is, or referenced."""


class SecretUnavailableError(AgentRunError):
    """A referenced secret could not be read; nothing was sent that needed it. Retryable: a
    secret is often created after what refers to it."""

    outcome = Outcome.SECRET_UNAVAILABLE

    def __init__(self, ref: SecretKeyRef, why: str) -> None:
        self.ref = ref
        super().__init__(
            f"secret {ref} could not be read: {why}. Create it (or fix the reference's name and "
            "key); the request that needed it was not sent."
        )


class SecretResolver(Protocol):
    """Reads one secret's value; called at every request that needs it, so a rotated secret is
    used from the next request on. Raises ``SecretUnavailableError`` when it cannot (anything
    else it raises is taken as that, with its cause: ``Revealed.reveal``)."""

    async def resolve(self, ref: SecretKeyRef) -> str: ...


@runtime_checkable
class KeepingResolver(Protocol):
    """A resolver that keeps what it read for a while (the operator's, which would otherwise read
    a Kubernetes Secret at every request): told that a service refused a value (401, 403), it
    reads that secret afresh the next time, so a rotated key is not refused until its max age."""

    def refused(self, ref: SecretKeyRef) -> None: ...


@dataclass(frozen=True)
class MappingSecrets:
    """Secrets from a mapping of ``"name/key"`` to value: for tests, and for a program that
    already holds its secrets."""

    values: Mapping[str, str] = field(repr=False)

    async def resolve(self, ref: SecretKeyRef) -> str:
        try:
            return self.values[str(ref)]
        except KeyError as error:
            raise SecretUnavailableError(ref, "no such entry in the mapping") from error


REFUSED_CREDENTIALS = (401, 403)
"""The statuses a service refuses credentials with."""

ENVIRONMENT_PREFIX = "AGENTRUN_SECRET_"


def environment_variable(ref: SecretKeyRef) -> str:
    """``AGENTRUN_SECRET_<NAME>_<KEY>``, upper case, every other character than a letter or a
    digit written ``_``: ``model-keys/openai`` is ``AGENTRUN_SECRET_MODEL_KEYS_OPENAI``."""
    return ENVIRONMENT_PREFIX + re.sub(r"[^A-Z0-9]", "_", f"{ref.name}_{ref.key}".upper())


@dataclass(frozen=True)
class EnvironmentSecrets:
    """Secrets from environment variables (see ``environment_variable``), read at each request."""

    async def resolve(self, ref: SecretKeyRef) -> str:
        variable = environment_variable(ref)
        value = os.environ.get(variable)
        if value is None:
            raise SecretUnavailableError(ref, f"the environment variable {variable} is not set")
        return value


@dataclass(frozen=True)
class Remembering:
    """A resolver that adds every value it reads to ``values`` before handing it out, so that
    the value is masked in whatever is written after the request that uses it: its answer,
    the model's next reply, a rotated value read mid-run as much as one read at the start."""

    resolver: SecretResolver
    values: SecretValues = field(repr=False)

    async def resolve(self, ref: SecretKeyRef) -> str:
        value = await self.resolver.resolve(ref)
        self.values.add(value)
        return value

    def refused(self, ref: SecretKeyRef) -> None:
        if isinstance(self.resolver, KeepingResolver):
            self.resolver.refused(ref)


@dataclass
class Revealed:
    """The secret values one request used, so that what comes back can be scrubbed of them."""

    resolver: SecretResolver | None
    values: SecretValues = field(default_factory=SecretValues, repr=False)
    refs: list[SecretKeyRef] = field(default_factory=list)

    async def reveal(self, value: MaybeSecret) -> str:
        if isinstance(value, str):
            return value
        if self.resolver is None:
            raise SecretUnavailableError(value.ref, "no secret resolver was given to read it with")
        try:
            secret = await self.resolver.resolve(value.ref)
        except SecretUnavailableError:
            raise
        except Exception as error:
            # A resolver that failed in its own way (a file, a vault away) read nothing either:
            # said as such, so the request is known not sent rather than left undecided, and
            # with its cause, which says what to fix.
            raise SecretUnavailableError(value.ref, f"{type(error).__name__}: {error}") from error
        self.refs.append(value.ref)
        self.values.add(secret)
        return value.prefix + secret

    async def reveal_all(self, values: Mapping[str, MaybeSecret]) -> dict[str, str]:
        return {name: await self.reveal(value) for name, value in values.items()}

    def refused(self, status: int) -> None:
        """The service answered ``status`` to the request these values went into: a 401 or 403
        tells a resolver that keeps values to read them afresh."""
        if status in REFUSED_CREDENTIALS and isinstance(self.resolver, KeepingResolver):
            for ref in self.refs:
                self.resolver.refused(ref)

    def scrub(self, text: str) -> str:
        """``text`` with every secret this request used masked (``SecretValues.mask``)."""
        return self.values.mask(text)
