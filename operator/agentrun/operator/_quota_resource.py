"""The ``RunQuota`` custom resource: a namespace's limits, as the operator reads them.

The CRD (``crds/runquotas.agentrun.dev.yaml``) is what the API server enforces; these models say
the same names, bounds and single-object rules, so that what the operator reads is what the
server let through (``tests/kube/test_kube_models.py`` compares the two). Spending is counted in
the ledger's unit, micros (``agentrun.runner._pricing``), as ``AgentRun.spec.budget`` is.

**One RunQuota per namespace is honoured: the oldest** (``metadata.creationTimestamp``, then
``metadata.name``), whatever its name. Oldest, because creating a second quota then changes
nothing: a namespace cannot loosen its limits by adding a laxer quota beside the one it was
given, and the one honoured changes only when it is deleted.

A budget counts what is spent in fixed windows aligned on the Unix epoch (``window_start``), not
from some replica's start or the quota's creation: every replica, restarted or not, computes the
same window for the same instant and so adds to, and reads, the same count (``window_key``).

Only pydantic and the resource models are imported: these load without kopf or a client.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Annotated, Any, NamedTuple, Self

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    ValidationError,
    WithJsonSchema,
    model_validator,
)

from agentrun._errors import ConfigurationError
from agentrun.operator._nesting import field_errors
from agentrun.operator._resource import Count, ResourceModel

QUOTA_KIND = "RunQuota"
QUOTA_PLURAL = "runquotas"

WINDOW_PATTERN = r"^[1-9][0-9]{0,4}[mhd]$"
"""A whole number of minutes, hours or days: ``1m`` is the shortest window."""
_UNITS = {"d": timedelta(days=1), "h": timedelta(hours=1), "m": timedelta(minutes=1)}
DEFAULT_WINDOW = timedelta(hours=24)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_COUNT = 1_000_000_000_000_000
"""The bound of a budget's maximums: far above any spend, far below what an int64 holds."""


def _parsed_window(value: object) -> object:
    """``24h`` as a ``timedelta``; a ``timedelta`` as it is (a window given in Python)."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str) and re.fullmatch(WINDOW_PATTERN, value):
        return int(value[:-1]) * _UNITS[value[-1]]
    raise ValueError(f"window must be a whole number of m, h or d (30m, 24h, 7d), not {value!r}")


def _whole_minutes(window: timedelta) -> timedelta:
    """What the CRD's pattern says of a string, said of a ``timedelta`` too."""
    if window < _UNITS["m"] or window % _UNITS["m"]:
        raise ValueError(f"window must be a whole number of minutes, 1m at least, not {window}")
    return window


def _window_text(window: timedelta) -> str:
    """The window as the CRD spells it, in the largest unit that divides it."""
    return next(
        f"{window // length}{unit}" for unit, length in _UNITS.items() if not window % length
    )


Window = Annotated[
    timedelta,
    BeforeValidator(_parsed_window),
    AfterValidator(_whole_minutes),
    PlainSerializer(_window_text),
    WithJsonSchema({"type": "string", "pattern": WINDOW_PATTERN, "maxLength": 6}),
]
Maximum = Annotated[int, Field(ge=0, le=MAX_COUNT)]


class WhenSpent(StrEnum):
    """What a spent budget does to the namespace's runs."""

    QUEUE = "Queue"
    """No new run starts until the next window; runs under way go on."""
    PAUSE = "Pause"
    """Runs under way also stop before their next model call, their checkpoint kept."""


class Budget(ResourceModel):
    window: Window = DEFAULT_WINDOW
    max_cost_micros: Maximum | None = None
    max_tokens: Maximum | None = None

    @model_validator(mode="after")
    def _limits_something(self) -> Self:
        if self.max_cost_micros is None and self.max_tokens is None:
            raise ValueError("a budget sets maxCostMicros, maxTokens or both")
        return self


class RunQuotaSpec(ResourceModel):
    max_active_runs: Annotated[int, Field(ge=0, le=1_000_000)] | None = None
    budget: Budget | None = None
    weight: Annotated[int, Field(ge=1, le=1000)] = 1
    when_spent: WhenSpent = WhenSpent.QUEUE

    @model_validator(mode="after")
    def _limits_something(self) -> Self:
        if self.max_active_runs is None and self.budget is None:
            raise ValueError("a RunQuota limits something; set maxActiveRuns, budget or both")
        return self


class RunQuotaStatus(ResourceModel):
    observed_generation: Count | None = None
    active: Count | None = None
    queued: Count | None = None
    spent_micros: Count | None = None
    spent_tokens: Count | None = None
    active_summary: Annotated[str, Field(max_length=64)] | None = None
    spent_summary: Annotated[str, Field(max_length=64)] | None = None
    window_start: datetime | None = None


def _named(body: Mapping[str, Any]) -> str:
    metadata = body.get("metadata") or {}
    return f"RunQuota {metadata.get('namespace')}/{metadata.get('name')}"


def parse_quota(body: Mapping[str, Any]) -> RunQuotaSpec:
    """The spec of the RunQuota ``body``.

    Raises:
        ConfigurationError: the spec does not fit; the message names the quota and each field
            (the CRD refuses all of this, so only an object stored under an older CRD gets here).
    """
    try:
        return RunQuotaSpec.model_validate(dict(body.get("spec") or {}))
    except ValidationError as error:
        raise ConfigurationError(f"{_named(body)}: {field_errors(error, 'spec')}") from None


def honoured(quotas: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The RunQuota of a namespace the operator honours, among all of its ``quotas``: the oldest,
    by ``metadata.creationTimestamp`` (RFC 3339 in UTC, so ordered as text), then by name."""
    return min(
        quotas,
        key=lambda body: (
            str((body.get("metadata") or {}).get("creationTimestamp") or ""),
            str((body.get("metadata") or {}).get("name") or ""),
        ),
        default=None,
    )


class NamedQuota(NamedTuple):
    """The quota a namespace's runs are held to: its name (for messages and its status) and
    spec."""

    name: str
    spec: RunQuotaSpec


def effective_quota(quotas: Iterable[Mapping[str, Any]]) -> NamedQuota | None:
    """The limits of a namespace whose RunQuotas are ``quotas``: the honoured one, or ``None``
    when the namespace has none (its runs are limited by the operator's capacity only).

    Raises:
        ConfigurationError: the honoured quota does not parse (``parse_quota``); a newer one is
            not read in its place, which would let a namespace escape its limits.
    """
    chosen = honoured(quotas)
    if chosen is None:
        return None
    return NamedQuota(str((chosen.get("metadata") or {}).get("name")), parse_quota(chosen))


def window_start(now: datetime, window: timedelta) -> datetime:
    """When the window holding ``now`` (timezone-aware) began: windows of ``window`` laid end to
    end from the Unix epoch, so a 24h window starts at midnight UTC and a 7d one on a Thursday
    (1970-01-01 was one), whichever replica asks."""
    return EPOCH + ((now - EPOCH) // window) * window


def window_key(start: datetime) -> str:
    """The window beginning at ``start`` as a key a store can hold (``20261202T000000Z``): the
    same instant gives the same key whatever its timezone, and keys sort as their windows do."""
    return start.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")


def active_summary(active: int, spec: RunQuotaSpec) -> str:
    """``status.activeSummary``: ``3/5``, or ``3`` when the quota sets no ``maxActiveRuns``."""
    return str(active) if spec.max_active_runs is None else f"{active}/{spec.max_active_runs}"


def spent_summary(spent_micros: int, spent_tokens: int, spec: RunQuotaSpec) -> str:
    """``status.spentSummary``: the spend over the cost budget in currency units (``0.12/5.00``),
    tokens over the token budget when only tokens are limited (``4000/2000000``), or the spend
    alone when there is no budget."""
    budget = spec.budget
    spent = f"{spent_micros / 1_000_000:.2f}"
    if budget is None:
        return spent
    if budget.max_cost_micros is not None:
        return f"{spent}/{budget.max_cost_micros / 1_000_000:.2f}"
    return f"{spent_tokens}/{budget.max_tokens}"  # a budget sets one maximum at least
