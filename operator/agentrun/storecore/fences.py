"""The fence refusal, made in one place from what a store found.

Every store checks a write's fence against the run's high-water mark in its own way (a Lua
script, a CTE, a transaction, a dictionary) and ends up with the same two numbers; this turns
them into the error, so no store builds ``StaleFenceError`` by hand.
"""

from __future__ import annotations

from agentrun.errors import StaleFenceError


def refuse_stale(*, tenant: str, run_id: str, fence: int, current: int, what: str) -> None:
    """Raise ``StaleFenceError`` when the run's mark ``current`` is above the writer's ``fence``.

    ``current`` is the mark as the store found it under its lock (or, where the store raises
    the mark in the same step, the mark after that step: then equal to ``fence`` when admitted).
    """
    if current > fence:
        raise StaleFenceError(run_id=run_id, tenant=tenant, fence=fence, current=current, what=what)
