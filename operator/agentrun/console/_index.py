"""Every run the console's one watch has seen, and the browsers listening for their changes.

One watch per console replica feeds this index; every page is rendered from it and every live
update is pushed from it, so fifty browsers cost the API server what one does. A listener is a
bounded queue: a browser that stops reading (a laptop closed mid-session) loses its queue, not
the console's memory, and is told to catch up by reloading when it comes back.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from agentrun.console._runs import RunRow

QUEUE = 2048
"""Changes a listener may have unread before it is dropped and told to catch up."""

Kind = Literal["upsert", "delete", "reset"]


@dataclass(frozen=True)
class Change:
    """A run that changed or went away, or ``reset``: everything may have changed (the watch
    listed afresh, or this listener fell behind)."""

    kind: Kind
    row: RunRow | None = None


class Listener:
    """One browser's stream of changes."""

    def __init__(self) -> None:
        self._queue: asyncio.Queue[Change] = asyncio.Queue(QUEUE)

    def offer(self, change: Change) -> bool:
        """Queue ``change``; False once the browser has fallen too far behind."""
        try:
            self._queue.put_nowait(change)
        except asyncio.QueueFull:
            return False
        return True

    async def next(self) -> Change:
        return await self._queue.get()

    def drain(self) -> list[Change]:
        """Every change queued now, without waiting."""
        drained = []
        while not self._queue.empty():
            drained.append(self._queue.get_nowait())
        return drained


class RunIndex:
    """The runs as the watch last showed them, by uid; changes fanned out to listeners."""

    def __init__(self) -> None:
        self._runs: dict[str, RunRow] = {}
        self._listeners: set[Listener] = set()
        self._epoch = secrets.token_hex(4)
        self._changes = 0
        self.synced = asyncio.Event()
        """Set once the first listing is in: pages rendered before it would show nothing."""

    @property
    def generation(self) -> str:
        """Names the index's state: it changes with every change, and differs between two
        console processes. A page rendered at one generation whose stream opens at another
        missed something (a change between the render and the stream, or a restart), and is
        told to refetch."""
        return f"{self._epoch}-{self._changes}"

    def __len__(self) -> int:
        return len(self._runs)

    def rows(self) -> Iterator[RunRow]:
        return iter(self._runs.values())

    def by_name(self, namespace: str, name: str) -> RunRow | None:
        return next(
            (r for r in self._runs.values() if r.namespace == namespace and r.name == name), None
        )

    def namespaces(self) -> set[str]:
        return {row.namespace for row in self._runs.values()}

    def replace_all(self, rows: list[RunRow]) -> None:
        """What a fresh listing says: the index becomes it, and every listener catches up."""
        self._runs = {row.uid: row for row in rows}
        self.synced.set()
        self._tell(Change("reset"))

    def upsert(self, row: RunRow) -> None:
        self._runs[row.uid] = row
        self._tell(Change("upsert", row))

    def delete(self, row: RunRow) -> None:
        if self._runs.pop(row.uid, None) is not None:
            self._tell(Change("delete", row))

    def _tell(self, change: Change) -> None:
        self._changes += 1
        for listener in list(self._listeners):
            if not listener.offer(change):
                self._listeners.discard(listener)

    @contextlib.contextmanager
    def listening(self) -> Iterator[Listener]:
        listener = Listener()
        self._listeners.add(listener)
        try:
            yield listener
        finally:
            self._listeners.discard(listener)

    @property
    def listened_to(self) -> bool:
        """Whether any browser listens for changes now."""
        return bool(self._listeners)

    def listening_to(self, listener: Listener) -> bool:
        """Whether ``listener`` still gets changes (False once dropped for falling behind)."""
        return listener in self._listeners
