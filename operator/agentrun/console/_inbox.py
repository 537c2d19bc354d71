"""What the inbox shows beside each waiting call: its arguments, from the run's frontier.

The API server's status names the call and its tool; what the call would do (refund 120 to whom)
is only in the frontier the store holds, as the kit masked it when it wrote it. The store is read
for a run only once the person may ``get`` it (an access review for the namespace, else for the
run), and each frontier is kept while the run's resourceVersion stays the same: an inbox reloaded
every time a row changes reads the store only for the runs that changed.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict

from pydantic import JsonValue

from agentrun._backend import Backend
from agentrun._checkpointing import Checkpointer
from agentrun._errors import AgentRunError
from agentrun.console._access import AccessPolicy
from agentrun.console._callers import Person
from agentrun.console._runs import RunRow

KEPT = 5_000
READERS = 16
"""Frontiers read at once, so an inbox of thousands does not open thousands of store requests."""

Arguments = dict[str, JsonValue]
"""A run's waiting calls' arguments, by call id."""


class InboxArguments:
    """Frontier reads for the inbox, cached per run and resourceVersion."""

    def __init__(self) -> None:
        self._kept: OrderedDict[tuple[str, str], Arguments] = OrderedDict()
        self._readers = asyncio.Semaphore(READERS)

    async def of(
        self, access: AccessPolicy, backend: Backend | None, person: Person, rows: list[RunRow]
    ) -> dict[str, Arguments]:
        """The arguments of each waiting call of ``rows``, by run uid; runs the person may not
        get, or whose frontier cannot be read now, have none."""
        if backend is None:
            return {}
        namespaces = {row.namespace for row in rows}
        whole = {ns for ns in namespaces if await access.may(person, "get", ns)}
        found = await asyncio.gather(
            *(self._one(access, backend, person, row, row.namespace in whole) for row in rows)
        )
        return {row.uid: arguments for row, arguments in zip(rows, found, strict=True)}

    async def _one(
        self, access: AccessPolicy, backend: Backend, person: Person, row: RunRow, allowed: bool
    ) -> Arguments:
        if not row.tenant:
            return {}
        if not allowed and not await access.may(person, "get", row.namespace, row.name):
            return {}
        key = (row.uid, row.resource_version)
        if key in self._kept:
            return self._kept[key]
        try:
            async with self._readers:
                checkpoint = await Checkpointer(backend.checkpoints).latest(row.tenant, row.uid)
        except AgentRunError:
            return {}
        arguments: Arguments = (
            {}
            if checkpoint is None
            else {pending.call.id: pending.call.arguments for pending in checkpoint.pending}
        )
        self._kept[key] = arguments
        while len(self._kept) > KEPT:
            self._kept.popitem(last=False)
        return arguments
