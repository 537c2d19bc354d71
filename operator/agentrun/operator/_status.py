"""Status writes for a run, fenced so that the API server refuses a superseded replica's.

Every write the lease holder makes is a JSON patch that opens with
``{"op": "test", "path": "/status/lease/fence", "value": <its fence>}``. The API server applies a
JSON patch atomically against the stored object, so once a newer holder has written its higher
fence into the status, every patch the old holder sends fails its test and is rejected — even
one sent by a replica that was paused for a minute and woke up not knowing it had been replaced.

The takeover itself (writing the new fence) is guarded by the object's ``resourceVersion`` and
refuses to lower the fence, or to take up a run that is finished, being deleted or gone. It is
computed from the object as this replica last had it from the API server (the claim's or the
finalizer's patch returned it a moment before), and reads the object only if that test fails.
Writes that are not a holder's (a tenancy rejection, a waiting run's "suspended") are guarded by
``resourceVersion`` alone and retried on a conflict: they are the same whichever replica makes
them.

A holder does not read the object before each write. Nobody else writes the status of a run
while it is held, so the object its previous patch returned is the status as it stands; only the
spec can have moved (an approval, ``suspend``), which would make the ``observedGeneration`` and
the conditions' generation it stamps stale. So such a patch also ``test``s the generation it was
computed from. If any test fails, or the patch no longer applies, the holder reads the object and
decides as before: superseded if the fence moved, else written again from what it read. That
halves the requests a run costs the API server (a GET preceded every write).

A holder's progress at a boundary goes through ``write_soon``: written at once when it is a
transition (the first checkpoint, a refused one) or when ``PROGRESS_EVERY`` has passed since the
last write, else kept (``_pending``) and carried by the next write, whichever comes first: the
next boundary's, the run's end, or a timer at the due time. A quick run so makes three status
writes (the takeover, its first checkpoint, its end) instead of one per boundary.

Every string a patch writes (a condition's message, the checkpoint's last error, a run's final
answer) is masked with the backend's ``Masker`` in ``_operations``, which builds every patch:
the status is stored by the API server and read by anyone who may read the AgentRun.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from agentrun._errors import AgentRunError
from agentrun._outcomes import SUCCEEDED, Outcome
from agentrun._redaction import Masker
from agentrun.operator._conditions import (
    ConditionUpdate,
    find,
    initial_conditions,
    is_terminal,
    set_condition,
)
from agentrun.operator._kubeapi import KubeApi, Lane, Rejected
from agentrun.operator._pending import Pending, Stamped, stamped
from agentrun.operator._resource import AgentRunStatus, LeaseStatus

ATTEMPTS = 5
PROGRESS_EVERY = 1.0
"""Seconds a holder's progress may wait to be written (``write_soon``)."""
NOTHING = AgentRunStatus()
"""A status write that sets no field (only conditions, or only the first ones)."""


class Superseded(AgentRunError):
    """A newer lease holder owns the run's status; this replica must stop writing it."""

    outcome = Outcome.SUPERSEDED


class PinnedElsewhere(Superseded):
    """The run's tenant is pinned to another tenant than the one this holder took its lease
    in (the namespace was relabelled while two replicas decided it): what this holder wrote
    there is not the run's."""


def _fence_of(run: Mapping[str, Any]) -> int | None:
    """The fence of the holder that last took the run over, as its status says."""
    fence = ((run.get("status") or {}).get("lease") or {}).get("fence")
    return None if fence is None else int(fence)


def _reason_of(run: Mapping[str, Any]) -> str | None:
    succeeded = find((run.get("status") or {}).get("conditions") or [], SUCCEEDED) or {}
    reason = succeeded.get("reason")
    return None if reason is None else str(reason)


def _remembered(run: Mapping[str, Any]) -> dict[str, Any]:
    """What the next write is computed from: the generation and the status. Not the rest of the
    object (``managedFields`` alone is several KB), since a replica holds hundreds of runs."""
    kept: dict[str, Any] = {"metadata": {"generation": run["metadata"].get("generation", 1)}}
    if "status" in run:
        kept["status"] = run["status"]
    return kept


def _transition(status: Mapping[str, Any], conditions: Sequence[ConditionUpdate]) -> bool:
    """Whether any of ``conditions`` changes the status of its type in ``status``."""
    shown = status.get("conditions") or ()
    return any(
        (find(shown, type_) or {}).get("status") != value for type_, value, _, _ in conditions
    )


class StatusWriter:
    def __init__(self, api: KubeApi, namespace: str, name: str, masker: Masker) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.masker = masker
        self.fence: int | None = None
        self._patched: dict[str, Any] | None = None
        """The object as this holder's last patch returned it; None when not holding."""
        self._pending = Pending()
        self._written_at = float("-inf")
        """When this holder last wrote (``time.monotonic``)."""
        self._timer: asyncio.Task[None] | None = None
        self._failed: Exception | None = None
        """What the timer's write met, for the next ``write_soon`` to raise."""
        self._lock = asyncio.Lock()

    def shown(self) -> Mapping[str, Any]:
        """The status as this holder's last write left it (empty when it holds nothing): fresher
        than the watch's view right after the write."""
        return (self._patched or {}).get("status") or {}

    async def _read(self) -> dict[str, Any] | None:
        return await self.api.get(self.namespace, self.name)

    def release(self) -> None:
        """This replica no longer holds the run: its next writes are not a holder's, and its
        progress that waits is dropped (the next holder reports its own)."""
        self.fence = None
        self._patched = None
        self._pending.take()
        self._failed = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    async def _patch(self, operations: list[dict[str, Any]]) -> None:
        lane = Lane.OTHER if self.fence is None else Lane.HOLDER
        patched = await self.api.patch_status(self.namespace, self.name, operations, lane)
        self._patched = _remembered(patched) if self.fence is not None else None
        self._written_at = time.monotonic()

    def _superseded(self) -> Superseded:
        return Superseded(
            f"status of {self.namespace}/{self.name} is held by a newer fence than {self.fence}"
        )

    def _operations(
        self,
        current: Mapping[str, Any],
        fields: AgentRunStatus,
        conditions: Sequence[Stamped],
    ) -> list[dict[str, Any]]:
        """The patch that writes ``fields`` (those set in it; one set to None is removed) and
        ``conditions`` over ``current``, stamped with its generation."""
        status = current.get("status") or {}
        generation = int(current["metadata"].get("generation", 1))
        merged = status.get("conditions") or initial_conditions(generation)
        for (type_, value, reason, message), at in conditions:
            masked = self.masker.text(message)
            merged = set_condition(
                merged, type_, value, reason, masked, generation=generation, now=at
            )
        written = fields.model_dump(mode="json", by_alias=True, exclude_unset=True)
        body: dict[str, Any] = {
            **{key: self.masker.json(item) for key, item in written.items()},
            "conditions": merged,
            "observedGeneration": generation,
        }
        operations: list[dict[str, Any]] = []
        if "status" not in current:
            operations.append({"op": "add", "path": "/status", "value": {}})
        for key, value in body.items():
            if value is not None:
                operations.append({"op": "add", "path": f"/status/{key}", "value": value})
            elif key in status:
                operations.append({"op": "remove", "path": f"/status/{key}"})
        return operations

    async def write(
        self,
        fields: AgentRunStatus = NOTHING,
        conditions: Sequence[ConditionUpdate] = (),
        *,
        unless_reason: str | None = None,
    ) -> bool:
        """Write status fields and conditions (after the progress that waits, if any): fenced if
        this writer holds the run. With ``unless_reason``, write nothing if the run's
        ``Succeeded`` reason already is that one, as the object stands when the patch applies: of
        several replicas saying the same thing, one writes it (and posts its event). Whether it
        was written."""
        async with self._lock:
            return await self._carrying_pending(fields, conditions, unless_reason)

    async def _carrying_pending(
        self,
        fields: AgentRunStatus,
        conditions: Sequence[ConditionUpdate],
        unless_reason: str | None,
    ) -> bool:
        """``write`` under the lock: the progress that waits goes first, and waits again if
        nothing was written."""
        waiting, earlier = self._pending.take()
        if self._timer is not None:  # asleep: this write carries what it would have
            self._timer.cancel()
            self._timer = None
        update = {name: getattr(fields, name) for name in fields.model_fields_set}
        merged = waiting.model_copy(update=update)
        try:
            written = await self._write(merged, [*earlier, *stamped(conditions)], unless_reason)
        except Superseded:
            raise
        except Exception:
            self._pending.add(waiting, earlier)  # not written: it waits for the next write
            raise
        if not written:
            self._pending.add(waiting, earlier)
        return written

    async def _write(
        self, fields: AgentRunStatus, conditions: Sequence[Stamped], unless_reason: str | None
    ) -> bool:
        known = self._patched
        if self.fence is not None and known is not None:
            if unless_reason is not None and _reason_of(known) == unless_reason:
                return False
            generation = {
                "op": "test",
                "path": "/metadata/generation",
                "value": known["metadata"].get("generation", 1),
            }
            fenced = {"op": "test", "path": "/status/lease/fence", "value": self.fence}
            try:
                await self._patch(
                    [fenced, generation, *self._operations(known, fields, conditions)]
                )
                return True
            except Rejected:
                self._patched = None  # read it, and decide from what is there
        for _ in range(ATTEMPTS):
            current = await self._read()
            if current is None:
                return False
            if unless_reason is not None and _reason_of(current) == unless_reason:
                return False
            if self.fence is None:
                guard = {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": current["metadata"]["resourceVersion"],
                }
            else:
                if _fence_of(current) != self.fence:
                    raise self._superseded()
                guard = {"op": "test", "path": "/status/lease/fence", "value": self.fence}
            try:
                await self._patch([guard, *self._operations(current, fields, conditions)])
                return True
            except Rejected as rejected:
                if self.fence is not None:
                    raise self._superseded() from rejected
        raise Rejected(f"status of {self.namespace}/{self.name} kept changing under this write")

    async def write_soon(
        self, fields: AgentRunStatus, conditions: Sequence[ConditionUpdate] = ()
    ) -> None:
        """A holder's progress: written now if it is a transition or due, else with the next
        write, at the latest ``PROGRESS_EVERY`` after the last one (see the module's notes).
        Raises what the timer's write of earlier progress met (``Superseded``, say)."""
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed
        known = self._patched
        due = time.monotonic() - self._written_at >= PROGRESS_EVERY
        now = self.fence is None or known is None or due
        if now or _transition((known or {}).get("status") or {}, conditions):
            await self.write(fields, conditions)
            return
        self._pending.add(fields, stamped(conditions))
        if self._timer is None:
            wait = self._written_at + PROGRESS_EVERY - time.monotonic()
            self._timer = asyncio.create_task(self._write_later(wait))

    async def _write_later(self, wait: float) -> None:
        await asyncio.sleep(max(0.0, wait))
        self._timer = None  # awake: a write like any other from here on, never cancelled
        async with self._lock:
            if not self._pending:  # another write carried it meanwhile
                return
            try:
                await self._carrying_pending(NOTHING, (), None)
            except Exception as error:  # said by the next ``write_soon``, where the run is
                self._failed = error

    async def catch_up(self) -> None:
        """A finished run whose spec was edited since: say that this generation was observed
        (``observedGeneration``, the conditions' too), so GitOps tools stop showing it as
        progressing. Nobody holds a finished run, so the write is guarded by the
        ``resourceVersion`` it was computed from, and any replica may make it."""
        for _ in range(ATTEMPTS):
            current = await self._read()
            if current is None:
                return
            status = current.get("status") or {}
            generation = int(current["metadata"].get("generation", 1))
            if int(status.get("observedGeneration") or 0) >= generation:
                return
            conditions = [
                {**condition, "observedGeneration": generation}
                for condition in status.get("conditions") or ()
            ]
            try:
                await self.api.patch_status(
                    self.namespace,
                    self.name,
                    [
                        {
                            "op": "test",
                            "path": "/metadata/resourceVersion",
                            "value": current["metadata"]["resourceVersion"],
                        },
                        {"op": "add", "path": "/status/observedGeneration", "value": generation},
                        {"op": "add", "path": "/status/conditions", "value": conditions},
                    ],
                )
                return
            except Rejected:
                continue
        raise Rejected(f"status of {self.namespace}/{self.name} kept changing under a catch-up")

    async def take_over(
        self,
        holder: str,
        fence: int,
        *,
        resumed: bool,
        fields: AgentRunStatus = NOTHING,
        conditions: Sequence[ConditionUpdate] = (),
        tenant: str | None = None,
        known: Mapping[str, Any] | None = None,
        vet: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> int | None:
        """Write this holder's fence into the status, over ``known`` (the object as this replica
        last had it from the API server) while it stands, else over the object as read.
        ``Superseded`` if a higher fence is there, if the run is finished (another holder ended
        it meanwhile), or if it is gone or being deleted: its store data may already be
        forgotten, and a holder that went on would start it again from nothing. ``tenant``, the
        one the lease was taken in, is pinned with the fence unless the run has one
        (``PinnedElsewhere`` if it has another). ``vet`` judges the object the fence is written
        over, and raises to refuse it. The fence the status carried before (None: this is the
        run's first lease), which says whether this holder takes the run over from another."""
        current = known
        async with self._lock:
            for _ in range(ATTEMPTS):
                if current is None:
                    current = await self._read()
                if current is None or current["metadata"].get("deletionTimestamp"):
                    raise Superseded(f"{self.namespace}/{self.name} is gone or being deleted")
                status = current.get("status") or {}
                if is_terminal(status.get("conditions") or []):
                    raise Superseded(f"{self.namespace}/{self.name} has finished already")
                written = _fence_of(current)
                if written is not None and written >= fence:
                    raise Superseded(
                        f"status of {self.namespace}/{self.name} already carries "
                        f"fence {written}; this holder has {fence}"
                    )
                pinned = status.get("tenant")
                if tenant is not None and pinned not in (None, tenant):
                    raise PinnedElsewhere(
                        f"{self.namespace}/{self.name} is pinned to tenant {pinned}; this holder "
                        f"took its lease in {tenant}"
                    )
                if vet is not None:
                    vet(current)
                taken: dict[str, object] = {"lease": LeaseStatus(holder=holder, fence=fence)}
                if tenant is not None:
                    taken["tenant"] = tenant
                if resumed:
                    taken["resume_count"] = int(status.get("resumeCount") or 0) + 1
                written_fields = fields.model_copy(update=taken)
                guard = {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": current["metadata"]["resourceVersion"],
                }
                operations = self._operations(current, written_fields, stamped(conditions))
                try:
                    patched = await self.api.patch_status(
                        self.namespace, self.name, [guard, *operations], Lane.HOLDER
                    )
                except Rejected:
                    current = None
                    continue
                self.fence, self._patched = fence, _remembered(patched)
                self._written_at = time.monotonic()
                return written
        raise Rejected(f"status of {self.namespace}/{self.name} kept changing under a takeover")
