"""Status writes for a run, fenced so that the API server refuses a superseded replica's.

Every write the lease holder makes is a JSON patch that opens with
``{"op": "test", "path": "/status/lease/fence", "value": <its fence>}``. The API server applies a
JSON patch atomically against the stored object, so once a newer holder has written its higher
fence into the status, every patch the old holder sends fails its test and is rejected — even
one sent by a replica that was paused for a minute and woke up not knowing it had been replaced.

The takeover itself (writing the new fence) is guarded by the object's ``resourceVersion`` and
refuses to lower the fence. Writes that are not a holder's (conditions on first sight, a
tenancy rejection, a waiting run's "suspended") are guarded by ``resourceVersion`` alone and
retried on a conflict: they are the same whichever replica makes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentrun.operator.conditions import Status, initial_conditions, set_condition
from agentrun.operator.kubeapi import KubeApi, Rejected

ConditionUpdate = tuple[str, Status, str, str]
ATTEMPTS = 5


class Superseded(Exception):
    """A newer lease holder owns the run's status; this replica must stop writing it."""


class StatusWriter:
    def __init__(self, api: KubeApi, namespace: str, name: str) -> None:
        self.api = api
        self.namespace = namespace
        self.name = name
        self.fence: int | None = None

    async def _read(self) -> dict[str, Any] | None:
        return await self.api.get(self.namespace, self.name)

    @staticmethod
    def _operations(
        current: dict[str, Any], fields: dict[str, Any], conditions: Sequence[ConditionUpdate]
    ) -> list[dict[str, Any]]:
        status = current.get("status") or {}
        generation = int(current["metadata"].get("generation", 1))
        merged = status.get("conditions") or initial_conditions(generation)
        for type_, value, reason, message in conditions:
            merged = set_condition(merged, type_, value, reason, message, generation=generation)
        body = {**fields, "conditions": merged, "observedGeneration": generation}
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
        self, fields: dict[str, Any] | None = None, conditions: Sequence[ConditionUpdate] = ()
    ) -> None:
        """Write status fields and conditions: fenced if this writer holds the run."""
        for _ in range(ATTEMPTS):
            current = await self._read()
            if current is None:
                return
            if self.fence is None:
                guard = {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": current["metadata"]["resourceVersion"],
                }
            else:
                guard = {"op": "test", "path": "/status/lease/fence", "value": self.fence}
            try:
                await self.api.patch_status(
                    self.namespace,
                    self.name,
                    [guard, *self._operations(current, fields or {}, conditions)],
                )
                return
            except Rejected as rejected:
                if self.fence is not None:
                    raise Superseded(
                        f"status of {self.namespace}/{self.name} is held by a newer fence than "
                        f"{self.fence}"
                    ) from rejected
        raise Rejected(f"status of {self.namespace}/{self.name} kept changing under this write")

    async def take_over(
        self,
        holder: str,
        fence: int,
        *,
        resumed: bool,
        fields: dict[str, Any] | None = None,
        conditions: Sequence[ConditionUpdate] = (),
    ) -> None:
        """Write this holder's fence into the status; ``Superseded`` if a higher one is there."""
        for _ in range(ATTEMPTS):
            current = await self._read()
            if current is None:
                return
            status = current.get("status") or {}
            written = (status.get("lease") or {}).get("fence")
            if written is not None and written >= fence:
                raise Superseded(
                    f"status of {self.namespace}/{self.name} already carries "
                    f"fence {written}; this holder has {fence}"
                )
            written_fields: dict[str, Any] = {
                **(fields or {}),
                "lease": {"holder": holder, "fence": fence},
            }
            if resumed:
                written_fields["resumeCount"] = int(status.get("resumeCount") or 0) + 1
            guard = {
                "op": "test",
                "path": "/metadata/resourceVersion",
                "value": current["metadata"]["resourceVersion"],
            }
            try:
                await self.api.patch_status(
                    self.namespace,
                    self.name,
                    [guard, *self._operations(current, written_fields, conditions)],
                )
            except Rejected:
                continue
            self.fence = fence
            return
        raise Rejected(f"status of {self.namespace}/{self.name} kept changing under a takeover")
