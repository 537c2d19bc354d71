"""People's decisions through the kit: errors name the kit's own arguments, not a CLI's flags."""

from __future__ import annotations

import pytest

from agentrun._decisions import resolve
from agentrun._errors import ConfigurationError
from agentrun._frontier import Boundary
from agentrun.stores._memory import MemoryBackend
from tests.support.frontiers import frontier, pending


async def test_an_answer_that_a_call_ran_needs_its_result(backend: MemoryBackend) -> None:
    checkpoint = frontier(boundary=Boundary.AFTER_MODEL_CALL, pending=(pending("c1"),))
    with pytest.raises(ConfigurationError, match=r"needs its result: pass result=") as refused:
        await resolve(backend.idempotency, checkpoint, "c1", ran=True, result=None, by="bob")
    assert "--" not in str(refused.value)


async def test_an_answer_for_a_call_that_is_not_outstanding_lists_those_that_are(
    backend: MemoryBackend,
) -> None:
    checkpoint = frontier(boundary=Boundary.AFTER_MODEL_CALL, pending=(pending("c1"),))
    with pytest.raises(ConfigurationError, match=r"no outstanding call 'c9' \(outstanding: c1\)"):
        await resolve(backend.idempotency, checkpoint, "c9", ran=False, result=None, by="bob")
