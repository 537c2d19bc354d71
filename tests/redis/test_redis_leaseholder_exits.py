"""A ``Leaseholder``'s exit on Redis always returns, and hands the lease back, even when the
cancellation of a renewal in flight is swallowed: by redis-py itself (``swallow`` off), or on
every renewal (on). Before the exit stopped its renewals for good, one exit in two of this
campaign hung here, the renewal carrying on for ever (``tests/support/leaseholder_exits``)."""

from __future__ import annotations

import pytest

from agentrun import open_backend
from tests.support.leaseholder_exits import assert_every_exit_returns
from tests.support.redis_server import RedisServer


@pytest.mark.parametrize("swallow", [False, True], ids=["as-redis-py-does", "every-renewal"])
async def test_thousands_of_exits_mid_renewal_all_return_and_release(
    single_server: RedisServer, tenant: str, swallow: bool
) -> None:
    async with await open_backend(single_server.url) as backend:
        await assert_every_exit_returns(backend.leases, tenant, swallow=swallow)
