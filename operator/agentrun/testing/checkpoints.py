"""``CheckpointStoreConformance``: one frontier per run, last write wins within a fence, a lower
fence is refused, fences never fall (``forget`` included), tenants and hostile ids isolated.

``RunListerConformance``, for a checkpoint store that is also a ``RunLister``: it lists the runs
it holds a frontier for, all or one tenant's, in order and page by page, each once, a forgotten
run no more, and every id it keeps as it was written.
"""

from __future__ import annotations

import json

import pytest

from agentrun._backend import CheckpointStore, RunLister
from agentrun._errors import ConfigurationError, StaleFenceError
from agentrun._identifiers import MAX_ID_BYTES
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest

Run = tuple[str, str]


def _payload(label: str, size: int = 0) -> bytes:
    return json.dumps({"format_version": 1, "label": label, "pad": "x" * size}).encode()


def _same(stored: bytes | None, payload: bytes) -> bool:
    return stored is not None and json.loads(stored) == json.loads(payload)


class CheckpointStoreConformance(ConformanceBase):
    role = "checkpoints"

    async def test_nothing_before_the_first_write(
        self, store: CheckpointStore, tenant: str
    ) -> None:
        assert await store.latest(tenant, "run") is None

    async def test_reads_back_what_was_written(self, store: CheckpointStore, tenant: str) -> None:
        await store.put(tenant, "run", _payload("one"), fence=1)
        assert _same(await store.latest(tenant, "run"), _payload("one"))

    async def test_keeps_one_frontier_per_run(self, store: CheckpointStore, tenant: str) -> None:
        for label in ("one", "two", "three"):
            await store.put(tenant, "run", _payload(label), fence=1)
        assert _same(await store.latest(tenant, "run"), _payload("three"))

    async def test_higher_fence_overwrites(self, store: CheckpointStore, tenant: str) -> None:
        await store.put(tenant, "run", _payload("old"), fence=1)
        await store.put(tenant, "run", _payload("new"), fence=2)
        assert _same(await store.latest(tenant, "run"), _payload("new"))

    async def test_refuses_a_lower_fence(self, store: CheckpointStore, tenant: str) -> None:
        await store.put(tenant, "run", _payload("current"), fence=5)
        with pytest.raises(StaleFenceError) as caught:
            await store.put(tenant, "run", _payload("stale"), fence=4)
        assert caught.value.fence == 4
        assert caught.value.current == 5
        assert _same(await store.latest(tenant, "run"), _payload("current"))

    async def test_forget_drops_the_frontier_but_not_the_fence(
        self, store: CheckpointStore, tenant: str
    ) -> None:
        await store.put(tenant, "run", _payload("one"), fence=3)
        await store.forget(tenant, "run")
        assert await store.latest(tenant, "run") is None
        with pytest.raises(StaleFenceError):
            await store.put(tenant, "run", _payload("stale"), fence=2)
        await store.forget(tenant, "never-written")

    async def test_tenants_are_isolated(
        self, store: CheckpointStore, tenant: str, other_tenant: str
    ) -> None:
        await store.put(tenant, "run", _payload("mine"), fence=7)
        assert await store.latest(other_tenant, "run") is None
        await store.put(other_tenant, "run", _payload("theirs"), fence=1)
        assert _same(await store.latest(tenant, "run"), _payload("mine"))
        assert _same(await store.latest(other_tenant, "run"), _payload("theirs"))

    async def test_hostile_ids_never_collide(self, store: CheckpointStore, tenant: str) -> None:
        for run_id in HOSTILE_IDS:
            await store.put(tenant, run_id, _payload(run_id), fence=1)
            await store.put(run_id, tenant, _payload("swapped " + run_id), fence=1)
        for run_id in HOSTILE_IDS:
            assert _same(await store.latest(tenant, run_id), _payload(run_id)), run_id
            assert _same(await store.latest(run_id, tenant), _payload("swapped " + run_id))

    async def test_separator_lookalikes_do_not_collide(
        self, store: CheckpointStore, tenant: str
    ) -> None:
        await store.put(f"{tenant}:a", "b", _payload("left"), fence=1)
        await store.put(tenant, "a:b", _payload("right"), fence=1)
        assert _same(await store.latest(f"{tenant}:a", "b"), _payload("left"))
        assert _same(await store.latest(tenant, "a:b"), _payload("right"))

    async def test_a_megabyte_round_trips(self, store: CheckpointStore, tenant: str) -> None:
        payload = _payload("big", 1 << 20)
        await store.put(tenant, "run", payload, fence=1)
        assert _same(await store.latest(tenant, "run"), payload)

    async def test_a_nul_character_round_trips(self, store: CheckpointStore, tenant: str) -> None:
        payload = json.dumps({"format_version": 1, "label": "a tool said \x00 here"}).encode()
        await store.put(tenant, "run", payload, fence=1)
        assert _same(await store.latest(tenant, "run"), payload)

    async def test_ids_as_long_as_the_limit_are_kept(
        self, store: CheckpointStore, tenant: str
    ) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        await store.put(tenant, run_id, _payload("long"), fence=1)
        assert _same(await store.latest(tenant, run_id), _payload("long"))
        await store.forget(tenant, run_id)

    async def test_ids_no_store_can_key_on_are_refused(self, store: CheckpointStore) -> None:
        await refuses_unusable_ids(lambda t, r: store.put(t, r, _payload("x"), fence=1))
        await refuses_unusable_ids(store.latest)
        await refuses_unusable_ids(store.forget)


async def _walk(store: RunLister, tenant: str | None = None, *, limit: int = 500) -> list[Run]:
    """Every run ``store`` lists (``tenant``'s only, if given), page after page."""
    walked: list[Run] = []
    after: Run | None = None
    while True:
        page = await store.runs(tenant, after=after, limit=limit)
        assert len(page) <= limit, (after, len(page))
        assert after not in page, after
        walked.extend(page)
        if len(page) < limit:
            return walked
        after = page[-1]


class RunListerConformance(ConformanceBase):
    """For a checkpoint store that lists the runs it holds a frontier for (``RunLister``).

    The suites' tests share one database and isolate themselves by tenant, so what is listed
    across tenants holds other tests' runs too: those are walked past, not counted. Orders are
    asserted on ids every collation orders alike (a PostgreSQL store lists in its collation's
    order); awkward ids are asserted listed, each once and as written.
    """

    role = "checkpoints"

    async def test_lists_the_runs_with_a_frontier_in_order(
        self, store: CheckpointStore, tenant: str, other_tenant: str
    ) -> None:
        assert isinstance(store, RunLister), "the store has no runs(tenant, after=, limit=)"
        await store.put(tenant, "run-b", _payload("b"), fence=1)
        await store.put(other_tenant, "run-c", _payload("c"), fence=1)
        await store.put(tenant, "run-a", _payload("a"), fence=1)
        assert await store.runs(tenant) == ((tenant, "run-a"), (tenant, "run-b"))
        assert await store.runs(other_tenant) == ((other_tenant, "run-c"),)
        assert await store.runs(f"{tenant}-none") == ()
        everything = await _walk(store)
        assert len(everything) == len(set(everything))
        assert [run for run in everything if run[0] in (tenant, other_tenant)] == [
            (other_tenant, "run-c"),
            (tenant, "run-a"),
            (tenant, "run-b"),
        ]

    async def test_pages_list_every_run_once(
        self, store: CheckpointStore, tenant: str, other_tenant: str
    ) -> None:
        assert isinstance(store, RunLister)
        ids = [f"run-{n:02d}" for n in range(7)]
        for run_id in reversed(ids):
            await store.put(tenant, run_id, _payload(run_id), fence=1)
        mine = [(tenant, run_id) for run_id in ids]
        assert await store.runs(tenant, limit=3) == tuple(mine[:3])
        assert await _walk(store, tenant, limit=3) == mine
        assert await _walk(store, tenant, limit=1) == mine
        assert await store.runs(tenant, after=mine[-1]) == ()
        # A cursor need not be a run; one in the tenant goes on within it, whatever is listed.
        assert await store.runs(tenant, after=(tenant, "run-025"), limit=2) == tuple(mine[3:5])
        assert await store.runs(after=(tenant, "run-02"), limit=2) == tuple(mine[3:5])
        # A cursor in a tenant before the one listed starts at its beginning; after it, nothing.
        assert await store.runs(tenant, after=(other_tenant, "zzz")) == tuple(mine)
        await store.put(other_tenant, "run", _payload("theirs"), fence=1)
        assert await store.runs(other_tenant, after=(tenant, "")) == ()

    async def test_a_forgotten_run_is_not_listed(self, store: CheckpointStore, tenant: str) -> None:
        assert isinstance(store, RunLister)
        for run_id in ("run-a", "run-b", "run-c"):
            await store.put(tenant, run_id, _payload(run_id), fence=1)
        await store.forget(tenant, "run-b")
        assert await store.runs(tenant) == ((tenant, "run-a"), (tenant, "run-c"))
        assert await store.runs(tenant, after=(tenant, "run-a"), limit=1) == ((tenant, "run-c"),)
        await store.forget(tenant, "run-a")
        await store.forget(tenant, "run-c")
        assert await store.runs(tenant) == ()
        await store.put(tenant, "run-b", _payload("again"), fence=1)
        assert await store.runs(tenant) == ((tenant, "run-b"),)

    async def test_awkward_ids_are_listed_as_written(
        self, store: CheckpointStore, tenant: str
    ) -> None:
        assert isinstance(store, RunLister)
        for run_id in HOSTILE_IDS:
            await store.put(tenant, run_id, _payload(run_id), fence=1)
        listed = await _walk(store, tenant, limit=5)
        assert len(listed) == len(set(listed)) == len(HOSTILE_IDS)
        assert set(listed) == {(tenant, run_id) for run_id in HOSTILE_IDS}

        # Tenants that differ from this one by what a key encoding or a pattern could lose.
        # Each lists its own runs and only those, and every tenant's are listed across tenants.
        kept: dict[str, set[Run]] = {tenant: {(tenant, run_id) for run_id in HOSTILE_IDS}}
        written = [(f"{tenant}{suffix}", "run") for suffix in ("*", "?", "[x]", "\\", "%3A")]
        written += [(f"{tenant}:a", "b"), (tenant, "a:b"), (f"{tenant}{{a}}", "{b}")]
        written += [
            (f"{tenant} é", "走る 🚀"),
            (longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")),
        ]
        for run in written:
            await store.put(*run, _payload(run[1]), fence=1)
            kept.setdefault(run[0], set()).add(run)
        for owner, runs in kept.items():
            assert set(await _walk(store, owner, limit=7)) == runs, owner
        everything = await _walk(store)
        assert len(everything) == len(set(everything))
        assert {run for run in everything if run[0] in kept} == {
            run for runs in kept.values() for run in runs
        }

    async def test_what_no_store_can_key_on_is_refused(self, store: CheckpointStore) -> None:
        assert isinstance(store, RunLister)
        await refuses_unusable_ids(lambda tenant, run_id: store.runs(after=(tenant, run_id)))
        await refuses_unusable_ids(
            lambda tenant, run_id: store.runs(tenant, after=(tenant, run_id))
        )
        for limit in (0, -1):
            with pytest.raises(ConfigurationError):
                await store.runs(limit=limit)
