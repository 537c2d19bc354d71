"""Thousands of ``Leaseholder`` exits on one store, each landing where a renewal may be in flight.

A holder whose renewals are always due (``ALWAYS_RENEWING``) has one in flight, or about to be,
at nearly every moment, so an exit after a few turns of the event loop cancels it mid-command
more often than not. On Redis the driver itself can swallow that cancellation;
``InFlightRenewals(swallow=True)`` makes any store do the same on every renewal it is given.

Each exit is run in a task of its own and waited on with ``asyncio.wait``, which the exit
cannot swallow: ``EXIT_WITHIN`` is how long the harness waits before it calls an exit hung, a
bound for detecting a hang, not a measure of speed. Every exit uses a holder of its own on one
run, so an exit that did not hand the lease back makes the next acquisition fail.

``assert_every_exit_returns`` is the whole check, run on every store by the test directory
that starts its server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from agentrun._leases import Leaseholder, LeasePolicy, LeaseStore, RunLease

EXITS = 2_000
RUN = "run-exits"
EXIT_WITHIN = 10.0
"""Seconds the harness waits on one exit before it calls it hung."""

ALWAYS_RENEWING = LeasePolicy(ttl=5.0, renew_within=5.0 - 1e-6)
"""Renewal is due as soon as the lease is taken and again as soon as it is renewed."""


class InFlightRenewals:
    """A real lease store that counts its renewals in flight and, with ``swallow``, finishes
    each one sent whatever happens: a cancellation that lands meanwhile is swallowed and the
    renewal's answer returned, as redis-py can do mid-command."""

    def __init__(self, inner: LeaseStore, *, swallow: bool) -> None:
        self.inner = inner
        self.swallow = swallow
        self.in_flight = 0
        self.swallowed = 0

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        return await self.inner.acquire(tenant, run_id, holder, ttl=ttl)

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        self.in_flight += 1
        try:
            if not self.swallow:
                return await self.inner.renew(lease, ttl=ttl)
            sent = asyncio.ensure_future(self.inner.renew(lease, ttl=ttl))
            try:
                return await asyncio.shield(sent)
            except asyncio.CancelledError:
                self.swallowed += 1
                return await sent
        finally:
            self.in_flight -= 1

    async def release(self, lease: RunLease) -> None:
        await self.inner.release(lease)

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        return await self.inner.held(tenant, run_id)


@dataclass
class Campaign:
    """What ``exit_many`` saw: exits made, and how many landed with a renewal in flight."""

    exits: int = 0
    in_flight_at_exit: int = 0


async def exit_many(
    store: InFlightRenewals, tenant: str, run_id: str, *, exits: int = EXITS
) -> Campaign:
    """``exits`` holders of ``run_id`` taken and left one after another; raises
    ``AssertionError`` at the first exit that has not returned within ``EXIT_WITHIN``."""
    campaign = Campaign()
    for number in range(exits):
        holding = asyncio.create_task(_hold(store, tenant, run_id, number, campaign))
        done, _ = await asyncio.wait((holding,), timeout=EXIT_WITHIN)
        if not done:
            raise AssertionError(
                f"exit {number} of {exits} hung ({campaign.in_flight_at_exit} of "
                f"{campaign.exits} exits before it landed with a renewal in flight, "
                f"{store.swallowed} cancellations swallowed)"
            )
        holding.result()
    return campaign


async def _hold(
    store: InFlightRenewals, tenant: str, run_id: str, number: int, campaign: Campaign
) -> None:
    holder = await Leaseholder.acquire(store, tenant, run_id, f"holder-{number}", ALWAYS_RENEWING)
    async with holder:
        for _ in range(number % 7):  # the exit lands at a different step of the renewal each time
            await asyncio.sleep(0)
        campaign.in_flight_at_exit += store.in_flight
    campaign.exits += 1


async def assert_every_exit_returns(
    leases: LeaseStore, tenant: str, *, swallow: bool, exits: int = EXITS
) -> None:
    """``exits`` exits of holders renewing on ``leases``, each cancellation of a renewal in
    flight swallowed if ``swallow``: every exit returns, a quarter at least landed mid-renewal,
    and the last lease was handed back."""
    store = InFlightRenewals(leases, swallow=swallow)
    campaign = await exit_many(store, tenant, RUN, exits=exits)
    assert campaign.exits == exits
    assert campaign.in_flight_at_exit >= exits // 4, campaign
    if swallow:
        assert store.swallowed >= exits // 4, store.swallowed
    assert await leases.held(tenant, RUN) is None
