"""One worker at a time: fenced run leases whose expiry the store's clock decides.

Two workers resuming one run are two runs: one budget spent twice, every outstanding call
dispatched twice. A ``RunLease`` makes one of them the holder. Three rules keep it safe under
clock skew and pauses:

* The store owns the clock. Expiry is decided by the store (Redis ``TIME``, PostgreSQL
  ``clock_timestamp()``, SQLite ``julianday('now')``); a caller's idea of now is never used. A
  lease reports ``remaining`` as measured by the store when it answered.
* Every acquisition raises the fence, and fences never fall (release included). A superseded
  holder is refused on the number, not on the time: every write made for a run carries the
  writer's fence and the thing written to refuses a fence lower than the highest it has seen.
* Renewal keeps the fence. ``Leaseholder`` renews inside ``LeasePolicy.renew_within`` and releases
  on the way out, so a finished run hands its lease back instead of making the next worker wait
  out the TTL. If it cannot renew before the lease would lapse, it says so (``lost``) and the run
  stops dispatching tool calls on its own.

The holder's own deadline is kept on a ``Clock`` it reads and sleeps on: the process's monotonic
clock, or in tests a hand-moved one, so that renewals, lapses and losses are tested without
waiting for them.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from types import TracebackType
from typing import Protocol

from pydantic import Field, model_validator

from agentrun._base import FrozenModel
from agentrun._errors import AgentRunError, ConfigurationError, RunLeaseError

logger = logging.getLogger(__name__)


class RunLease(FrozenModel):
    """One tenure of one holder on one run: the fence it writes under, and its time left."""

    tenant: str
    run_id: str
    holder: str
    fence: int = Field(ge=1)
    remaining: float = Field(description="seconds left on the store's clock when it answered")

    def superseded_by(self, other: RunLease) -> bool:
        """True when ``other`` is a later tenure of the same run (a higher fence)."""
        return (
            other.tenant == self.tenant and other.run_id == self.run_id and other.fence > self.fence
        )


class LeasePolicy(FrozenModel):
    """How long a lease outlives a silent holder (``ttl``), and how early it is renewed."""

    ttl: float = Field(default=60.0, gt=0)
    renew_within: float = Field(default=20.0, gt=0)

    @model_validator(mode="after")
    def _renew_before_expiry(self) -> LeasePolicy:
        if self.renew_within >= self.ttl:
            raise ValueError(
                f"renew_within ({self.renew_within}s) must be shorter than ttl ({self.ttl}s), "
                "or the lease lapses before it is renewed"
            )
        return self


class LeaseStore(Protocol):
    """Fenced run leases whose expiry the store's clock decides; fences never fall."""

    async def acquire(self, tenant: str, run_id: str, holder: str, *, ttl: float) -> RunLease:
        """Take the lease with a fence higher than any before, unless another holder's is live
        (``RunLeaseError`` naming it). The same holder may take its own live lease again.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.
            holder: The worker taking the lease.
            ttl: Seconds the lease lives without renewal, on the store's clock.

        Returns:
            The ``RunLease``, with its new fence and the time left.

        Raises:
            RunLeaseError: Another holder's lease is live; the error names it.
            ConfigurationError: ``ttl`` is not a positive number, or an id no store can keep.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def renew(self, lease: RunLease, *, ttl: float) -> RunLease:
        """Extend a live lease, keeping its fence; ``RunLeaseError`` if it lapsed or was taken.

        Args:
            lease: The lease to extend, as ``acquire`` or the last ``renew`` returned it.
            ttl: Seconds the lease lives from now, on the store's clock.

        Returns:
            The renewed ``RunLease``.

        Raises:
            RunLeaseError: The lease lapsed or another holder took the run.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def release(self, lease: RunLease) -> None:
        """Give the lease back if it is still this one; the fence stays where it is.

        Args:
            lease: The lease to give back.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """

    async def held(self, tenant: str, run_id: str) -> RunLease | None:
        """The live lease on the run, or None.

        Args:
            tenant: The run's tenant.
            run_id: The run's id.

        Returns:
            The live ``RunLease``, or None.

        Raises:
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


class Clock(Protocol):
    """The time a ``Leaseholder`` keeps: calling it reads it, ``sleep`` waits on it."""

    def __call__(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class MonotonicClock:
    """The process's monotonic clock and ``asyncio.sleep``: what a holder keeps time on."""

    def __call__(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


MONOTONIC = MonotonicClock()

_CANCEL_AGAIN_AFTER = 0.05
"""Seconds a stopping holder waits on its renewal task before cancelling it again: a task that
swallowed a cancellation inside a wait is woken by the next one."""


def default_holder() -> str:
    """A holder identity unique to this process: never a shared default like "cli"."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


class Leaseholder:
    """Holds a lease for the length of a block: renews in the background, releases on exit.

    ``lost`` is set the moment the lease is taken by another holder, or when it would lapse
    before a renewal could land. Check it (``ensure_held``) before every side effect.

    The holder gives the lease up a margin (the renewal retry interval) *before* its deadline:
    a side effect started at the deadline itself would land after the lease lapsed. The deadline
    is counted from when the request was sent (``taken_at`` for a lease acquired elsewhere, read
    on the same ``clock``), never from when the answer arrived, so it errs early.
    """

    def __init__(
        self,
        store: LeaseStore,
        lease: RunLease,
        policy: LeasePolicy,
        *,
        taken_at: float | None = None,
        clock: Clock = MONOTONIC,
    ) -> None:
        self._store = store
        self._policy = policy
        self._clock = clock
        self.lease = lease
        self.lost = asyncio.Event()
        self.lost_reason = ""
        sent = clock() if taken_at is None else taken_at
        self._deadline = sent + min(lease.remaining, policy.ttl)
        self._margin = min(1.0, policy.renew_within / 10)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @classmethod
    async def acquire(
        cls,
        store: LeaseStore,
        tenant: str,
        run_id: str,
        holder: str,
        policy: LeasePolicy,
        *,
        clock: Clock = MONOTONIC,
    ) -> Leaseholder:
        sent = clock()
        lease = await store.acquire(tenant, run_id, holder, ttl=policy.ttl)
        return cls(store, lease, policy, taken_at=sent, clock=clock)

    @property
    def fence(self) -> int:
        return self.lease.fence

    def ensure_held(self) -> None:
        """Raise if the lease is lost or would lapse before another renewal."""
        if not self.lost.is_set() and self._clock() >= self._last_safe_moment:
            self._lose("it would lapse before it could be renewed")
        if self.lost.is_set():
            raise RunLeaseError(
                run_id=self.lease.run_id,
                tenant=self.lease.tenant,
                requested_by=self.lease.holder,
                holder=None,
                fence=self.lease.fence,
                detail=f"the lease was lost: {self.lost_reason}",
            )

    async def __aenter__(self) -> Leaseholder:
        self._task = asyncio.create_task(self._renew_forever(), name=f"renew {self.lease.run_id}")
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop renewing, then release; the caller's own cancellation is raised once both are
        done, never swallowed.

        A cancellation of the caller that lands while it waits for the renewals to stop is held
        back until they have: a caller leaving early must not leave a renewal behind, which
        would keep the lease live, and the next worker out, for ever. The release follows it
        either way, so a cancelled run hands its lease back like any other.
        """
        cancelled = await self._stop_renewing()
        if not self.lost.is_set():
            try:
                await self._store.release(self.lease)
            except AgentRunError as error:
                logger.warning("could not release lease on %s: %s", self.lease.run_id, error)
        if cancelled is not None:
            raise cancelled

    async def _stop_renewing(self) -> asyncio.CancelledError | None:
        """Cancel the renewal task and wait for it, again and again, until it is done; return
        the caller's cancellation if one came meanwhile.

        One cancellation is not enough: a driver may swallow it mid-command (redis-py can), and
        the task would then carry on renewing while this waited on it for ever. The stop flag,
        checked before every renewal, ends such a task at its next step; the cancellation is
        repeated for a task blocked in a wait that swallowed one. ``asyncio.wait`` never raises
        the task's own cancellation, so what is caught here is only ever the caller's.
        """
        task = self._task
        if task is None:
            return None
        self._stopping = True
        cancelled: asyncio.CancelledError | None = None
        while not task.done():
            task.cancel()
            try:
                await asyncio.wait((task,), timeout=_CANCEL_AGAIN_AFTER)
            except asyncio.CancelledError as error:
                cancelled = error
        if not task.cancelled() and task.exception() is not None:
            logger.error(
                "renewing the lease on %s failed", self.lease.run_id, exc_info=task.exception()
            )
        return cancelled

    @property
    def _last_safe_moment(self) -> float:
        return self._deadline - self._margin

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
            self.lost.set()
            logger.warning(
                "lease on run %s (fence %d) lost: %s", self.lease.run_id, self.lease.fence, reason
            )

    @property
    def _renewing(self) -> bool:
        """Whether another renewal may be sent: not once the lease is lost or the exit began."""
        return not self.lost.is_set() and not self._stopping

    async def _renew_forever(self) -> None:
        while self._renewing:
            renew_at = self._deadline - self._policy.renew_within
            await self._clock.sleep(max(0.0, renew_at - self._clock()))
            if not self._renewing:
                return
            sent = self._clock()
            if sent >= self._last_safe_moment:
                self._lose("it would lapse before a renewal could succeed")
                return
            try:
                lease = await self._store.renew(self.lease, ttl=self._policy.ttl)
            except RunLeaseError as error:
                self._lose(str(error))
                return
            except Exception as error:
                # A store that leaks a raw driver error is treated as unreachable: the lease
                # is kept until the deadline, then given up, never silently left unrenewed.
                if isinstance(error, AgentRunError) and not error.retryable:
                    self._lose(str(error))
                    return
                logger.warning(
                    "renewing lease on %s failed, retrying: %s", self.lease.run_id, error
                )
                wait = min(self._margin, self._last_safe_moment - self._clock())
                await self._clock.sleep(max(0.0, wait))
                continue
            self.lease = lease
            self._deadline = sent + min(lease.remaining, self._policy.ttl)


def renewal_refused(lease: RunLease, live: tuple[str, int] | None) -> RunLeaseError:
    """What a store raises when it cannot renew ``lease``: it lapsed (``live`` None: nobody
    holds the run now) or another (holder, fence) took the run."""
    if live is None:
        return RunLeaseError(
            run_id=lease.run_id,
            tenant=lease.tenant,
            requested_by=lease.holder,
            holder=None,
            fence=lease.fence,
            detail="its lease lapsed",
        )
    holder, fence = live
    return RunLeaseError(
        run_id=lease.run_id,
        tenant=lease.tenant,
        requested_by=lease.holder,
        holder=holder,
        fence=fence,
        detail=f"it was superseded by {holder!r} with fence {fence}",
    )


def require_positive_ttl(ttl: float) -> None:
    if not ttl > 0:
        raise ConfigurationError(f"ttl must be a positive number of seconds, got {ttl!r}")
