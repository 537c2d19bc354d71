"""The refusals of a tenure, made in one place from what a store found.

Every store checks a write's fence against the run's high-water mark in its own way (a Lua
script, a CTE, a transaction, a dictionary) and ends up with the same two numbers, and every
store refuses an acquisition of a lease another holder has with that holder and its fence; these
turn what it found into the error, by keyword, so no store builds one by hand or swaps the ids.
"""

from __future__ import annotations

from agentrun._errors import RunLeaseError, StaleFenceError


def refuse_stale(*, tenant: str, run_id: str, fence: int, current: int, what: str) -> None:
    """Raise ``StaleFenceError`` when the run's mark ``current`` is above the writer's ``fence``.

    ``current`` is the mark as the store found it under its lock (or, where the store raises
    the mark in the same step, the mark after that step: then equal to ``fence`` when admitted).
    """
    if current > fence:
        raise StaleFenceError(run_id=run_id, tenant=tenant, fence=fence, current=current, what=what)


def held_elsewhere(
    *, tenant: str, run_id: str, requested_by: str, holder: str, fence: int
) -> RunLeaseError:
    """What a store raises when ``requested_by`` asks for the lease on a run that ``holder``
    holds, live, under ``fence``."""
    return RunLeaseError(
        run_id=run_id, tenant=tenant, requested_by=requested_by, holder=holder, fence=fence
    )
