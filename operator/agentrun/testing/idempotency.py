"""``IdempotencyStoreConformance``: one winner per key, outcomes that stick, claims only their
holder may close, fenced writes, claims that expire on the store's clock only when given a TTL."""

from __future__ import annotations

import asyncio

import pytest

from agentrun._errors import ConfigurationError, StaleFenceError
from agentrun._idempotency import ClaimState, IdempotencyStore
from agentrun._identifiers import MAX_ID_BYTES, MAX_KEY_BYTES
from agentrun.testing._base import ConformanceBase, refuses_unusable_ids
from agentrun.testing.hostile import HOSTILE_IDS, longest


class IdempotencyStoreConformance(ConformanceBase):
    role = "idempotency"

    async def test_first_claim_wins_and_reads_in_flight(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        claim = await store.begin(tenant, "run", "k", holder="w1", fence=1)
        assert claim.won
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert (record.state, record.holder, record.fence) == (ClaimState.IN_FLIGHT, "w1", 1)
        assert record.outcome is None

    async def test_a_held_key_is_not_claimed_again(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        again = await store.begin(tenant, "run", "k", holder="w2", fence=1)
        assert not again.won
        assert (again.record.holder, again.record.state) == ("w1", ClaimState.IN_FLIGHT)

    async def test_an_outcome_sticks(self, store: IdempotencyStore, tenant: str) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        await store.record(tenant, "run", "k", '{"seat": "12A"}', holder="w1", fence=1)
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert (record.state, record.outcome) == (ClaimState.COMPLETED, '{"seat": "12A"}')
        again = await store.begin(tenant, "run", "k", holder="w2", fence=2)
        assert not again.won
        assert again.record.outcome == '{"seat": "12A"}'

    async def test_abandon_frees_the_key(self, store: IdempotencyStore, tenant: str) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        await store.abandon(tenant, "run", "k", holder="w1", fence=1)
        assert await store.read(tenant, "run", "k") is None
        assert (await store.begin(tenant, "run", "k", holder="w2", fence=1)).won

    async def test_only_the_holder_closes_its_claim(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        with pytest.raises(StaleFenceError):
            await store.record(tenant, "run", "k", "x", holder="w2", fence=1)
        with pytest.raises(StaleFenceError):
            await store.abandon(tenant, "run", "k", holder="w2", fence=1)
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert (record.state, record.holder) == (ClaimState.IN_FLIGHT, "w1")

    async def test_refuses_writes_under_a_lower_fence(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "old", holder="w1", fence=1)
        await store.begin(tenant, "run", "new", holder="w2", fence=2)
        with pytest.raises(StaleFenceError):
            await store.begin(tenant, "run", "other", holder="w1", fence=1)
        with pytest.raises(StaleFenceError):
            await store.record(tenant, "run", "old", "late", holder="w1", fence=1)
        assert await store.read(tenant, "run", "other") is None
        record = await store.read(tenant, "run", "old")
        assert record is not None
        assert record.state is ClaimState.IN_FLIGHT

    async def test_a_claim_with_a_ttl_expires_on_the_store_clock(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        claim = await store.begin(tenant, "run", "k", holder="w1", fence=1, ttl=self.ttl)
        assert claim.record.remaining is not None
        assert 0 < claim.record.remaining <= self.ttl
        assert not (await store.begin(tenant, "run", "k", holder="w2", fence=1)).won
        await self.pass_time(self.ttl * 1.5)
        assert await store.read(tenant, "run", "k") is None
        assert (await store.begin(tenant, "run", "k", holder="w2", fence=1)).won

    async def test_a_claim_without_ttl_stays_in_flight(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        await self.pass_time(self.ttl * 1.5)
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert record.state is ClaimState.IN_FLIGHT
        assert record.remaining is None

    async def test_a_person_settles_an_undecidable_call(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "ran", holder="w1", fence=1)
        await store.begin(tenant, "run", "not", holder="w1", fence=1)
        await store.settle(tenant, "run", "ran", "booked 12A", by="alice")
        await store.settle(tenant, "run", "not", None, by="alice")
        ran = await store.read(tenant, "run", "ran")
        assert ran is not None
        assert (ran.state, ran.outcome) == (ClaimState.COMPLETED, "booked 12A")
        assert await store.read(tenant, "run", "not") is None

    async def test_an_answer_for_a_claim_is_written_only_while_that_claim_stands(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        # The first delivery said the call did not run; the newer holder claimed it again.
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        assert await store.settle(tenant, "run", "k", None, by="alice", claimed_by=("w1", 1))
        await store.begin(tenant, "run", "k", holder="w2", fence=2)
        # A late second delivery, of either answer, must leave the new claim alone.
        for outcome in (None, "booked 12A"):
            late = await store.settle(tenant, "run", "k", outcome, by="alice", claimed_by=("w1", 1))
            assert not late
            record = await store.read(tenant, "run", "k")
            assert record is not None
            assert (record.state, record.holder, record.fence) == (ClaimState.IN_FLIGHT, "w2", 2)
        assert await store.settle(tenant, "run", "k", "booked 12A", by="bob", claimed_by=("w2", 2))
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert (record.state, record.outcome) == (ClaimState.COMPLETED, "booked 12A")
        assert not await store.settle(tenant, "run", "k", None, by="bob", claimed_by=("w2", 2))
        assert not await store.settle(tenant, "run", "gone", None, by="bob", claimed_by=("w2", 2))

    async def test_runs_and_tenants_are_isolated(
        self, store: IdempotencyStore, tenant: str, other_tenant: str
    ) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        assert (await store.begin(tenant, "other-run", "k", holder="w2", fence=1)).won
        assert (await store.begin(other_tenant, "run", "k", holder="w3", fence=1)).won

    async def test_hostile_ids_never_collide(self, store: IdempotencyStore, tenant: str) -> None:
        for run_id in HOSTILE_IDS:
            key = run_id[:MAX_KEY_BYTES]  # the id as a key too, as long as a key may be
            assert (await store.begin(tenant, run_id, key, holder=run_id, fence=1)).won
        for run_id in HOSTILE_IDS:
            record = await store.read(tenant, run_id, run_id[:MAX_KEY_BYTES])
            assert record is not None, run_id
            assert record.holder == run_id

    async def test_forget_drops_every_record_of_the_run(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "a", holder="w1", fence=1)
        await store.begin(tenant, "run", "b", holder="w1", fence=1)
        await store.begin(tenant, "kept", "a", holder="w1", fence=1)
        await store.forget(tenant, "run")
        assert await store.read(tenant, "run", "a") is None
        assert await store.read(tenant, "run", "b") is None
        assert await store.read(tenant, "kept", "a") is not None

    async def test_concurrent_claims_yield_one_winner(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        claims = await asyncio.gather(
            *(store.begin(tenant, "run", "contended", holder=f"w{i}", fence=1) for i in range(20))
        )
        winners = [c for c in claims if c.won]
        assert len(winners) == 1
        assert all(c.record.holder == winners[0].record.holder for c in claims)

    async def test_a_claim_keeps_the_call_it_is_for(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        claim = await store.begin(
            tenant, "run", "k", holder="w1", fence=1, call_id="call_7", tool="send_sms"
        )
        assert (claim.record.call_id, claim.record.tool) == ("call_7", "send_sms")
        await store.record(tenant, "run", "k", "sent", holder="w1", fence=1)
        record = await store.read(tenant, "run", "k")
        assert record is not None
        assert (record.call_id, record.tool, record.outcome) == ("call_7", "send_sms", "sent")

    async def test_a_persons_answer_is_no_calls_record(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        """A person who answers for a claim accounts for it: the record stops naming the call."""
        for key in ("answered", "settled"):
            await store.begin(tenant, "run", key, holder="w1", fence=1, call_id=key, tool="t")
        assert await store.settle(
            tenant, "run", "answered", "sent", by="alice", claimed_by=("w1", 1)
        )
        await store.settle(tenant, "run", "settled", "sent", by="alice")
        for key in ("answered", "settled"):
            record = await store.read(tenant, "run", key)
            assert record is not None
            assert (record.state, record.call_id, record.tool) == (ClaimState.COMPLETED, None, None)

    async def test_records_lists_every_live_record_of_the_run(
        self, store: IdempotencyStore, tenant: str, other_tenant: str
    ) -> None:
        await store.begin(
            tenant, "run", "flight", holder="w1", fence=1, call_id="c1", tool="book_flight"
        )
        await store.record(tenant, "run", "flight", "seat 12A", holder="w1", fence=1)
        await store.begin(tenant, "run", "sms", holder="w1", fence=1, call_id="c2", tool="send_sms")
        await store.begin(tenant, "run", "lapsing", holder="w1", fence=1, ttl=self.ttl)
        await store.settle(tenant, "run", "approval", '{"approved": true}', by="alice")
        await store.begin(tenant, "run:x", "elsewhere", holder="w1", fence=1, call_id="c9")
        await store.begin(other_tenant, "run", "theirs", holder="w1", fence=1, call_id="c9")
        await self.pass_time(self.ttl * 1.5)
        listed = {record.key: record for record in await store.records(tenant, "run")}
        assert set(listed) == {"flight", "sms", "approval"}
        assert (listed["flight"].state, listed["flight"].call_id, listed["flight"].tool) == (
            ClaimState.COMPLETED,
            "c1",
            "book_flight",
        )
        assert (listed["sms"].state, listed["sms"].holder, listed["sms"].fence) == (
            ClaimState.IN_FLIGHT,
            "w1",
            1,
        )
        assert (listed["sms"].call_id, listed["sms"].tool) == ("c2", "send_sms")
        assert (listed["approval"].state, listed["approval"].call_id) == (
            ClaimState.COMPLETED,
            None,
        )
        assert await store.records(tenant, "never-claimed") == ()
        await store.forget(tenant, "run")
        assert await store.records(tenant, "run") == ()

    async def test_a_nul_character_in_an_outcome_round_trips(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await store.begin(tenant, "run", "k", holder="w1", fence=1)
        await store.record(tenant, "run", "k", "a tool said \x00 here", holder="w1", fence=1)
        await store.settle(tenant, "run", "person", "they typed \x00 too", by="alice")
        recorded = await store.read(tenant, "run", "k")
        settled = await store.read(tenant, "run", "person")
        assert recorded is not None
        assert settled is not None
        assert (recorded.outcome, settled.outcome) == (
            "a tool said \x00 here",
            "they typed \x00 too",
        )

    async def test_ids_as_long_as_the_limit_are_kept(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        tenant, run_id = longest(MAX_ID_BYTES, tenant), longest(MAX_ID_BYTES, "run")
        key = longest(MAX_KEY_BYTES, "key")
        assert (await store.begin(tenant, run_id, key, holder="w1", fence=1)).won
        await store.record(tenant, run_id, key, "done", holder="w1", fence=1)
        record = await store.read(tenant, run_id, key)
        assert record is not None
        assert record.outcome == "done"
        assert await store.settle(
            tenant, run_id, longest(MAX_KEY_BYTES, "approval"), "yes", by="alice"
        )
        assert len(await store.records(tenant, run_id)) == 2
        await store.forget(tenant, run_id)

    async def test_ids_no_store_can_key_on_are_refused(
        self, store: IdempotencyStore, tenant: str
    ) -> None:
        await refuses_unusable_ids(lambda t, r: store.begin(t, r, "k", holder="w1", fence=1))
        await refuses_unusable_ids(lambda t, r: store.record(t, r, "k", "x", holder="w", fence=1))
        await refuses_unusable_ids(lambda t, r: store.abandon(t, r, "k", holder="w1", fence=1))
        await refuses_unusable_ids(lambda t, r: store.read(t, r, "k"))
        await refuses_unusable_ids(store.records)
        await refuses_unusable_ids(lambda t, r: store.settle(t, r, "k", "x", by="alice"))
        await refuses_unusable_ids(store.forget)
        too_long = "k" * (MAX_KEY_BYTES + 1)
        with pytest.raises(ConfigurationError, match=r"^idempotency key"):
            await store.begin(tenant, "run", too_long, holder="w1", fence=1)
        with pytest.raises(ConfigurationError, match=r"^idempotency key"):
            await store.settle(tenant, "run", too_long, "x", by="alice")
        assert await store.records(tenant, "run") == ()
