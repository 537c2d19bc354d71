"""Recording a tool call's intent before it runs and its outcome after, so a resume can decide.

The frontier written before a dispatch cannot know what happened after it. What can is a record
written *before* the tool is handed the call: a claim on the call's idempotency key, held in
flight by one holder under one fence, and closed with the outcome once the tool answers. A
resume reads these records for every outstanding call (``_resume.plan_resume``).

Keys are digests of the tool name and its declared key arguments in a canonical form, so two
calls that mean the same thing get the same key and no key ever contains argument text (the
arguments may hold a customer's details; the key travels in headers and logs). A call whose tool
declares no key arguments is tracked by a per-call *dispatch marker* instead: it protects the
run from repeating the call, but cannot deduplicate with a remote service.
"""

from __future__ import annotations

import hashlib
import json
import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from enum import StrEnum
from typing import Protocol, runtime_checkable

from pydantic import Field, JsonValue

from agentrun._base import FrozenModel
from agentrun._errors import ConfigurationError, StaleFenceError

KEY_PREFIX = "idem:v1:"
MARKER_PREFIX = "mark:v1:"


class ClaimState(StrEnum):
    """Whether a claimed call is still in flight or has its outcome recorded."""

    IN_FLIGHT = "in_flight"
    COMPLETED = "completed"


class IdempotencyRecord(FrozenModel):
    """What the store holds under one key of one run.

    ``remaining`` is the claim's time left on the store's clock, when the record has a TTL.
    ``call_id`` and ``tool`` name the call whose dispatch made the claim, so a resume can tell a
    record that no frontier names (see ``_resume.plan_resume``); they are None for a record that
    is no call's (an approval, the resume claim, a person's answer).
    """

    key: str
    state: ClaimState
    holder: str
    fence: int = Field(ge=0)
    outcome: str | None = None
    remaining: float | None = None
    call_id: str | None = None
    tool: str | None = None


class RecordFields(Protocol):
    """What a listing keeps of a record, however a store holds it."""

    @property
    def state(self) -> ClaimState: ...
    @property
    def holder(self) -> str: ...
    @property
    def fence(self) -> int: ...
    @property
    def call_id(self) -> str | None: ...
    @property
    def tool(self) -> str | None: ...


class ListedRecord(FrozenModel):
    """A record as ``IdempotencyStore.records`` lists it: what it is and whose, without its
    outcome, which can be a tool's whole output (``read`` returns that)."""

    key: str
    state: ClaimState
    holder: str
    fence: int = Field(ge=0)
    call_id: str | None = None
    tool: str | None = None

    @classmethod
    def of(cls, key: str, record: RecordFields) -> ListedRecord:
        """The listing of ``record``, held under ``key``."""
        return cls(
            key=key,
            state=record.state,
            holder=record.holder,
            fence=record.fence,
            call_id=record.call_id,
            tool=record.tool,
        )


class Claim(FrozenModel):
    """The answer to ``begin``: whether this caller won the key, and the record as it stands."""

    won: bool
    record: IdempotencyRecord


def not_holder(
    tenant: str, run_id: str, what: str, *, holder: str, fence: int, claim_fence: int | None
) -> StaleFenceError:
    """What a store raises when ``holder`` (under ``fence``) records or abandons a claim it
    does not hold: ``claim_fence`` is the fence of the claim the store has (None: no claim)."""
    return StaleFenceError(
        run_id=run_id,
        tenant=tenant,
        fence=fence,
        current=fence if claim_fence is None else claim_fence,
        what=f"{what} by {holder!r}, which does not hold the claim",
    )


class IdempotencyStore(Protocol):
    """Claims and outcomes per (tenant, run, key). Every write is fenced per run."""

    async def begin(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        ttl: float | None = None,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Claim:
        """Claim ``key`` in flight unless a live record holds it; never overwrite one.
        ``call_id`` and ``tool`` name the call the claim is for, kept with the record.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            key: The call's idempotency key or dispatch marker.
            holder: The worker claiming it.
            fence: The claimant's fence.
            ttl: Seconds the claim lives on the store's clock; None (the default) for no expiry.
            call_id: The id of the call the claim is for, or None.
            tool: The name of the tool the call is for, or None.

        Returns:
            The ``Claim``: ``won``, with the record now under ``key`` (the claimant's, or the
            live one that holds it).

        Raises:
            StaleFenceError: ``fence`` is below the run's fence mark (another worker has the run).
            ConfigurationError: An id or key no store can keep (see ``agentrun._identifiers``).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        """Settle this holder's claim with ``outcome``.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            key: The claimed key.
            outcome: What the call returned, as the model will see it.
            holder: The worker that holds the claim.
            fence: That worker's fence.

        Raises:
            StaleFenceError: ``fence`` is below the run's fence mark, or the claim is not this
                holder's (``not_holder``).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        """Drop this holder's in-flight claim (the call was never handed to its tool).

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            key: The claimed key.
            holder: The worker that holds the claim.
            fence: That worker's fence.

        Raises:
            StaleFenceError: ``fence`` is below the run's fence mark, or the claim is not this
                holder's (``not_holder``).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        """The live record under ``key``, or None (an expired claim reads as None).

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            key: The key to read.

        Returns:
            The ``IdempotencyRecord``, or None.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        """Every live record of the run, in no particular order (an expired claim is none).

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            A ``ListedRecord`` (key and record) for each live record.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def settle(
        self,
        tenant: str,
        run_id: str,
        key: str,
        outcome: str | None,
        *,
        by: str,
        claimed_by: tuple[str, int] | None = None,
    ) -> bool:
        """A person's answer for an undecidable call: it ran with ``outcome``, or (None) it
        did not run. Not fenced: a person outranks every worker. The answer is no call's
        record any more (``call_id`` and ``tool`` become None): the person accounts for it.

        ``claimed_by`` is the (holder, fence) of the in-flight claim the person answered: the
        answer is written only while that claim is still the record, atomically. An answer
        delivered late (its writer paused) must not erase a newer claim, made after the first
        delivery said the call had not run: that claim's call may be under way. Returns whether
        the answer was written.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            key: The undecidable call's key.
            outcome: What the call returned, or None when it did not run.
            by: Who answered (a person's name, kept with the record).
            claimed_by: The (holder, fence) of the in-flight claim answered; None writes the
                answer whatever the record is.

        Returns:
            Whether the answer was written.

        Raises:
            ConfigurationError: An id or key no store can keep (see ``agentrun._identifiers``).
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def forget(self, tenant: str, run_id: str) -> None:
        """Drop every record of the run.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


@runtime_checkable
class RunAndRecordsReader(Protocol):
    """A ``RunReader`` that also reads the run's idempotency records in the same round trip and
    snapshot as its frontier and segments, when they live in its database: a resume with
    nothing to do between the two reads (``read_and_plan`` without ``before_planning``) then
    costs one round trip instead of two."""

    def lists_records_of(self, idempotency: IdempotencyStore) -> bool:
        """Whether ``read_run_and_records`` reads ``idempotency``'s records (one database)."""

    async def read_run_and_records(
        self, tenant: str, run_id: str
    ) -> tuple[bytes | None, Mapping[str, bytes], tuple[ListedRecord, ...]]:
        """``RunReader.read_run``'s frontier and segments, and ``IdempotencyStore.records`` of
        the run, all read in one snapshot (no records when there is no frontier)."""


class MaskedOutcomes:
    """An idempotency store whose every outcome is masked on its way in: a tool's result as the
    runner records it, a person's answer, an approval's decision. The frontier masks the same
    result in the conversation; without this the store kept it in clear text next to it, until
    the run was forgotten. A replayed outcome is therefore the masked one.

    ``mask`` is ``Masker.outcome`` of the run's ``Masker``; ``masking`` wraps a store once.
    """

    def __init__(self, inner: IdempotencyStore, mask: Callable[[str], str]) -> None:
        self.inner = inner
        self.mask = mask

    async def begin(
        self,
        tenant: str,
        run_id: str,
        key: str,
        *,
        holder: str,
        fence: int,
        ttl: float | None = None,
        call_id: str | None = None,
        tool: str | None = None,
    ) -> Claim:
        return await self.inner.begin(
            tenant, run_id, key, holder=holder, fence=fence, ttl=ttl, call_id=call_id, tool=tool
        )

    async def record(
        self, tenant: str, run_id: str, key: str, outcome: str, *, holder: str, fence: int
    ) -> None:
        await self.inner.record(tenant, run_id, key, self.mask(outcome), holder=holder, fence=fence)

    async def abandon(self, tenant: str, run_id: str, key: str, *, holder: str, fence: int) -> None:
        await self.inner.abandon(tenant, run_id, key, holder=holder, fence=fence)

    async def read(self, tenant: str, run_id: str, key: str) -> IdempotencyRecord | None:
        return await self.inner.read(tenant, run_id, key)

    async def records(self, tenant: str, run_id: str) -> tuple[ListedRecord, ...]:
        return await self.inner.records(tenant, run_id)

    async def settle(
        self,
        tenant: str,
        run_id: str,
        key: str,
        outcome: str | None,
        *,
        by: str,
        claimed_by: tuple[str, int] | None = None,
    ) -> bool:
        masked = None if outcome is None else self.mask(outcome)
        return await self.inner.settle(tenant, run_id, key, masked, by=by, claimed_by=claimed_by)

    async def forget(self, tenant: str, run_id: str) -> None:
        await self.inner.forget(tenant, run_id)


def masking(store: IdempotencyStore, mask: Callable[[str], str]) -> IdempotencyStore:
    """``store`` with its outcomes masked by ``mask``; ``store`` itself if it already is."""
    if isinstance(store, MaskedOutcomes) and store.mask == mask:
        return store
    return MaskedOutcomes(store, mask)


def _canonical(value: JsonValue, path: str) -> JsonValue:
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigurationError(
                f"idempotency key argument {path} is {value}; use a finite number"
            )
        number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        normal = number.normalize()
        return {"$n": format(normal, "f") if normal == normal.to_integral() else str(normal)}
    if isinstance(value, list):
        return [_canonical(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, dict):
        # Tagged like numbers are, so an argument that is the object {"$n": "2"} and one that
        # is the number 2 never share a key.
        return {
            "$o": {
                unicodedata.normalize("NFC", key): _canonical(item, f"{path}.{key}")
                for key, item in value.items()
            }
        }
    raise ConfigurationError(f"idempotency key argument {path} is not JSON: {type(value).__name__}")


def derive_key(tool: str, arguments: Mapping[str, JsonValue], key_arguments: Sequence[str]) -> str:
    """The idempotency key of a call to ``tool``, from the arguments its tool declares as key.

    Order-insensitive, NFC-normalised, ``1.5 == 1.50`` and ``2 == 2.0`` but ``True != 1``; a
    declared argument the call omits counts as null. The result is a digest, never argument text.
    """
    if not key_arguments:
        raise ConfigurationError(f"tool {tool!r} declares no key arguments; use marker_key instead")
    picked = {name: _canonical(arguments.get(name), name) for name in key_arguments}
    body = json.dumps(
        {"tool": tool, "args": picked}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return KEY_PREFIX + hashlib.sha256(body.encode()).hexdigest()


def marker_key(call_id: str) -> str:
    """The dispatch marker of a call with no idempotency key."""
    return MARKER_PREFIX + hashlib.sha256(call_id.encode()).hexdigest()


def remote_key(tenant: str, run_id: str, key: str) -> str:
    """The key handed to the tool (and so to a remote service) for a call of one run.

    Scoped to the run, so two runs asking for the same thing are two requests, while one run
    asking again (after a crash) is the same request. Length-prefixed, so no two (tenant, run)
    pairs share a scope.
    """
    scope = f"{len(tenant)}:{tenant}{len(run_id)}:{run_id}{key}"
    return KEY_PREFIX + hashlib.sha256(scope.encode()).hexdigest()
