"""One commit per boundary: the frontier, its transcript segment and the model call's charge.

A durable write costs a commit: a WAL flush on PostgreSQL, an fsync on SQLite, a round trip on
Redis. Written through the separate store contracts a boundary after a model call costs three
(the ledger's charge, the history segment, the frontier) and every other boundary two, where one
would do. A backend whose stores share one database can take all of a boundary in one
transaction: ``CommitStore.commit``. The ``Checkpointer`` uses it when it is given one and the
separate writes otherwise, so a third-party store needs only the separate contracts.

What it must keep is what the separate writes keep: the fence is checked once, for all of it, and
a stale fence refuses all of it (nothing partial); a segment written twice is harmless; a charge
is counted once per ``charge_id``. A crash before the commit loses the boundary whole, as a crash
before the separate writes did; a crash after it finds all of it. The one thing that moves is
when a model call's charge becomes durable: with the boundary that follows the call, not just
before it. A worker that dies between the two leaves the call uncharged, as one that died
between the reply and the charge always could; the resume asks the model again and charges that.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable


@dataclass(frozen=True)
class Charge:
    """A model call's cost, charged once per ``charge_id`` (see ``Ledger.charge``), no budget:
    the runner refuses over budget itself, before the next call, from the run's total."""

    charge_id: str
    micros: int


@dataclass(frozen=True)
class BoundaryCommit:
    """Everything a boundary makes durable, already masked and encoded. ``segment`` is the
    transcript's new segment (its handle is the digest, ``_history.handle_for``, named by the
    frontier), None when the transcript is inline or nothing was added.

    ``dropped`` names segments the new frontier's chain no longer reaches, deleted in the same
    commit: those a compacted ``segment`` replaces (see ``Checkpointer``). Only the frontier
    committed with their deletion stops naming them, so no committed frontier ever names a
    segment that is gone.

    ``handle`` is the segment's handle, given by a writer that has it already (the
    ``Checkpointer`` named the segment in the frontier with it) so that the store does not digest
    the segment again (a cost per boundary the kit need not pay twice); left out, the store
    computes it. A store keys
    the segment by it as given: a wrong one is refused by every read (``verified``)."""

    tenant: str
    run_id: str
    fence: int
    frontier: bytes
    segment: bytes | None = None
    charge: Charge | None = None
    dropped: tuple[str, ...] = ()
    handle: str | None = None


class CommitStore(Protocol):
    """Takes all of a boundary in one transaction and one round trip."""

    async def commit(self, boundary: BoundaryCommit) -> int | None:
        """Check and raise the run's fence, then store the segment, the frontier and the charge
        and delete the ``dropped`` segments, all or nothing; return the run's total spend after
        the charge (None without a charge).
        Raise ``StaleFenceError``, having written nothing, for a fence below the run's highest.

        Args:
            boundary: Everything the boundary makes durable, masked and encoded.

        Returns:
            The run's total spend after the charge, in micros; None without a charge.

        Raises:
            StaleFenceError: The boundary's fence is below the run's; nothing was written.
            BudgetExceededError: The charge would exceed its budget; nothing was written.
            StoreUnavailableError: The store could not be reached or answered with an error.
        """


@runtime_checkable
class RunReader(Protocol):
    """A ``CommitStore`` that reads back what its commits made durable, in one round trip.

    A resume needs the frontier and then every segment of the transcript it names: two reads of
    one database, and a round trip each when made through the separate stores. A store whose
    commits put both in one database can hand both over at once; the segments are as stored and
    unverified (``load_chain`` checks every one it uses against its handle, as it does those of a
    ``SegmentLister``).
    """

    async def read_run(self, tenant: str, run_id: str) -> tuple[bytes | None, Mapping[str, bytes]]:
        """The run's frontier (None when it has none) and every segment of its transcript, by
        handle, as stored."""
