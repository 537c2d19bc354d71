"""``LedgerConformance``: charges counted once per id, a budget that refuses whole charges,
fenced writes, isolated runs.

``ChargeListerConformance``, for a ledger that is also a ``ChargeLister``: it lists a run's
charges, each once with the micros it was counted with, by charge id in code point order,
nothing of another run or tenant, no charge it refused, nothing of a forgotten run, the charges
a boundary commit counted as well, and every id it keeps as it was written.
"""

from __future__ import annotations

import time

import pytest

from agentrun._backend import StoreSet
from agentrun._commits import BoundaryCommit, Charge
from agentrun._errors import BudgetExceededError, ConfigurationError, StaleFenceError
from agentrun._identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun._ledger import ChargeLister, Ledger
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest


class LedgerConformance(ConformanceBase):
    role = "ledger"

    async def test_charges_add_up_once_each(self, store: Ledger, tenant: str) -> None:
        assert await store.spent(tenant, "run") == 0
        assert await store.charge(tenant, "run", "c1", 100, budget=None, fence=1) == 100
        assert await store.charge(tenant, "run", "c2", 50, budget=None, fence=1) == 150
        assert await store.charge(tenant, "run", "c1", 100, budget=None, fence=1) == 150
        assert await store.spent(tenant, "run") == 150

    async def test_a_charge_over_budget_is_refused_whole(self, store: Ledger, tenant: str) -> None:
        await store.charge(tenant, "run", "c1", 900, budget=1000, fence=1)
        with pytest.raises(BudgetExceededError) as caught:
            await store.charge(tenant, "run", "c2", 200, budget=1000, fence=1)
        assert (caught.value.spent, caught.value.charge, caught.value.budget) == (900, 200, 1000)
        assert await store.spent(tenant, "run") == 900
        assert await store.charge(tenant, "run", "c3", 100, budget=1000, fence=1) == 1000

    async def test_refuses_a_lower_fence(self, store: Ledger, tenant: str) -> None:
        await store.charge(tenant, "run", "c1", 1, budget=None, fence=2)
        with pytest.raises(StaleFenceError):
            await store.charge(tenant, "run", "c2", 1, budget=None, fence=1)
        assert await store.spent(tenant, "run") == 1

    async def test_runs_are_isolated_and_forgotten(
        self, store: Ledger, tenant: str, other_tenant: str
    ) -> None:
        await store.charge(tenant, "run", "c1", 10, budget=None, fence=1)
        await store.charge(other_tenant, "run", "c1", 20, budget=None, fence=1)
        await store.charge(tenant, "run:x", "c1", 30, budget=None, fence=1)
        await store.forget(tenant, "run")
        assert await store.spent(tenant, "run") == 0
        assert await store.spent(other_tenant, "run") == 20
        assert await store.spent(tenant, "run:x") == 30

    charges_before: int = 200_000
    """How many charges ``test_a_charge_costs_the_same_however_many_came_before`` puts on a run."""

    async def preload_charges(self, store: Ledger, tenant: str, run_id: str, count: int) -> None:
        """Give the run ``count`` charges of one micro each, as fast as the store allows.

        This default goes through ``charge`` and so takes as long as ``count`` charges do;
        override it with the store's bulk write (the suites for the kit's stores do).
        """
        for index in range(count):
            await store.charge(tenant, run_id, f"preloaded-{index}", 1, budget=None, fence=1)

    async def test_a_charge_costs_the_same_however_many_came_before(
        self, store: Ledger, tenant: str
    ) -> None:
        """A charge must not re-read the run's earlier charges: summing them at every charge
        makes a run's charges cost the square of their number."""
        await self.preload_charges(store, tenant, "long", self.charges_before)
        for run_id in ("long", "short"):  # whatever a store sets up on a run's first charge
            await store.charge(tenant, run_id, "first", 1, budget=10**12, fence=1)
        long, short = await _fastest_charge_seconds(store, tenant, ("long", "short"))
        assert long < 4 * short + 0.00002, (
            f"a charge on a run with {self.charges_before} charges took {long * 1000:.3f} ms, "
            f"on a run with one {short * 1000:.3f} ms"
        )
        assert await store.spent(tenant, "long") == self.charges_before + 1 + _TIMED

    async def test_ids_as_long_as_the_limit_are_kept(self, store: Ledger, tenant: str) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        charge_id = longest(MAX_KEY_BYTES, "charge")
        assert await store.charge(tenant, run_id, charge_id, 7, budget=None, fence=1) == 7
        assert await store.spent(tenant, run_id) == 7
        await store.forget(tenant, run_id)

    async def test_ids_no_store_can_key_on_are_refused(self, store: Ledger, tenant: str) -> None:
        await refuses_unusable_ids(lambda t, r: store.charge(t, r, "c1", 1, budget=None, fence=1))
        await refuses_unusable_ids(store.spent)
        await refuses_unusable_ids(store.forget)
        with pytest.raises(ConfigurationError, match=r"^charge id"):
            await store.charge(tenant, "run", "c" * (MAX_KEY_BYTES + 1), 1, budget=None, fence=1)
        assert await store.spent(tenant, "run") == 0


_TIMED = 25


async def _fastest_charge_seconds(
    store: Ledger, tenant: str, run_ids: tuple[str, str]
) -> tuple[float, float]:
    """The fastest of ``_TIMED`` charges on each run, the runs' charges taken in turn.

    Taking turns puts a busy machine's pauses on both runs alike, and the fastest charge is the
    one nothing else delayed: a store that re-reads the run's charges cannot be fast even once,
    so the comparison stays sharp while a median of charges under load made it flaky."""
    took: dict[str, list[float]] = {run_id: [] for run_id in run_ids}
    for index in range(_TIMED):
        for run_id in run_ids:
            started = time.perf_counter()
            await store.charge(tenant, run_id, f"timed-{index}", 1, budget=10**12, fence=1)
            took[run_id].append(time.perf_counter() - started)
    first, second = run_ids
    return min(took[first]), min(took[second])


class ChargeListerConformance(ConformanceBase):
    """For a ledger that lists the charges it counted for a run (``ChargeLister``).

    The order is asserted on ids that code point order and a language's order sort apart
    (``B`` and ``a``, ``model:e:10`` and ``model:e:2``): every ledger lists by code point.
    """

    role = "ledger"

    async def test_lists_a_runs_charges_by_charge_id(
        self, store: Ledger, tenant: str, other_tenant: str
    ) -> None:
        assert isinstance(store, ChargeLister), "the ledger has no charges(tenant, run_id)"
        assert await store.charges(tenant, "run") == ()
        written = {
            "model:e:2": 20,
            "model:e:10": 100,
            "model:e:1": 10,
            "a": 0,
            "B": 2**53 + 1,  # more than a double holds exactly
            "é": 7,
        }
        for charge_id, micros in written.items():
            await store.charge(tenant, "run", charge_id, micros, budget=None, fence=1)
        await store.charge(tenant, "other", "model:e:1", 5, budget=None, fence=1)
        await store.charge(other_tenant, "run", "model:e:1", 6, budget=None, fence=1)
        assert await store.charges(tenant, "run") == tuple(sorted(written.items()))
        assert await store.charges(tenant, "other") == (("model:e:1", 5),)
        assert await store.charges(other_tenant, "run") == (("model:e:1", 6),)
        listed = await store.charges(tenant, "run")
        assert sum(micros for _, micros in listed) == await store.spent(tenant, "run")

    async def test_a_repeated_charge_is_listed_once_with_its_first_micros(
        self, store: Ledger, tenant: str
    ) -> None:
        assert isinstance(store, ChargeLister)
        await store.charge(tenant, "run", "model:e:0", 100, budget=None, fence=1)
        await store.charge(tenant, "run", "model:e:0", 999, budget=None, fence=1)
        await store.charge(tenant, "run", "model:e:0", 100, budget=1000, fence=1)
        assert await store.charges(tenant, "run") == (("model:e:0", 100),)

    async def test_a_refused_charge_is_not_listed(self, store: Ledger, tenant: str) -> None:
        assert isinstance(store, ChargeLister)
        await store.charge(tenant, "run", "c1", 900, budget=1000, fence=2)
        with pytest.raises(BudgetExceededError):
            await store.charge(tenant, "run", "c2", 200, budget=1000, fence=2)
        with pytest.raises(StaleFenceError):
            await store.charge(tenant, "run", "c3", 1, budget=None, fence=1)
        assert await store.charges(tenant, "run") == (("c1", 900),)
        await store.charge(tenant, "run", "c2", 100, budget=1000, fence=2)
        assert await store.charges(tenant, "run") == (("c1", 900), ("c2", 100))

    async def test_a_forgotten_run_lists_nothing(self, store: Ledger, tenant: str) -> None:
        assert isinstance(store, ChargeLister)
        for charge_id in ("c1", "c2"):
            await store.charge(tenant, "run", charge_id, 10, budget=None, fence=1)
        await store.charge(tenant, "run:x", "c1", 30, budget=None, fence=1)
        await store.forget(tenant, "run")
        assert await store.charges(tenant, "run") == ()
        assert await store.charges(tenant, "run:x") == (("c1", 30),)
        await store.forget(tenant, "never-charged")
        assert await store.charges(tenant, "never-charged") == ()
        await store.charge(tenant, "run", "c2", 5, budget=None, fence=1)
        assert await store.charges(tenant, "run") == (("c2", 5),)

    async def test_charges_a_commit_counted_are_listed(
        self, store: Ledger, backend: StoreSet, tenant: str
    ) -> None:
        """A boundary commit counts its charge in the ledger's own keeping, so the listing holds
        it beside those ``charge`` counted, once, with the micros it was first counted with."""
        assert isinstance(store, ChargeLister)
        commits = getattr(backend, "commits", None)
        if commits is None:
            pytest.skip("the backend commits each store on its own (no StoreSet.commits)")
        await commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":1}', charge=Charge("m:1", 40)))
        await store.charge(tenant, "run", "m:2", 2, budget=None, fence=1)
        await commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":2}', charge=Charge("m:1", 9)))
        await commits.commit(BoundaryCommit(tenant, "run", 1, b'{"f":3}', charge=Charge("m:3", 3)))
        await store.charge(tenant, "run", "m:3", 8, budget=None, fence=1)
        assert await store.charges(tenant, "run") == (("m:1", 40), ("m:2", 2), ("m:3", 3))
        assert await store.spent(tenant, "run") == 45
        await store.forget(tenant, "run")
        assert await store.charges(tenant, "run") == ()

    async def test_awkward_ids_are_listed_as_written(self, store: Ledger, tenant: str) -> None:
        assert isinstance(store, ChargeLister)
        # Every id as a charge id too, as long as a charge id may be.
        charge_ids = sorted({run_id[:MAX_KEY_BYTES] for run_id in HOSTILE_IDS})
        for index, charge_id in enumerate(charge_ids):
            await store.charge(tenant, "run", charge_id, index, budget=None, fence=1)
        assert await store.charges(tenant, "run") == tuple(
            (charge_id, index) for index, charge_id in enumerate(charge_ids)
        )
        for index, run_id in enumerate(HOSTILE_IDS):
            await store.charge(tenant, run_id, run_id[:MAX_KEY_BYTES], index, budget=None, fence=1)
            await store.charge(run_id, tenant, "swapped", index, budget=None, fence=1)
        for index, run_id in enumerate(HOSTILE_IDS):
            listed = await store.charges(tenant, run_id)
            assert listed == ((run_id[:MAX_KEY_BYTES], index),), run_id
            assert await store.charges(run_id, tenant) == (("swapped", index),), run_id

        # Runs that differ by what a key encoding could lose, each with its own charges.
        await store.charge(f"{tenant}:a", "b", "left", 1, budget=None, fence=1)
        await store.charge(tenant, "a:b", "right", 2, budget=None, fence=1)
        await store.charge(f"{tenant}{{a}}", "{b}", "braced", 3, budget=None, fence=1)
        assert await store.charges(f"{tenant}:a", "b") == (("left", 1),)
        assert await store.charges(f"{tenant}{{a}}", "{b}") == (("braced", 3),)
        assert ("right", 2) in await store.charges(tenant, "a:b")

        longest_run = (longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run"))
        charge_id = longest(MAX_KEY_BYTES, "charge")
        await store.charge(*longest_run, charge_id, 11, budget=None, fence=1)
        await store.charge(*longest_run, "走る 🚀", 12, budget=None, fence=1)
        assert await store.charges(*longest_run) == ((charge_id, 11), ("走る 🚀", 12))
        await store.forget(*longest_run)

    async def test_ids_no_store_can_key_on_are_refused(self, store: Ledger) -> None:
        assert isinstance(store, ChargeLister)
        await refuses_unusable_ids(store.charges)
