"""``QuotaStoreConformance``: admissions up to a limit and no further, however many race for them;
each run counted once; superseded fences refused; budgets reserved only while they fit, settled
exactly, and forgotten when their window expires on the store's clock.

The races are run on ``racers``: stores on connections of their own to the same data, as the
replicas of an operator are. A process-local store has only itself (the default); a store
reached over a URL overrides the fixture with several backends opened on it
(``quota_stores_on``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agentrun._backend import Backend
from agentrun._errors import ConfigurationError, StaleFenceError
from agentrun._identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun._quotas import Allowance, QuotaStore, Spend, Spending
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest

SCOPE = "namespace-a"
WINDOW = "2026-12-02"


def spend(micros: int, tokens: int = 0) -> Spend:
    return Spend(micros=micros, tokens=tokens)


def spending(spent: Spend, reserved: Spend) -> Spending:
    return Spending(spent=spent, reserved=reserved)


@contextlib.asynccontextmanager
async def quota_stores_on(
    opening: Callable[[], Awaitable[Backend]], count: int = 4
) -> AsyncIterator[list[QuotaStore]]:
    """The quota stores of ``count`` backends, each opened by ``opening`` (``lambda:
    open_backend(url)``) with connections of its own, closed on the way out: what a ``racers``
    fixture of a store reached over a URL yields."""
    async with contextlib.AsyncExitStack() as opened:
        backends = [await opened.enter_async_context(await opening()) for _ in range(count)]
        yield [backend.quotas for backend in backends]


class QuotaStoreConformance(ConformanceBase):
    role = "quotas"

    @pytest.fixture
    def racers(self, store: QuotaStore) -> list[QuotaStore]:
        """Stores on connections of their own to the same data, for the races; override for a
        store reached over a URL (``quota_stores_on``)."""
        return [store]

    async def test_admits_up_to_the_limit_then_refuses(
        self, store: QuotaStore, tenant: str
    ) -> None:
        for run_id in ("r1", "r2", "r3"):
            assert await store.admit(tenant, SCOPE, run_id, fence=1, limit=3)
        assert not await store.admit(tenant, SCOPE, "r4", fence=1, limit=3)
        assert await store.admitted(tenant, SCOPE) == {"r1": 1, "r2": 1, "r3": 1}
        assert not await store.admit(tenant, SCOPE, "r5", fence=1, limit=0)

    async def test_a_run_admitted_again_is_counted_once(
        self, store: QuotaStore, tenant: str
    ) -> None:
        assert await store.admit(tenant, SCOPE, "r1", fence=1, limit=2)
        assert await store.admit(tenant, SCOPE, "r1", fence=1, limit=2)
        assert await store.admit(tenant, SCOPE, "r1", fence=7, limit=2)
        assert await store.admit(tenant, SCOPE, "r2", fence=1, limit=2)
        assert not await store.admit(tenant, SCOPE, "r3", fence=1, limit=2)
        assert await store.admitted(tenant, SCOPE) == {"r1": 7, "r2": 1}

    async def test_a_superseded_fence_is_refused_on_admit_and_leave(
        self, store: QuotaStore, tenant: str
    ) -> None:
        assert await store.admit(tenant, SCOPE, "r1", fence=5, limit=1)
        with pytest.raises(StaleFenceError) as admitting:
            await store.admit(tenant, SCOPE, "r1", fence=4, limit=1)
        assert (admitting.value.fence, admitting.value.current) == (4, 5)
        assert (admitting.value.tenant, admitting.value.run_id) == (tenant, "r1")
        with pytest.raises(StaleFenceError) as leaving:
            await store.leave(tenant, SCOPE, "r1", fence=4)
        assert (leaving.value.fence, leaving.value.current) == (4, 5)
        assert await store.admitted(tenant, SCOPE) == {"r1": 5}
        await store.leave(tenant, SCOPE, "r1", fence=6)
        assert await store.admitted(tenant, SCOPE) == {}

    async def test_leave_frees_a_place_and_is_idempotent(
        self, store: QuotaStore, tenant: str
    ) -> None:
        assert await store.admit(tenant, SCOPE, "r1", fence=1, limit=1)
        await store.leave(tenant, SCOPE, "r1", fence=1)
        await store.leave(tenant, SCOPE, "r1", fence=1)
        await store.leave(tenant, SCOPE, "never-admitted", fence=1)
        assert await store.admit(tenant, SCOPE, "r2", fence=1, limit=1)
        assert await store.admitted(tenant, SCOPE) == {"r2": 1}

    async def test_a_limit_lowered_below_the_count_admits_nobody_new(
        self, store: QuotaStore, tenant: str
    ) -> None:
        for run_id in ("r1", "r2", "r3"):
            assert await store.admit(tenant, SCOPE, run_id, fence=1, limit=3)
        assert not await store.admit(tenant, SCOPE, "r4", fence=1, limit=1)
        assert await store.admit(tenant, SCOPE, "r1", fence=1, limit=1)  # already in
        await store.leave(tenant, SCOPE, "r1", fence=1)
        await store.leave(tenant, SCOPE, "r2", fence=1)
        assert not await store.admit(tenant, SCOPE, "r4", fence=1, limit=1)
        await store.leave(tenant, SCOPE, "r3", fence=1)
        assert await store.admit(tenant, SCOPE, "r4", fence=1, limit=1)
        assert await store.admitted(tenant, SCOPE) == {"r4": 1}

    async def test_concurrent_admissions_never_exceed_the_limit(
        self, racers: list[QuotaStore], tenant: str
    ) -> None:
        admitted = await asyncio.gather(
            *(
                racers[index % len(racers)].admit(tenant, SCOPE, f"r{index}", fence=1, limit=5)
                for index in range(20)
            )
        )
        assert admitted.count(True) == 5
        recorded = await racers[0].admitted(tenant, SCOPE)
        assert sorted(recorded) == sorted(f"r{i}" for i, won in enumerate(admitted) if won)

    async def test_reserve_and_settle_add_up(self, store: QuotaStore, tenant: str) -> None:
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(0))
        limit = Allowance(micros=1_000, tokens=100)
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(300, 30), limit=limit, ttl=30)
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(200, 20), limit=limit, ttl=30)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(500, 50))
        await store.settle(
            tenant, SCOPE, WINDOW, reserved=spend(300, 30), used=spend(120, 12), ttl=30
        )
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(
            spend(120, 12), spend(200, 20)
        )
        # 120 spent + 200 reserved + 680 asked is the limit exactly: it fits.
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(680), limit=limit, ttl=30)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(
            spend(120, 12), spend(880, 20)
        )

    async def test_a_reservation_that_does_not_fit_changes_nothing(
        self, store: QuotaStore, tenant: str
    ) -> None:
        limit = Allowance(micros=100, tokens=10)
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(60, 6), limit=limit, ttl=30)
        assert not await store.reserve(tenant, SCOPE, WINDOW, ask=spend(41), limit=limit, ttl=30)
        assert not await store.reserve(tenant, SCOPE, WINDOW, ask=spend(1, 5), limit=limit, ttl=30)
        assert not await store.reserve(tenant, "other", WINDOW, ask=spend(101), limit=limit, ttl=30)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(60, 6))
        assert await store.spending(tenant, "other", WINDOW) == spending(spend(0), spend(0))
        tokens_only = Allowance(tokens=10)
        assert await store.reserve(
            tenant, SCOPE, WINDOW, ask=spend(10**12, 4), limit=tokens_only, ttl=30
        )
        unlimited = Allowance()
        assert await store.reserve(
            tenant, SCOPE, WINDOW, ask=spend(10**12, 10**9), limit=unlimited, ttl=30
        )

    async def test_settling_never_reserves_below_zero_and_always_counts_what_was_used(
        self, store: QuotaStore, tenant: str
    ) -> None:
        await store.settle(tenant, SCOPE, WINDOW, reserved=spend(50, 5), used=spend(70, 7), ttl=30)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(70, 7), spend(0))
        limit = Allowance(micros=100)
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(20, 2), limit=limit, ttl=30)
        await store.settle(tenant, SCOPE, WINDOW, reserved=spend(50, 1), used=spend(0), ttl=30)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(70, 7), spend(0, 1))
        assert not await store.reserve(tenant, SCOPE, WINDOW, ask=spend(31), limit=limit, ttl=30)

    async def test_concurrent_reservations_never_exceed_the_allowance(
        self, racers: list[QuotaStore], tenant: str
    ) -> None:
        limit = Allowance(micros=55, tokens=1_000)
        reserved = await asyncio.gather(
            *(
                racers[index % len(racers)].reserve(
                    tenant, SCOPE, WINDOW, ask=spend(10, 1), limit=limit, ttl=30
                )
                for index in range(20)
            )
        )
        assert reserved.count(True) == 5
        assert await racers[0].spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(50, 5))

    async def test_a_window_expires_on_the_store_clock_after_its_last_write(
        self, store: QuotaStore, tenant: str
    ) -> None:
        ttl, limit = self.ttl, Allowance(micros=100)
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(100), limit=limit, ttl=ttl)
        await self.pass_time(ttl * 0.5)
        await store.settle(tenant, SCOPE, WINDOW, reserved=spend(0), used=spend(0, 3), ttl=ttl)
        await self.pass_time(ttl * 0.7)
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0, 3), spend(100))
        assert not await store.reserve(tenant, SCOPE, WINDOW, ask=spend(1), limit=limit, ttl=ttl)
        await self.pass_time(ttl * 0.6)
        # A reservation never settled (its worker died) is held only until the window expires.
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(0))
        assert await store.reserve(tenant, SCOPE, WINDOW, ask=spend(100), limit=limit, ttl=30)

    async def test_forget_drops_the_scope_and_nothing_else(
        self, store: QuotaStore, tenant: str, other_tenant: str
    ) -> None:
        limit = Allowance()
        for who, scope in ((tenant, SCOPE), (tenant, "kept"), (other_tenant, SCOPE)):
            assert await store.admit(who, scope, "r1", fence=1, limit=1)
            for window in (WINDOW, "2026-12-03"):
                assert await store.reserve(who, scope, window, ask=spend(5), limit=limit, ttl=30)
        await store.forget(tenant, SCOPE)
        await store.forget(tenant, "never-used")
        assert await store.admitted(tenant, SCOPE) == {}
        for window in (WINDOW, "2026-12-03"):
            assert await store.spending(tenant, SCOPE, window) == spending(spend(0), spend(0))
            for who, scope in ((tenant, "kept"), (other_tenant, SCOPE)):
                assert await store.spending(who, scope, window) == spending(spend(0), spend(5))
        for who, scope in ((tenant, "kept"), (other_tenant, SCOPE)):
            assert await store.admitted(who, scope) == {"r1": 1}

    async def test_hostile_names_never_collide(self, store: QuotaStore, tenant: str) -> None:
        scopes = [name[:MAX_KEY_BYTES] for name in HOSTILE_IDS]
        for index, scope in enumerate(scopes):
            assert await store.admit(tenant, scope, scope, fence=index + 1, limit=1)
            assert await store.reserve(
                tenant, scope, scope, ask=spend(index), limit=Allowance(), ttl=30
            )
        for index, scope in enumerate(scopes):
            assert await store.admitted(tenant, scope) == {scope: index + 1}
            assert await store.spending(tenant, scope, scope) == spending(spend(0), spend(index))

    async def test_names_as_long_as_the_limit_are_kept(
        self, store: QuotaStore, tenant: str
    ) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        scope, window = longest(MAX_KEY_BYTES, "scope"), longest(MAX_KEY_BYTES, "window")
        assert await store.admit(tenant, scope, run_id, fence=1, limit=1)
        assert await store.admitted(tenant, scope) == {run_id: 1}
        assert await store.reserve(tenant, scope, window, ask=spend(1), limit=Allowance(), ttl=30)
        assert await store.spending(tenant, scope, window) == spending(spend(0), spend(1))
        await store.forget(tenant, scope)

    async def test_names_no_store_can_key_on_are_refused(
        self, store: QuotaStore, tenant: str
    ) -> None:
        await refuses_unusable_ids(lambda t, r: store.admit(t, SCOPE, r, fence=1, limit=1))
        await refuses_unusable_ids(lambda t, r: store.leave(t, SCOPE, r, fence=1))
        for scope in ("", "s" * (MAX_KEY_BYTES + 1), "scope-\x00"):
            with pytest.raises(ConfigurationError, match=r"^quota scope"):
                await store.admit(tenant, scope, "r1", fence=1, limit=1)
            with pytest.raises(ConfigurationError, match=r"^quota scope"):
                await store.admitted(tenant, scope)
        for window in ("", "w" * (MAX_KEY_BYTES + 1), "window-\udcff"):
            with pytest.raises(ConfigurationError, match=r"^budget window"):
                await store.spending(tenant, SCOPE, window)
            with pytest.raises(ConfigurationError, match=r"^budget window"):
                await store.reserve(tenant, SCOPE, window, ask=spend(1), limit=Allowance(), ttl=30)
        with pytest.raises(ConfigurationError, match="limit"):
            await store.admit(tenant, SCOPE, "r1", fence=1, limit=-1)
        for ttl in (0.0, -1.0, float("nan")):
            with pytest.raises(ConfigurationError, match="ttl"):
                await store.settle(tenant, SCOPE, WINDOW, reserved=spend(0), used=spend(1), ttl=ttl)
        assert await store.admitted(tenant, SCOPE) == {}
        assert await store.spending(tenant, SCOPE, WINDOW) == spending(spend(0), spend(0))
