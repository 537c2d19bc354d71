"""Per-scope quotas: how many runs may be active at once, and what they may spend in a window.

Why the store decides admission, not the caller: several operator replicas admit runs of one
namespace at once, each from its own cache of what is running. A count read in one replica and
a place taken in another are two steps, and between them the other replicas read the same count:
twenty replicas each seeing four of five places taken admit twenty runs. So ``admit`` is one
atomic step in the store (a Lua script, one ``BEGIN IMMEDIATE`` transaction, a PostgreSQL
transaction holding the scope's row lock): however many callers race, at most ``limit`` runs
are admitted.

An admission carries the fence of the run's lease, so a superseded holder (a replica that lost
the run's lease while it was paused) can neither take a second place for the run nor free the
place its successor holds: ``admit`` and ``leave`` refuse a fence below the one recorded
(``StaleFenceError``). A run is counted once however often it is admitted again, so a replica
that takes over a run re-admits it without asking for a second place. Admissions do not expire:
a run keeps its place until someone lets it ``leave``, which is idempotent so that a retry after a
crash is safe; ``admitted`` lists them, for whoever reconciles places with the runs that exist.

A budget is accounted per window (an opaque name, such as the day's date) in two sums, both
``Spend`` (micros, the ledger's unit, and tokens): what was ``spent`` (settled, real usage) and
what is ``reserved`` (asked for and not settled yet). A run ``reserve``s what a model call may cost
before it makes the call, which succeeds only if what is spent and reserved leaves room for it
under the ``Allowance``; afterwards it ``settle``s, handing the reservation back and adding what
the call used. Concurrent runs can then overrun a budget by no more than what each used beyond
its one reservation, never by running calls against a budget already spent.

The leak, on purpose: a reservation made by a worker that dies before settling stays reserved
until the window's record expires (``ttl`` seconds after its last write, on the store's clock).
Until then the budget looks fuller than it is: conservative, never an overrun.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import Field

from agentrun._base import FrozenModel
from agentrun._storecore.fences import refuse_stale


class Spend(FrozenModel):
    """An amount of model use: its cost in micros (millionths of the currency unit, the ledger's
    unit) and its tokens."""

    micros: int = Field(ge=0)
    tokens: int = Field(ge=0)

    def plus(self, other: Spend) -> Spend:
        return Spend(micros=self.micros + other.micros, tokens=self.tokens + other.tokens)

    def less(self, other: Spend) -> Spend:
        """What is left after ``other`` is taken away, never below zero."""
        return Spend(
            micros=max(0, self.micros - other.micros), tokens=max(0, self.tokens - other.tokens)
        )


NOTHING = Spend(micros=0, tokens=0)


class Allowance(FrozenModel):
    """A budget's limits per window; None leaves that dimension unlimited."""

    micros: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)

    def leaves_room(self, spending: Spending, ask: Spend) -> bool:
        """Whether ``ask`` fits beside what is spent and reserved, in every limited dimension."""
        taken = spending.spent.plus(spending.reserved).plus(ask)
        return (self.micros is None or taken.micros <= self.micros) and (
            self.tokens is None or taken.tokens <= self.tokens
        )


class Spending(FrozenModel):
    """What a window holds: settled usage (``spent``) and what is reserved and not settled yet."""

    spent: Spend
    reserved: Spend


NO_SPENDING = Spending(spent=NOTHING, reserved=NOTHING)
"""A window without a record (never written, expired or forgotten)."""


def refuse_superseded(
    *, tenant: str, scope: str, run_id: str, fence: int, recorded: int, leaving: bool
) -> None:
    """Raise ``StaleFenceError`` when the run is admitted into ``scope`` under a fence
    (``recorded``) above the caller's: what every store does on ``admit`` and ``leave``."""
    what = f"leaving {scope!r}" if leaving else f"admission to {scope!r}"
    refuse_stale(tenant=tenant, run_id=run_id, fence=fence, current=recorded, what=what)


class QuotaStore(Protocol):
    """Admissions of runs into a scope, at most a limit at once, and budgets per window; every
    decision made atomically in the store, whoever asks at the same time."""

    async def admit(self, tenant: str, scope: str, run_id: str, *, fence: int, limit: int) -> bool:
        """Admit the run into the scope if it is admitted already or there is room, atomically.

        A run admitted already is admitted again (counted once) under ``fence``, unless its
        recorded fence is higher. A run not admitted is recorded with ``fence`` when fewer than
        ``limit`` runs are admitted, and refused otherwise, changing nothing.

        Args:
            tenant: The scope's tenant.
            scope: What the limit counts in (a namespace's quota).
            run_id: The run to admit.
            fence: The fence of the run's lease, as its holder has it.
            limit: The most runs admitted at once; a limit lowered below the number admitted
                admits no new run until enough have left.

        Returns:
            True if the run is admitted (now or already), False if the scope is full.

        Raises:
            StaleFenceError: The run is admitted under a higher fence (this holder was
                superseded); nothing changed.
            ConfigurationError: An id, scope or limit no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def leave(self, tenant: str, scope: str, run_id: str, *, fence: int) -> None:
        """Drop the run's admission, freeing its place; a run not admitted is no error.

        Args:
            tenant: The scope's tenant.
            scope: The scope the run was admitted into.
            run_id: The run leaving.
            fence: The fence of the run's lease, as its holder has it.

        Raises:
            StaleFenceError: The run is admitted under a higher fence: a superseded holder may
                not free its successor's place; nothing changed.
            ConfigurationError: An id or scope no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def admitted(self, tenant: str, scope: str) -> dict[str, int]:
        """Every run admitted into the scope, with its recorded fence.

        Args:
            tenant: The scope's tenant.
            scope: The scope.

        Returns:
            Run id to recorded fence (empty for a scope nobody was admitted into).

        Raises:
            ConfigurationError: An id or scope no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def reserve(
        self, tenant: str, scope: str, window: str, *, ask: Spend, limit: Allowance, ttl: float
    ) -> bool:
        """Reserve ``ask`` in the window if it fits under ``limit``, atomically.

        It fits when, in every dimension ``limit`` limits, spent + reserved + ask is at most
        the limit; then ``ask`` is added to what is reserved, and the window's record expires
        ``ttl`` seconds from now, on the store's clock. Otherwise nothing changes.

        Args:
            tenant: The scope's tenant.
            scope: The scope whose budget it is.
            window: The budget's window, an opaque name (the day's date, say).
            ask: What to reserve.
            limit: The window's allowance.
            ttl: Seconds the window's record lives after this write, on the store's clock.

        Returns:
            True if reserved, False if it does not fit.

        Raises:
            ConfigurationError: An id, scope or window no store can keep, or ``ttl`` not a
                positive number.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def settle(
        self, tenant: str, scope: str, window: str, *, reserved: Spend, used: Spend, ttl: float
    ) -> None:
        """Hand back a reservation and count what was used instead, atomically.

        What is reserved falls by ``reserved`` (never below zero) and what is spent rises by
        ``used``; a window with no record (its reservation expired) still counts ``used``. The
        record expires ``ttl`` seconds from now, on the store's clock.

        Args:
            tenant: The scope's tenant.
            scope: The scope whose budget it is.
            window: The budget's window.
            reserved: What ``reserve`` reserved for this use.
            used: What the use really cost.
            ttl: Seconds the window's record lives after this write, on the store's clock.

        Raises:
            ConfigurationError: An id, scope or window no store can keep, or ``ttl`` not a
                positive number.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def spending(self, tenant: str, scope: str, window: str) -> Spending:
        """What the window holds now.

        Args:
            tenant: The scope's tenant.
            scope: The scope whose budget it is.
            window: The budget's window.

        Returns:
            Spent and reserved, zeros for a window with no record (or an expired one).

        Raises:
            ConfigurationError: An id, scope or window no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def forget(self, tenant: str, scope: str) -> None:
        """Drop every admission and every window of the scope.

        Args:
            tenant: The scope's tenant.
            scope: The scope.

        Raises:
            ConfigurationError: An id or scope no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """
