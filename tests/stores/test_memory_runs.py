"""Whole runs, crashes and resumes on the memory stores (``tests.support.run_scenarios``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import pytest

from agentrun import Backend
from agentrun.stores._memory import MemoryBackend
from tests.support.run_scenarios import RunScenarios


def _everything(value: object, seen: set[int]) -> Iterator[str | bytes]:
    """Every string and bytes held by ``value``, however deep (dictionary keys included)."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, str | bytes):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _everything(key, seen)
            yield from _everything(item, seen)
    elif isinstance(value, list | tuple | set | frozenset):
        for item in value:
            yield from _everything(item, seen)
    elif dataclasses.is_dataclass(value) or hasattr(value, "__dict__"):
        yield from _everything(vars(value), seen)


class TestMemoryRuns(RunScenarios):
    @pytest.fixture
    def stores(self) -> MemoryBackend:
        return MemoryBackend()

    async def kept(self, stores: Backend, tenant: str) -> list[str | bytes]:
        assert isinstance(stores, MemoryBackend)
        held = (
            stores.checkpoints,
            stores.leases,
            stores.idempotency,
            stores.history,
            stores.ledger,
        )
        return list(_everything([vars(store) for store in held], set()))
