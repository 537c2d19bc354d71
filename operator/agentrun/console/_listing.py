"""The runs page's filter, from its URL: a view can be shared by sharing the address.

``?state=AwaitingApproval&namespace=shop&agent=refunds&age=1d&sort=age&order=desc&page=2``.
Every parameter is optional; one the console cannot read is refused with a message naming it
and what it takes, not ignored (a shared link that silently shows everything would mislead).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import urlencode

from pydantic import Field

from agentrun._base import FrozenModel
from agentrun.console._runs import RunRow

PAGE = 100
SORTS = ("age", "name", "namespace", "agent", "state", "cost", "iteration")
_AGE = re.compile(r"^(\d+)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BadFilter(ValueError):
    """A query parameter the console cannot read; the message names it and the fix."""


class Filter(FrozenModel):
    state: str = ""
    namespace: str = ""
    agent: str = ""
    age: str = ""
    sort: str = "age"
    order: Literal["asc", "desc"] = "asc"
    page: int = Field(default=1, ge=1)

    @classmethod
    def of(cls, query: Mapping[str, str]) -> Filter:
        unknown = sorted(set(query) - set(cls.model_fields))
        if unknown:
            raise BadFilter(
                f"unknown parameter {unknown[0]!r}: the runs page takes "
                + ", ".join(cls.model_fields)
            )
        sort = query.get("sort", "age")
        if sort not in SORTS:
            raise BadFilter(f"sort={sort!r}: sort by one of {', '.join(SORTS)}")
        order = query.get("order", "asc")
        if order not in ("asc", "desc"):
            raise BadFilter(f"order={order!r}: asc or desc")
        age = query.get("age", "")
        if age and not _AGE.match(age):
            raise BadFilter(f"age={age!r}: a number and a unit, s, m, h or d (30m, 1d)")
        page = query.get("page", "1")
        if not page.isdigit() or int(page) < 1:
            raise BadFilter(f"page={page!r}: a page number from 1")
        return cls(
            state=query.get("state", ""),
            namespace=query.get("namespace", ""),
            agent=query.get("agent", ""),
            age=age,
            sort=sort,
            order="desc" if order == "desc" else "asc",
            page=int(page),
        )

    def youngest(self, now: datetime) -> datetime | None:
        matched = _AGE.match(self.age)
        if matched is None:
            return None
        return now - timedelta(seconds=int(matched[1]) * _UNIT[matched[2]])

    def keeps(self, row: RunRow, since: datetime | None) -> bool:
        """Whether ``row`` is in this view (its state aside, which the counts leave out)."""
        return (
            (not self.namespace or row.namespace == self.namespace)
            and (not self.agent or row.agent == self.agent)
            and (since is None or row.created >= since)
        )

    def matches(self, row: RunRow, since: datetime | None) -> bool:
        return self.keeps(row, since) and (not self.state or row.state == self.state)

    def url(self, **changes: object) -> str:
        """This view's address with ``changes``; defaults left out so links stay short."""
        merged = self.model_dump() | changes
        if "page" not in changes:
            merged["page"] = 1
        defaults = Filter().model_dump()
        shown = {k: v for k, v in merged.items() if v != defaults[k]}
        return "/runs" + (f"?{urlencode(shown)}" if shown else "")


def _key(sort: str, row: RunRow) -> tuple[object, ...]:
    value: object = {
        "age": row.created,
        "name": row.name,
        "namespace": row.namespace,
        "agent": row.agent,
        "state": row.state,
        "cost": row.cost_micros,
        "iteration": row.iteration,
    }[sort]
    return (value, row.namespace, row.name)


class Listing(FrozenModel):
    """One page of runs, the counts per state over the whole view, and the page count."""

    rows: tuple[RunRow, ...]
    counts: tuple[tuple[str, int], ...]
    total: int
    pages: int


def state_counts(
    view: Filter, rows: Iterable[RunRow], now: datetime | None = None
) -> tuple[tuple[str, int], ...]:
    """How many runs of the view are in each state (the view's own state aside): what a live
    update of the counts needs, without sorting or paging anything."""
    since = view.youngest(now or datetime.now(UTC))
    counts = Counter(row.state for row in rows if view.keeps(row, since))
    return tuple(sorted(counts.items()))


def listing(view: Filter, rows: Iterable[RunRow], now: datetime | None = None) -> Listing:
    since = view.youngest(now or datetime.now(UTC))
    kept = [row for row in rows if view.keeps(row, since)]
    counts = Counter(row.state for row in kept)
    matching = [row for row in kept if not view.state or row.state == view.state]
    # "age" ascending is youngest first, as a person reads "newest on top".
    descending = (view.order == "desc") != (view.sort == "age")
    matching.sort(key=lambda row: _key(view.sort, row), reverse=descending)
    start = (view.page - 1) * PAGE
    return Listing(
        rows=tuple(matching[start : start + PAGE]),
        counts=tuple(sorted(counts.items())),
        total=len(matching),
        pages=max(1, -(-len(matching) // PAGE)),
    )
