"""A ``Leaseholder``'s exit on SQLite always returns, and hands the lease back, whether the
cancellation of a renewal in flight reaches the store (``swallow`` off) or is swallowed, as
redis-py can, on every renewal (on); see ``tests/support/leaseholder_exits``."""

from __future__ import annotations

import pytest

from agentrun import Backend
from tests.support.leaseholder_exits import assert_every_exit_returns


@pytest.mark.parametrize("swallow", [False, True], ids=["as-sqlite-does", "every-renewal"])
async def test_thousands_of_exits_mid_renewal_all_return_and_release(
    backend: Backend, tenant: str, swallow: bool
) -> None:
    await assert_every_exit_returns(backend.leases, tenant, swallow=swallow)
