"""Leaseholder: renews in the background, releases on the way out, and says the moment the lease
is lost or about to lapse unrenewed.

The holder keeps time on a hand-moved clock (``ManualClock``): ``pass_time`` wakes its renewals
at their moments, so nothing here waits in real time. Where the store's clock and the holder's
must disagree (a lease lapsed on the store while the holder slept), each has its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from agentrun._errors import RunLeaseError, StaleFenceError
from agentrun._leases import Leaseholder, LeasePolicy, RunLease, default_holder
from agentrun.stores._memory import MemoryBackend, MemoryLeaseStore
from agentrun.testing import ManualClock
from tests.kit.stores import HeldRenewals, Renewals, unavailable
from tests.support.frontiers import RUN, TENANT
from tests.support.leaseholder_exits import EXIT_WITHIN, assert_every_exit_returns

FAST = LeasePolicy(ttl=0.4, renew_within=0.2)


def test_the_default_policy_is_sixty_seconds_renewed_within_twenty() -> None:
    policy = LeasePolicy()
    assert (policy.ttl, policy.renew_within) == (60.0, 20.0)


def test_renew_within_must_be_shorter_than_the_ttl() -> None:
    with pytest.raises(ValidationError, match="renew_within"):
        LeasePolicy(ttl=10, renew_within=10)


def test_holder_identities_are_unique_per_call() -> None:
    assert default_holder() != default_holder()


def test_superseded_by_compares_fences_of_one_run() -> None:
    lease = RunLease(tenant="t", run_id="r", holder="a", fence=3, remaining=1)
    assert lease.superseded_by(lease.model_copy(update={"fence": 4, "holder": "b"}))
    assert not lease.superseded_by(lease.model_copy(update={"fence": 3, "holder": "b"}))
    assert not lease.superseded_by(lease.model_copy(update={"fence": 9, "run_id": "other"}))
    assert not lease.superseded_by(lease.model_copy(update={"fence": 9, "tenant": "other"}))


async def test_it_renews_in_the_background_and_keeps_the_fence(clock: ManualClock) -> None:
    store = Renewals(MemoryLeaseStore(clock=clock))
    async with await Leaseholder.acquire(store, TENANT, RUN, "w1", FAST, clock=clock) as holder:
        fence = holder.fence
        await clock.pass_time(1.5)  # almost four TTLs
        held = await store.held(TENANT, RUN)
        assert held is not None
        assert (held.holder, held.fence) == ("w1", fence)
        assert not holder.lost.is_set()
        holder.ensure_held()
        assert store.renewals >= 5  # one per (ttl - renew_within) at least
        assert holder.lease.fence == fence


async def test_it_releases_on_exit() -> None:
    store = MemoryLeaseStore()
    async with await Leaseholder.acquire(store, TENANT, RUN, "w1", LeasePolicy(ttl=30)) as h:
        fence = h.fence
    assert await store.held(TENANT, RUN) is None
    taken = await store.acquire(TENANT, RUN, "w2", ttl=30)
    assert taken.fence > fence


async def test_it_releases_when_the_block_raises() -> None:
    store = MemoryLeaseStore()
    with pytest.raises(KeyError):
        async with await Leaseholder.acquire(store, TENANT, RUN, "w1", LeasePolicy(ttl=30)):
            raise KeyError("boom")
    assert await store.held(TENANT, RUN) is None


async def test_losing_to_another_holder_sets_lost_and_stops_the_run(clock: ManualClock) -> None:
    store_clock = ManualClock()
    backend = MemoryBackend(clock=store_clock)
    async with await Leaseholder.acquire(
        backend.leases, TENANT, RUN, "w1", FAST, clock=clock
    ) as holder:
        store_clock.advance(1.0)  # the store's clock says the lease lapsed
        other = await backend.leases.acquire(TENANT, RUN, "w2", ttl=30)
        assert other.fence > holder.fence
        assert holder.lease.superseded_by(other)
        await clock.pass_time(0.3)  # its renewal was due after 0.2s; it lapses at 0.38s
        assert holder.lost.is_set()
        assert "w2" in holder.lost_reason
        with pytest.raises(RunLeaseError) as caught:
            holder.ensure_held()
        assert caught.value.retryable
        assert caught.value.fence == holder.fence
        assert "lost" in str(caught.value)
        # what the superseded holder writes is refused on the number
        with pytest.raises(StaleFenceError):
            await backend.checkpoints.put(TENANT, RUN, b"{}", fence=holder.fence)
    held = await backend.leases.held(TENANT, RUN)
    assert held is not None
    assert held.holder == "w2"  # exiting did not release the winner's lease


async def test_a_refused_renewal_sets_lost(clock: ManualClock) -> None:
    refusal = RunLeaseError(run_id=RUN, tenant=TENANT, requested_by="w1", holder="w9", fence=7)
    store = Renewals(MemoryLeaseStore(clock=clock), refusal)
    async with await Leaseholder.acquire(store, TENANT, RUN, "w1", FAST, clock=clock) as holder:
        await clock.pass_time(0.3)  # renewal due after 0.2s
        assert holder.lost.is_set()
        assert store.renewals == 1
        with pytest.raises(RunLeaseError):
            holder.ensure_held()


async def test_failing_renewals_set_lost_before_the_lease_lapses(clock: ManualClock) -> None:
    policy = LeasePolicy(ttl=1.2, renew_within=0.8)
    store = Renewals(MemoryLeaseStore(clock=clock), unavailable("renew the lease"))
    async with await Leaseholder.acquire(store, TENANT, RUN, "w1", policy, clock=clock) as holder:
        started = clock()
        while not holder.lost.is_set() and clock() - started < 2 * policy.ttl:
            await clock.pass_time(0.01)
        lost_after = clock() - started
        # the store still holds the lease: the holder gave up before it lapsed
        held = await store.held(TENANT, RUN)
        assert held is not None, f"lost was set {lost_after:.3f}s in, after the lease lapsed"
        assert held.holder == "w1"
        assert store.renewals >= 2  # a retryable failure is retried before giving up
        assert lost_after > policy.ttl - policy.renew_within
        with pytest.raises(RunLeaseError):
            holder.ensure_held()


async def test_ensure_held_refuses_once_the_deadline_passes_without_renewal(
    clock: ManualClock,
) -> None:
    store = MemoryLeaseStore(clock=clock)
    lease = await store.acquire(TENANT, RUN, "w1", ttl=0.3)
    holder = Leaseholder(store, lease, LeasePolicy(ttl=0.3, renew_within=0.1), clock=clock)
    holder.ensure_held()  # never entered: no renewals, so only the deadline decides
    clock.advance(0.35)
    with pytest.raises(RunLeaseError, match="lapse"):
        holder.ensure_held()
    assert holder.lost.is_set()


async def _until(condition: Callable[[], bool]) -> None:
    for _ in range(1_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never came true")


async def _hold_until_a_renewal_is_held(
    store: HeldRenewals, clock: ManualClock, carried_on: list[str]
) -> None:
    """Takes the lease, leaves the block once a renewal is sent and held, then notes that it
    carried on past the block."""
    async with await Leaseholder.acquire(store, TENANT, RUN, "w1", FAST, clock=clock):
        await clock.pass_time(0.25)  # the renewal is due after 0.2s: it is sent and held
        assert store.started.is_set()
    carried_on.append("past the block")


async def test_an_exit_stops_a_renewal_that_swallowed_its_cancellation(
    clock: ManualClock,
) -> None:
    store = HeldRenewals(MemoryLeaseStore(clock=clock))
    carried_on: list[str] = []
    holding = asyncio.create_task(_hold_until_a_renewal_is_held(store, clock, carried_on))
    await _until(lambda: store.swallowed >= 1)
    store.through.set()  # the renewal lands after its cancellation was swallowed
    done, _ = await asyncio.wait((holding,), timeout=EXIT_WITHIN)
    assert done, "the exit hung on a renewal that swallowed its cancellation"
    holding.result()
    assert carried_on == ["past the block"]
    assert store.renewals == 1  # none was sent once the exit began
    assert await store.held(TENANT, RUN) is None  # and the renewed lease was released


async def test_an_exit_never_swallows_the_callers_cancellation(clock: ManualClock) -> None:
    store = HeldRenewals(MemoryLeaseStore(clock=clock))
    carried_on: list[str] = []
    holding = asyncio.create_task(_hold_until_a_renewal_is_held(store, clock, carried_on))
    await _until(lambda: store.swallowed >= 1)
    holding.cancel()  # the caller is cancelled while its exit waits on the renewal
    await _until(lambda: store.swallowed >= 2)
    store.through.set()
    done, _ = await asyncio.wait((holding,), timeout=EXIT_WITHIN)
    assert done, "the exit hung on a renewal that swallowed its cancellation"
    assert holding.cancelled()
    assert carried_on == []
    assert store.renewals == 1
    assert await store.held(TENANT, RUN) is None  # released on the way out all the same


async def test_a_cancelled_caller_stays_cancelled_when_the_renewal_ends_on_its_own(
    clock: ManualClock,
) -> None:
    """Awaiting the renewal task hands the caller's cancellation to it; one that swallows it
    and then ends (here its lease lapsed) would leave the caller running as if never asked."""
    store = HeldRenewals(MemoryLeaseStore(clock=clock))
    carried_on: list[str] = []
    holding = asyncio.create_task(_hold_until_a_renewal_is_held(store, clock, carried_on))
    await _until(lambda: store.swallowed >= 1)
    holding.cancel()
    await _until(lambda: store.swallowed >= 2)
    clock.advance(1.0)  # the lease lapses on the store: the renewal is refused when it lands
    store.through.set()
    done, _ = await asyncio.wait((holding,), timeout=EXIT_WITHIN)
    assert done, "the exit hung"
    assert holding.cancelled()
    assert carried_on == []


async def test_thousands_of_exits_mid_renewal_all_return_and_release() -> None:
    await assert_every_exit_returns(MemoryLeaseStore(), TENANT, swallow=True)
