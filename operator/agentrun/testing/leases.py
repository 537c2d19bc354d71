"""``LeaseStoreConformance``: one holder at a time, fences that rise on every acquisition and
never fall, refusals that name the holder, expiry on the store's clock, renewal keeps the fence."""

from __future__ import annotations

import asyncio

import pytest

from agentrun._errors import RunLeaseError
from agentrun._identifiers import MAX_ID_BYTES
from agentrun._leases import LeaseStore
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest


class LeaseStoreConformance(ConformanceBase):
    role = "leases"

    async def test_acquire_gives_a_fenced_lease(self, store: LeaseStore, tenant: str) -> None:
        lease = await store.acquire(tenant, "run", "w1", ttl=self.ttl)
        assert (lease.tenant, lease.run_id, lease.holder) == (tenant, "run", "w1")
        assert lease.fence >= 1
        assert 0 < lease.remaining <= self.ttl
        held = await store.held(tenant, "run")
        assert held is not None
        assert (held.holder, held.fence) == ("w1", lease.fence)

    async def test_a_live_lease_refuses_another_holder_naming_it(
        self, store: LeaseStore, tenant: str
    ) -> None:
        lease = await store.acquire(tenant, "run", "w1", ttl=30)
        with pytest.raises(RunLeaseError) as caught:
            await store.acquire(tenant, "run", "w2", ttl=30)
        assert caught.value.holder == "w1"
        assert caught.value.requested_by == "w2"
        assert caught.value.fence == lease.fence
        assert "'w1'" in str(caught.value)
        assert caught.value.retryable

    async def test_every_acquisition_raises_the_fence(self, store: LeaseStore, tenant: str) -> None:
        first = await store.acquire(tenant, "run", "w1", ttl=30)
        again = await store.acquire(tenant, "run", "w1", ttl=30)
        await store.release(again)
        after_release = await store.acquire(tenant, "run", "w2", ttl=self.ttl)
        await self.pass_time(self.ttl * 1.5)
        after_lapse = await store.acquire(tenant, "run", "w3", ttl=30)
        assert first.fence < again.fence < after_release.fence < after_lapse.fence

    async def test_release_frees_the_run_and_keeps_the_fence(
        self, store: LeaseStore, tenant: str
    ) -> None:
        lease = await store.acquire(tenant, "run", "w1", ttl=30)
        await store.release(lease)
        assert await store.held(tenant, "run") is None
        assert (await store.acquire(tenant, "run", "w2", ttl=30)).fence > lease.fence

    async def test_a_lease_lapses_on_the_store_clock(self, store: LeaseStore, tenant: str) -> None:
        await store.acquire(tenant, "run", "w1", ttl=self.ttl)
        await self.pass_time(self.ttl * 1.5)
        assert await store.held(tenant, "run") is None
        taken = await store.acquire(tenant, "run", "w2", ttl=30)
        assert taken.holder == "w2"

    async def test_renewal_keeps_the_fence_and_extends(
        self, store: LeaseStore, tenant: str
    ) -> None:
        lease = await store.acquire(tenant, "run", "w1", ttl=self.ttl)
        await self.pass_time(self.ttl * 0.6)
        renewed = await store.renew(lease, ttl=self.ttl)
        assert renewed.fence == lease.fence
        assert renewed.remaining > self.ttl * 0.6
        await self.pass_time(self.ttl * 0.6)
        held = await store.held(tenant, "run")
        assert held is not None
        assert held.holder == "w1"

    async def test_a_superseded_holder_cannot_renew_or_release(
        self, store: LeaseStore, tenant: str
    ) -> None:
        old = await store.acquire(tenant, "run", "w1", ttl=self.ttl)
        await self.pass_time(self.ttl * 1.5)
        new = await store.acquire(tenant, "run", "w2", ttl=30)
        assert old.superseded_by(new)
        assert not new.superseded_by(old)
        with pytest.raises(RunLeaseError):
            await store.renew(old, ttl=30)
        await store.release(old)
        held = await store.held(tenant, "run")
        assert held is not None
        assert held.fence == new.fence

    async def test_a_lapsed_lease_cannot_be_renewed(self, store: LeaseStore, tenant: str) -> None:
        lease = await store.acquire(tenant, "run", "w1", ttl=self.ttl)
        await self.pass_time(self.ttl * 1.5)
        with pytest.raises(RunLeaseError):
            await store.renew(lease, ttl=30)

    async def test_tenants_are_isolated(
        self, store: LeaseStore, tenant: str, other_tenant: str
    ) -> None:
        await store.acquire(tenant, "run", "w1", ttl=30)
        theirs = await store.acquire(other_tenant, "run", "w2", ttl=30)
        assert theirs.holder == "w2"

    async def test_hostile_ids_never_collide(self, store: LeaseStore, tenant: str) -> None:
        for index, run_id in enumerate(HOSTILE_IDS):
            await store.acquire(tenant, run_id, f"w{index}", ttl=30)
        for index, run_id in enumerate(HOSTILE_IDS):
            held = await store.held(tenant, run_id)
            assert held is not None, run_id
            assert (held.run_id, held.holder) == (run_id, f"w{index}")

    async def test_concurrent_acquisitions_yield_one_holder(
        self, store: LeaseStore, tenant: str
    ) -> None:
        results = await asyncio.gather(
            *(store.acquire(tenant, "contended", f"w{i}", ttl=30) for i in range(20)),
            return_exceptions=True,
        )
        winners = [r for r in results if not isinstance(r, BaseException)]
        losers = [r for r in results if isinstance(r, BaseException)]
        assert len(winners) == 1
        assert all(isinstance(r, RunLeaseError) for r in losers)
        assert all(r.holder == winners[0].holder for r in losers if isinstance(r, RunLeaseError))

    async def test_ids_as_long_as_the_limit_are_kept(self, store: LeaseStore, tenant: str) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        lease = await store.acquire(tenant, run_id, "w1", ttl=30)
        held = await store.held(tenant, run_id)
        assert held is not None
        assert (held.tenant, held.run_id, held.fence) == (tenant, run_id, lease.fence)
        await store.release(lease)

    async def test_ids_no_store_can_key_on_are_refused(self, store: LeaseStore) -> None:
        await refuses_unusable_ids(lambda t, r: store.acquire(t, r, "w1", ttl=30))
        await refuses_unusable_ids(store.held)
