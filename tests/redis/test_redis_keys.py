"""The key layout: injective for every pair of hostile ids, one Cluster slot per run, a prefix
that namespaces everything, and URL options that are checked rather than guessed at."""

from __future__ import annotations

import itertools
import uuid
from urllib.parse import quote, urlencode

import pytest
from redis.asyncio import Redis
from redis.crc import key_slot

from agentrun import Backend, open_backend
from agentrun._backend import RunLister
from agentrun._errors import ConfigurationError
from agentrun._storecore.checked import CheckedCheckpoints
from agentrun.stores._redis import RedisCheckpointStore, RedisLedger
from agentrun.stores._redis._shared import RunKeys, run_of_key
from agentrun.stores._redis.quotas import ScopeKeys
from agentrun.testing import HOSTILE_IDS
from tests.support.redis_server import RedisClusterServers, RedisServer

KINDS = ("fence", "checkpoint", "lease", "claims", "history", "charges", "spent")


def _all_keys(run: RunKeys) -> list[str]:
    return [getattr(run, kind) for kind in KINDS]


def _tag(key: str) -> str:
    start = key.index("{")
    return key[start + 1 : key.index("}", start)]


def test_no_two_runs_share_a_key() -> None:
    pairs = [*itertools.product(HOSTILE_IDS, repeat=2), ("a:b", "c"), ("a", "b:c")]
    bases = {RunKeys.of("agentrun", tenant, run).base for tenant, run in pairs}
    assert len(bases) == len(set(pairs))
    assert RunKeys.of("p", "a:b", "c").base != RunKeys.of("p", "a", "b:c").base


@pytest.mark.parametrize("run_id", HOSTILE_IDS)
def test_every_key_of_a_run_has_one_brace_free_tag(run_id: str) -> None:
    keys = _all_keys(RunKeys.of("agentrun", "tenant:{x}", run_id))
    tags = {_tag(key) for key in keys}
    assert len(tags) == 1
    (tag,) = tags
    assert tag
    assert "{" not in tag
    assert "}" not in tag
    assert len({key_slot(key.encode()) for key in keys}) == 1
    assert all(key.startswith("agentrun:{") for key in keys)


@pytest.mark.parametrize("scope", HOSTILE_IDS)
def test_every_key_of_a_scope_has_one_brace_free_tag_apart_from_the_runs(scope: str) -> None:
    keys = ScopeKeys.of("agentrun", "tenant:{x}", scope)
    every = [keys.admitted, keys.windows, *(keys.window(name) for name in HOSTILE_IDS)]
    assert {_tag(key) for key in every} == {_tag(keys.admitted)}
    assert "{" not in _tag(keys.admitted)
    assert len({key_slot(key.encode()) for key in every}) == 1
    assert all(key.startswith("agentrun:quota:{") for key in every)
    assert len({keys.window(name) for name in HOSTILE_IDS}) == len(set(HOSTILE_IDS))


@pytest.mark.parametrize("prefix", ["", "a{b", "a}b", "{agentrun}"])
def test_a_prefix_that_would_break_the_tag_is_refused(prefix: str) -> None:
    with pytest.raises(ConfigurationError, match="prefix"):
        RedisLedger(Redis(), prefix=prefix)


@pytest.mark.parametrize(
    "query", ["cluster=maybe", "max_value_bytes=lots", "max_value_bytes=0", "prefix=%7Bx%7D"]
)
async def test_url_options_are_checked(query: str) -> None:
    with pytest.raises(ConfigurationError):
        await open_backend(f"redis://127.0.0.1:1/0?{query}")


async def test_a_cluster_url_with_a_database_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="database 0"):
        await open_backend("redis://127.0.0.1:1/3?cluster=true")


async def _write_everything(backend: Backend, tenant: str, run_id: str) -> None:
    lease = await backend.leases.acquire(tenant, run_id, "w", ttl=30)
    await backend.checkpoints.put(tenant, run_id, b"{}", fence=lease.fence)
    await backend.idempotency.begin(tenant, run_id, "k", holder="w", fence=lease.fence)
    await backend.history.put(tenant, run_id, b"segment", fence=lease.fence)
    await backend.ledger.charge(tenant, run_id, "c", 1, budget=None, fence=lease.fence)


async def test_a_run_lives_in_one_cluster_slot_and_runs_spread(
    cluster_servers: RedisClusterServers,
) -> None:
    backend = await open_backend(cluster_servers.url)
    tenant = f"slots-{uuid.uuid4().hex[:8]}"
    runs = [(t, run_id) for run_id in HOSTILE_IDS for t in (tenant, f"{tenant}:x")]
    nodes = [Redis(host="127.0.0.1", port=node.port) for node in cluster_servers.nodes]
    try:
        for run in runs:
            await _write_everything(backend, *run)
        owners: set[int] = set()
        for run in runs:
            keys = _all_keys(RunKeys.of("agentrun", *run))
            # The driver's ``execute_command`` is untyped; these answer integers.
            slots = {
                await nodes[0].execute_command("CLUSTER", "KEYSLOT", key)  # type: ignore[no-untyped-call]
                for key in keys
            }
            assert len(slots) == 1, run
            slot = slots.pop()
            owning = [
                n
                for n, node in enumerate(nodes)
                if await node.execute_command("CLUSTER", "COUNTKEYSINSLOT", slot)  # type: ignore[no-untyped-call]
            ]
            assert len(owning) == 1, run
            assert await nodes[owning[0]].exists(*keys) == len(KINDS), run
            owners.add(owning[0])
        assert owners == set(range(len(nodes)))
    finally:
        await backend.close()
        for node in nodes:
            await node.aclose()


async def test_the_prefix_namespaces_every_key(single_server: RedisServer) -> None:
    tenant = f"prefix-{uuid.uuid4().hex[:8]}"
    mine = await open_backend(f"{single_server.url}?prefix=team-a")
    theirs = await open_backend(single_server.url)
    try:
        await _write_everything(mine, tenant, "run")
        assert await theirs.checkpoints.latest(tenant, "run") is None
        assert await theirs.ledger.spent(tenant, "run") == 0
        keys = _all_keys(RunKeys.of("team-a", tenant, "run"))
        assert int(single_server.cli("exists", *keys)) == len(KINDS)
    finally:
        await mine.close()
        await theirs.close()


@pytest.mark.parametrize("prefix", ["agentrun", "team*[a]?\\x", "agentrun:sub"])
def test_a_run_is_read_back_from_its_key_and_from_nothing_else(prefix: str) -> None:
    pairs = [*itertools.product(HOSTILE_IDS, repeat=2), ("a:b", "c"), ("a", "b:c"), ("", "")]
    for tenant, run_id in pairs:
        key = RunKeys.of(prefix, tenant, run_id).checkpoint
        assert run_of_key(prefix, "checkpoint", key.encode()) == (tenant, run_id), key
        assert run_of_key(prefix, "fence", key.encode()) is None
        assert run_of_key(f"{prefix}:sub", "checkpoint", key.encode()) is None
    for stray in ("{a%2a:b}", "{a%2A:b:c}", "{a%FF:b}", "{a:b}x", "{ab}", "{a%7E:b}"):
        assert run_of_key(prefix, "checkpoint", f"{prefix}:{stray}:checkpoint") is None, stray


async def test_runs_are_listed_from_the_prefix_s_checkpoint_keys_only(redis_url: str) -> None:
    """Prefixes that are a pattern's characters, or one another's start, list only their own
    runs; a key in the checkpoints' shape that the kit never writes is not a run."""
    tenant = f"listing-{uuid.uuid4().hex[:8]}"
    glob = "team*[a]?\\x"
    separator = "&" if "?" in redis_url else "?"
    backends = {
        prefix: await open_backend(f"{redis_url}{separator}{urlencode({'prefix': prefix})}")
        for prefix in ("agentrun", glob, "team", "agentrun:sub")
    }
    try:
        for prefix, backend in backends.items():
            await _write_everything(backend, tenant, f"run of {prefix}")
        checked = backends["agentrun"].checkpoints
        assert isinstance(checked, CheckedCheckpoints)
        assert isinstance(checked.inner, RedisCheckpointStore)
        client = checked.inner._client
        encoded = quote(tenant, safe="")
        for stray in (f"{{{encoded}:run%2a}}", f"{{{encoded}:a:b}}", f"{{{encoded}:%FF}}"):
            await client.set(f"agentrun:{stray}:checkpoint", b"{}")
        for prefix, backend in backends.items():
            assert isinstance(backend.checkpoints, RunLister)
            own = ((tenant, f"run of {prefix}"),)
            assert await backend.checkpoints.runs(tenant) == own, prefix
            assert [run for run in await backend.checkpoints.runs() if run[0] == tenant] == list(
                own
            )
    finally:
        for backend in backends.values():
            await backend.close()
