"""``CheckpointStoreConformance``: one frontier per run, last write wins within a fence, a lower
fence is refused, fences never fall (``forget`` included), tenants and hostile ids isolated."""

from __future__ import annotations

import json

import pytest

from agentrun._backend import CheckpointStore
from agentrun._errors import StaleFenceError
from agentrun._identifiers import MAX_ID_BYTES
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest


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
