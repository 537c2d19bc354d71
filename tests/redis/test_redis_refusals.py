"""What Redis refuses is not retried (``classify.REDIS``): a key of the wrong type, a command
the ACL user may not run, a script's write past ``maxmemory`` under ``noeviction``.

Each is an error reply the server gives again to the same call until a person changes something;
reported retryable, as every reply was, a caller retried it for ever.
"""

from __future__ import annotations

import pytest

from agentrun import Backend, open_backend
from agentrun._errors import StoreRefusedError
from agentrun.stores._redis._shared import DEFAULT_PREFIX, RunKeys
from tests.support.ports import LOOPBACK
from tests.support.redis_server import RedisServer


async def test_a_key_of_the_wrong_type_is_a_refusal(own_server: RedisServer) -> None:
    keys = RunKeys.of(DEFAULT_PREFIX, "acme", "run-1")
    own_server.cli("set", keys.claims, "not a hash")
    own_server.cli("hset", keys.checkpoint, "not", "a string")
    async with await open_backend(own_server.url) as backend:
        for call in (
            backend.idempotency.begin("acme", "run-1", "k", holder="w", fence=1),  # a script
            backend.checkpoints.latest("acme", "run-1"),  # a plain command
        ):
            with pytest.raises(StoreRefusedError, match="WRONGTYPE") as refused:
                await call
            assert not refused.value.retryable


async def test_a_command_the_user_may_not_run_is_a_refusal(own_server: RedisServer) -> None:
    own_server.cli("acl", "setuser", "kit", "on", ">secret", "~*", "&*", "+@all", "-evalsha")
    async with await open_backend(f"redis://kit:secret@{LOOPBACK}:{own_server.port}/0") as backend:
        with pytest.raises(StoreRefusedError, match="evalsha") as refused:
            await backend.leases.acquire("acme", "run-1", "w", ttl=30)
        assert not refused.value.retryable


async def test_a_script_past_maxmemory_under_noeviction_is_a_refusal(
    own_server: RedisServer, own_backend: Backend
) -> None:
    """A lease acquisition is a script alone (a put, ``test_redis_checkpoints``, is a ``SET``
    first): Redis refuses its first write with ``OOM`` too."""
    own_server.cli("config", "set", "maxmemory", "1")
    try:
        with pytest.raises(StoreRefusedError, match="maxmemory") as refused:
            await own_backend.leases.acquire("acme", "run-1", "w", ttl=30)
        assert not refused.value.retryable
    finally:
        own_server.cli("config", "set", "maxmemory", "0")
    await own_backend.leases.acquire("acme", "run-1", "w", ttl=30)


async def test_a_password_the_server_refuses_is_a_refusal(own_server: RedisServer) -> None:
    """Opening the stores with a password the server refuses fails the same way again: the
    kit says so instead of reporting a server to wait for."""
    with pytest.raises(StoreRefusedError, match="invalid username-password") as refused:
        await open_backend(f"redis://nobody:wrong@{LOOPBACK}:{own_server.port}/0")
    assert not refused.value.retryable
