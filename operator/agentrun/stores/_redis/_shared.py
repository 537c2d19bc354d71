"""What every Redis store shares: the key layout, the fence in Lua, and one place for errors.

Key layout. Every key of a run is ``<prefix>:{<tenant>:<run>}:<kind>`` where tenant and run id
are percent-encoded with nothing left unescaped but ``A-Z a-z 0-9 - . _ ~``. The encoding is
injective and never yields ``:``, ``{`` or ``}``, so ``a:b``/``c`` and ``a``/``b:c`` are different
runs, no id can close the hash tag early or open a second one, and no id can reach into another
run's keys. The braces are a Redis Cluster hash tag: only their content decides the slot, so every
key of a run lands in one slot, and every script (which names all its keys) runs unchanged on a
single server and on a Cluster. The prefix may not contain braces, or it would become the tag.
Since the layout is injective, a key can be read back into its run (``run_of_key``): what a
``SCAN`` for one kind of key (``run_pattern``) finds lists the runs that have one.

Fences. One ``fence`` key per run is the high-water mark shared by all five stores. Every fenced
write is a single Lua script that refuses a fence below it and raises it to the writer's fence in
the same atomic step as the write. A lease acquisition issues ``max(high-water + 1, TIME in
microseconds)``: Redis often runs without persistence, and a restart forgets the high-water
mark, but not the wall clock, so fences issued after a restart are still above every one issued
before it (as long as the server's clock does not step back by more than the restart took).

Lua numbers are doubles and ``tostring`` keeps 14 digits, so the scripts format integers with
``%.0f`` (exact below 2**53; fences are ~2**51 today) and never let Redis or ``tostring`` pick.

Errors. Every call to the server goes through ``RedisStore._call``: a connection that fails, a
timeout, or an error reply becomes the kit's error by the policy every driver shares
(``agentrun._storecore.classify.REDIS``, on the reply's code): retryable ``StoreUnavailableError``,
or ``StoreRefusedError`` for a refusal (``WRONGTYPE``, ``NOPERM``, ``OOM``, ...). A record a
script could not read becomes ``UnreadableRecordError`` naming the run. No driver exception
escapes.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TypeVar, cast
from urllib.parse import quote, unquote

from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from agentrun._errors import ConfigurationError, UnreadableRecordError
from agentrun._storecore.classify import REDIS, classified
from agentrun._storecore.fences import refuse_stale

DEFAULT_PREFIX = "agentrun"
UNREADABLE = "AGENTRUN-UNREADABLE"

Client = Redis | RedisCluster
DRIVER_ERRORS = (RedisError, RedisClusterException, OSError)
"""What the driver raises for a server that is down, slow, or answering with an error."""
Reply = list[bytes | int]
Command = tuple[str | bytes | int, ...]
T = TypeVar("T")


def part(text: str) -> str:
    """An id as it goes into a key (see the module)."""
    return quote(text, safe="")


@dataclass(frozen=True)
class RunKeys:
    """The keys of one run, all in one Cluster slot."""

    tenant: str
    run_id: str
    base: str

    @classmethod
    def of(cls, prefix: str, tenant: str, run_id: str) -> RunKeys:
        """The run's keys, for ids the stores' checks accepted (``agentrun._storecore.checked``)."""
        return cls(tenant, run_id, f"{prefix}:{{{part(tenant)}:{part(run_id)}}}:")

    @property
    def fence(self) -> str:
        return self.base + "fence"

    @property
    def checkpoint(self) -> str:
        return self.base + "checkpoint"

    @property
    def lease(self) -> str:
        return self.base + "lease"

    @property
    def claims(self) -> str:
        return self.base + "claims"

    @property
    def history(self) -> str:
        return self.base + "history"

    @property
    def charges(self) -> str:
        return self.base + "charges"

    @property
    def spent(self) -> str:
        return self.base + "spent"

    def staged(self, token: str) -> str:
        return f"{self.base}staged:{token}"


_GLOB = re.compile(r"([\\*?\[\]])")
"""What ``SCAN``'s ``MATCH`` reads as a pattern (and the escape itself), escaped with ``\\``."""


def run_pattern(prefix: str, kind: str, tenant: str | None = None) -> str:
    """The ``MATCH`` pattern of every run's ``kind`` key (``checkpoint``, ``lease``, ...), or of
    ``tenant``'s runs' only. Only the prefix can hold a pattern's characters: an encoded id holds
    none. The pattern may match a key of another shape; ``run_of_key`` tells."""
    escaped = _GLOB.sub(r"\\\1", prefix)
    runs = "*" if tenant is None else f"{part(tenant)}:*"
    return f"{escaped}:{{{runs}}}:{kind}"


def run_of_key(prefix: str, kind: str, key: bytes | str) -> tuple[str, str] | None:
    """The (tenant, run id) whose ``kind`` key ``key`` is (``RunKeys.of`` read back), or None for
    a key that is not one: another kind, another prefix, or not the kit's encoding (two ids, each
    exactly as ``part`` writes it, so no two keys read back into one run)."""
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else key
    head, tail = f"{prefix}:{{", f"}}:{kind}"
    if not (text.startswith(head) and text.endswith(tail)):
        return None
    encoded = text[len(head) : len(text) - len(tail)].split(":")
    if len(encoded) != 2:
        return None
    try:
        tenant, run_id = (unquote(each, errors="strict") for each in encoded)
    except UnicodeDecodeError:
        return None
    if part(tenant) != encoded[0] or part(run_id) != encoded[1]:
        return None
    return tenant, run_id


@functools.lru_cache(maxsize=4096)
def _run_keys(prefix: str, tenant: str, run_id: str) -> RunKeys:
    """``RunKeys.of``, remembered: a worker asks for the same few runs' keys at every boundary,
    and percent-encoding two ids costs more than a dictionary lookup."""
    return RunKeys.of(prefix, tenant, run_id)


def checked_prefix(prefix: str) -> str:
    if not prefix or "{" in prefix or "}" in prefix:
        raise ConfigurationError(
            f"Redis key prefix {prefix!r} must be non-empty and contain no braces: a brace "
            "would become the Cluster hash tag and put every run in one slot"
        )
    return prefix


PRELUDE = """
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function int(n)
  return string.format('%.0f', n)
end
local function high_water(key)
  return tonumber(redis.call('GET', key) or '0')
end
local function refused(key, fence)
  local current = high_water(key)
  if fence < current then return current end
  if fence > current then redis.call('SET', key, int(fence)) end
  return false
end
local function unreadable(detail)
  error({err = '$UNREADABLE ' .. detail})
end
""".replace("$UNREADABLE", UNREADABLE)
"""Lua every script starts with. ``refused(fence_key, fence)`` admits a fenced write (raising
the high-water mark) or returns the mark that refuses it; the caller answers ``{'stale', mark}``.
"""


@dataclass(frozen=True)
class Script:
    """A Lua script, run by its SHA1 digest and sent whole only when a server lacks it."""

    source: str
    sha: str


def lua(*parts: str) -> Script:
    """A script: the prelude, then shared helpers and the body."""
    source = PRELUDE + "".join(parts)
    return Script(source, hashlib.sha1(source.encode()).hexdigest())


def as_bytes(value: bytes | str | None) -> bytes | None:
    """A bulk reply; the client never decodes, so a ``str`` here is only the type's width."""
    return value.encode() if isinstance(value, str) else value


def ttl_micros(ttl: float) -> int:
    """A TTL (checked positive before the store is called) in whole microseconds for a
    script, at least one."""
    return max(1, math.floor(ttl * 1_000_000))


def reply_code(error: BaseException) -> str | None:
    """The code of an error reply (its first word: ``WRONGTYPE``, ``NOPERM``, ``OOM``), which
    ``classify.REDIS`` decides on; None for an error that is not a reply (a dead socket). The
    driver takes the code off the message of the replies it has a class for, and keeps it as
    ``status_code``; a reply it has none for keeps it in the message, also when a script's
    command failed (``WRONGTYPE ... script: ...``)."""
    code: str | None = getattr(error, "status_code", None)
    if code is None and isinstance(error, ResponseError):
        code = str(error).partition(" ")[0]
    return code


def text(value: bytes | int) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class RedisStore:
    """Base of the five stores: a client, a key prefix, and the one place errors are wrapped."""

    name = "Redis store"

    def __init__(self, client: Client, *, prefix: str = DEFAULT_PREFIX) -> None:
        self._client = client
        self._prefix = checked_prefix(prefix)

    def _keys(self, tenant: str, run_id: str) -> RunKeys:
        return _run_keys(self._prefix, tenant, run_id)

    def shares_keys_with(self, other: RedisStore) -> bool:
        """Whether ``other`` keeps its keys under the same prefix through the same client: one
        script may then read both stores' keys of a run."""
        return other._client is self._client and other._prefix == self._prefix

    async def _call(self, operation: str, run: RunKeys | None, call: Awaitable[T]) -> T:
        """``call``'s reply; ``run`` names the run whose record a script found unreadable (None
        for a call that reads no run's records, the quota store's)."""
        try:
            return await call
        except ResponseError as error:
            message = str(error)
            if run is not None and message.startswith(UNREADABLE):
                detail = message.removeprefix(UNREADABLE).split(" script:", 1)[0].strip()
                raise UnreadableRecordError(
                    run_id=run.run_id,
                    tenant=run.tenant,
                    store=self.name,
                    detail=f"{detail} (while trying to {operation})",
                ) from None
            raise classified(REDIS, self.name, operation, error, reply_code(error)) from error
        except DRIVER_ERRORS as error:
            raise classified(REDIS, self.name, operation, error, reply_code(error)) from error

    async def _run(
        self,
        script: Script,
        operation: str,
        run: RunKeys | None,
        keys: Sequence[str],
        args: Sequence[str | bytes | int],
    ) -> Reply:
        return await self._call(operation, run, self._eval(script, keys, args))

    async def _eval(
        self, script: Script, keys: Sequence[str], args: Sequence[str | bytes | int]
    ) -> Reply:
        """``EVALSHA``, falling back to ``EVAL`` on the node that answers ``NOSCRIPT`` (a
        restarted server, a new Cluster node). Nothing ran on a ``NOSCRIPT``, so the fallback is
        safe; it also avoids the driver's ``SCRIPT LOAD`` to every Cluster node at once."""
        try:
            return await cast(
                Awaitable[Reply], self._client.evalsha(script.sha, len(keys), *keys, *args)
            )
        except NoScriptError:
            return await cast(
                Awaitable[Reply], self._client.eval(script.source, len(keys), *keys, *args)
            )

    async def _together(self, *commands: Command) -> list[object]:
        """Several commands sent in one write and answered in one round trip, their replies in
        order; an error reply is returned in its place, not raised, so every reply is read.

        Not a transaction: each command is atomic on its own, and callers are built so that
        stopping between two of them leaves nothing that matters (see the checkpoint store). On a
        single server the commands go straight onto one pooled connection, which costs about a
        third of the driver's pipeline object in Python (whose cost a call is as much as Redis's
        own work on a small ``SET``); the driver still packs, sends and reads, and drops a
        connection
        whose exchange broke or was cancelled. On a Cluster they go through the driver's pipeline,
        which routes by the first key: every key of a run shares its slot.
        """
        client = self._client
        if isinstance(client, RedisCluster):
            pipe = client.pipeline(transaction=False)
            for command in commands:
                # By name: the driver refuses ``evalsha`` in a Cluster pipeline, as it cannot
                # know a script's keys share a slot.
                pipe.execute_command(*command)
            return list(await pipe.execute(raise_on_error=False))
        pool = client.connection_pool
        # Untyped only for the driver's deprecation decorator; it returns a connection.
        connection = await pool.get_connection()  # type: ignore[no-untyped-call]
        try:
            await connection.send_packed_command(connection.pack_commands(commands))
            replies: list[object] = []
            for _ in commands:
                try:
                    replies.append(await connection.read_response())
                except ResponseError as error:
                    replies.append(error)
            return replies
        finally:
            await pool.release(connection)

    @staticmethod
    def _admitted(reply: Reply, run: RunKeys, fence: int, what: str) -> Reply:
        """The reply of a fenced script, or ``StaleFenceError`` if it refused the fence."""
        if reply[0] == b"stale":
            current = int(text(reply[1]))
            refuse_stale(
                tenant=run.tenant, run_id=run.run_id, fence=fence, current=current, what=what
            )
        return reply
