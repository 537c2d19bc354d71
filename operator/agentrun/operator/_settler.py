"""One replica settling a run's undecidable calls by asking the tools' services itself.

A call left in flight by a worker that died, and not safe to repeat, waits for a person
(``Indeterminate``). When its tool declares a way to settle it (``settle`` on the Agent: send
the request again with the same ``Idempotency-Key``, or probe the service), the replica that
would carry the run on asks the service once the call's note is due (``_settlement_notes``,
``_settle_timers``), and answers in ``spec.resolutions`` like a person, in its own name, with
the evidence:

1. It takes the run's fenced lease in the store, as a worker does, so no worker dispatches
   anything of the run meanwhile, and notes ``Asking`` (one more attempt; due again when the
   lease would lapse, for another replica to take over if this one dies mid-probe).
2. It reads the frontier, and asks about each due call through the kit's ``settle_call`` with
   the run's agent built as its worker builds it (its pinned revision, or nothing is asked) and
   the run's masker: what the service answered is masked before it is written anywhere.
3. It appends every conclusive verdict in ONE JSON patch of the spec, guarded by the
   ``resourceVersion`` it read, ``by`` the user the API server knows the operator as, and
   ``evidence``. A person who answered meanwhile wins: a refused patch is read again, and a call
   answered by then is left out, never answered twice (the list is a map keyed by ``callId``).
4. It notes ``LeftToPerson`` with what it saw for every inconclusive call, posts ``Settled`` or
   ``SettleInconclusive``, and lets the lease go. The spec's change wakes the run, and its
   worker records the resolution under its own lease and resumes, as for a person's answer.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, cast

from kubernetes.client.exceptions import ApiException
from pydantic import JsonValue, ValidationError

from agentrun._checkpointing import Checkpointer
from agentrun._decisions import append_operations
from agentrun._errors import RunLeaseError
from agentrun._frontier import Checkpoint
from agentrun._leases import Leaseholder
from agentrun._redaction import Masker
from agentrun.operator import _settlement_notes as notes
from agentrun.operator._conditions import is_terminal
from agentrun.operator._context import OperatorContext
from agentrun.operator._events import notice
from agentrun.operator._kubeapi import Rejected, status_message
from agentrun.operator._policies import lease_policy
from agentrun.operator._resource import AgentRunSpec, Resolution, Settlement
from agentrun.runner._agents import AgentDefinition
from agentrun.runner._settlement import Replay
from agentrun.runner._settling import settle_call

log = logging.getLogger(__name__)

SETTLED = "Settled"
INCONCLUSIVE = "SettleInconclusive"
ATTEMPTS = 5
"""Patches tried when the run keeps changing under them (each read again first)."""
RESULT_LIMIT = 4096
"""The CRD's bound on a resolution's ``result``."""


@dataclass(frozen=True)
class _Asked:
    """What asking about one call came to: a resolution to append, or why it is a person's."""

    call_id: str
    tool: str
    mode: str
    resolution: Resolution | None
    evidence: str


def mode_of(definition: AgentDefinition, tool: str) -> str:
    """How ``tool`` is settled (``replay`` or ``probe``), for events and metrics."""
    found = definition.tool(tool)
    way = found.settlement if found is not None else None
    if way is None:
        return "none"
    return "replay" if isinstance(way, Replay) else "probe"


class Settler:
    """Settles runs for one replica; ``who`` is the user the API server knows it as."""

    def __init__(self, context: OperatorContext, who: Callable[[], Awaitable[str]]) -> None:
        self.context = context
        self.who = who

    async def settle(self, body: Mapping[str, Any]) -> float | None:
        """Ask about the run's due calls (see the module's notes). None when done (or nothing
        was due); else the seconds until the lease another holds would lapse, to look again
        then."""
        meta = body["metadata"]
        namespace, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
        current = await self.context.api.get(namespace, name)
        if current is None or not _same_run(current, uid):
            return None
        now = notes.utcnow()
        due = [call for call in notes.to_settle(current) if notes.is_due(call, now)]
        tenant = (current.get("status") or {}).get("tenant")
        if not due or not tenant:
            return None
        try:
            spec = AgentRunSpec.model_validate(dict(current.get("spec") or {}))
        except ValidationError:
            return None  # its worker says what is wrong with it
        policy = lease_policy(spec, self.context.config)
        leases = self.context.backend.leases
        try:
            holder = await Leaseholder.acquire(
                leases, tenant, uid, self.context.config.worker_id, policy
            )
        except RunLeaseError as held_elsewhere:
            log.info("run=%s is held: settled later, if at all (%s)", uid, held_elsewhere)
            held = await leases.held(tenant, uid)
            return None if held is None else held.remaining
        async with holder:
            # Counted before anything can fail: a round that fails or is killed is one of the
            # attempts, and another replica begins the next once this lease would have lapsed.
            lapses = notes.utcnow() + timedelta(seconds=policy.ttl)
            begun = {str(c["callId"]): notes.asking(c, lapses) for c in due}
            masker = self.context.backend.masker
            # Written over the run as read before the lease was taken, or as read again if it
            # changed since (a person answered?): only the calls still to settle are asked about.
            written = await self._note(namespace, name, uid, begun, masker, current)
            if written is None:
                return None
            due = [call for call in notes.to_settle(written) if call["callId"] in begun]
            log.info(
                "%s asks the services of run %s/%s (uid %s, fence %d) about calls %s",
                holder.lease.holder,
                namespace,
                name,
                uid,
                holder.fence,
                ", ".join(str(call["callId"]) for call in due),
            )
            resolved = await self.context.resolver.resolve(namespace, spec.agent)
            definition = resolved.registered.definition
            masker = masker.with_secrets(resolved.registered.secrets)
            checkpoint = await Checkpointer(self.context.backend.checkpoints).latest(tenant, uid)
            asked: list[_Asked] = []
            for call in due:
                holder.ensure_held()
                asked.append(await self._ask(definition, checkpoint, call, masker))
            holder.ensure_held()
            await self._conclude(body, namespace, name, uid, asked, masker)
        return None

    async def _ask(
        self,
        definition: AgentDefinition,
        checkpoint: Checkpoint | None,
        call: Mapping[str, Any],
        masker: Masker,
    ) -> _Asked:
        call_id, tool_name = str(call["callId"]), str(call["tool"])
        mode = mode_of(definition, tool_name)

        def person(why: str) -> _Asked:
            return _Asked(call_id, tool_name, mode, None, masker.text(why))

        tool = definition.tool(tool_name)
        if tool is None or tool.settlement is None:
            return person(f"the agent's tool {tool_name} declares no way to settle it any more")
        if checkpoint is None or checkpoint.agent_revision != definition.revision:
            return person(
                "the run's frontier is gone or pins another revision of its agent than "
                f"{definition.revision}: its tools' answers would not be the run's"
            )
        pending = next((p for p in checkpoint.pending if p.call.id == call_id), None)
        if pending is None:
            return person("no frontier of the run holds the call's arguments, so none is asked")
        verdict = await settle_call(
            tool, pending, tenant=checkpoint.tenant, run_id=checkpoint.run_id, masker=masker
        )
        evidence = verdict.evidence  # masked by settle_call with this masker
        if verdict.outcome is None:
            return _Asked(call_id, tool_name, mode, None, evidence)
        result = (verdict.result or "") if verdict.outcome == "ran" else None
        if result is not None and len(result) > RESULT_LIMIT:
            return _Asked(
                call_id,
                tool_name,
                mode,
                None,
                f"{evidence} (its result is {len(result)} characters, more than the "
                f"{RESULT_LIMIT} a resolution holds)",
            )
        resolution = Resolution(
            call_id=call_id,
            outcome=verdict.outcome,
            result=result,
            by=await self.who(),
            evidence=evidence[: notes.EVIDENCE_LIMIT],
        )
        return _Asked(call_id, tool_name, mode, resolution, evidence)

    async def _conclude(
        self,
        body: Mapping[str, Any],
        namespace: str,
        name: str,
        uid: str,
        asked: Sequence[_Asked],
        masker: Masker,
    ) -> None:
        """Append the conclusive answers, note the others, and say so."""
        metrics = self.context.metrics
        answers = [each for each in asked if each.resolution is not None]
        left = {each.call_id: each.evidence for each in asked if each.resolution is None}
        try:
            appended = await self._append(namespace, name, uid, answers)
        except ApiException as refused:
            if refused.status != 403:
                raise
            # The decisions policy names another ServiceAccount (a second release): a person's.
            said = f"the API server refused the operator's answer: {status_message(refused)}"
            left.update({each.call_id: f"{each.evidence}; {said}" for each in answers})
            appended = []
        for each in appended:
            outcome = each.resolution.outcome if each.resolution is not None else ""
            metrics.settled_calls.labels(mode=each.mode, outcome=outcome).inc()
            notice(
                masker,
                body,
                SETTLED,
                f"call {each.call_id} ({each.tool}) settled by {each.mode}: "
                f"{'it ran' if outcome == 'ran' else 'it did not run'}; {each.evidence}",
            )
        if not left:
            return
        for each in asked:
            if each.call_id in left:
                metrics.settled_calls.labels(mode=each.mode, outcome="inconclusive").inc()
                notice(
                    masker,
                    body,
                    INCONCLUSIVE,
                    f"call {each.call_id} ({each.tool}) is left to a person: {left[each.call_id]}",
                    warning=True,
                )
        current = await self.context.api.get(namespace, name)
        if current is not None:
            listed = {str(c.get("callId")): c for c in notes.to_settle(current)}
            ended = {
                call_id: notes.left_to_person(listed[call_id], message)
                for call_id, message in left.items()
                if call_id in listed
            }
            await self._note(namespace, name, uid, ended, masker, current)

    async def _append(
        self, namespace: str, name: str, uid: str, answers: Sequence[_Asked]
    ) -> list[_Asked]:
        """One JSON patch appending ``answers`` not answered yet; those appended."""
        for _ in range(ATTEMPTS):
            current = await self.context.api.get(namespace, name)
            if current is None or not _same_run(current, uid):
                return []
            done = notes.answered(current)
            fresh = [each for each in answers if each.call_id not in done]
            if not fresh:
                return []
            entries = [
                each.resolution.model_dump(mode="json", by_alias=True, exclude_none=True)
                for each in fresh
                if each.resolution is not None
            ]
            operations = append_operations(current, "resolutions", entries[0])
            operations += [
                {"op": "add", "path": "/spec/resolutions/-", "value": entry}
                for entry in entries[1:]
            ]
            try:
                await self.context.api.patch_object(namespace, name, operations)
                return fresh
            except Rejected:
                continue  # changed since read (a person answered?): read it and decide again
        raise Rejected(f"{namespace}/{name} kept changing under the operator's resolutions")

    async def _note(
        self,
        namespace: str,
        name: str,
        uid: str,
        written: Mapping[str, Settlement],
        masker: Masker,
        current: Mapping[str, Any] | None = None,
    ) -> Mapping[str, Any] | None:
        """Write the notes ``written`` of the calls still to settle into the status (guarded by
        ``resourceVersion``, read again when refused); the run as written, None when none of
        them is (answered, or the run moved on) or it is gone."""
        for _ in range(ATTEMPTS):
            if current is None:
                current = await self.context.api.get(namespace, name)
            if current is None or not _same_run(current, uid):
                return None
            settling = {str(call["callId"]) for call in notes.to_settle(current)}
            kept = {call_id: note for call_id, note in written.items() if call_id in settling}
            calls = notes.noted(current.get("status") or {}, kept)
            if calls is None:
                return None
            operations = [
                {
                    "op": "test",
                    "path": "/metadata/resourceVersion",
                    "value": current["metadata"]["resourceVersion"],
                },
                {
                    "op": "add",
                    "path": "/status/indeterminateCalls",
                    "value": masker.json(cast(JsonValue, calls)),
                },
            ]
            try:
                return await self.context.api.patch_status(namespace, name, operations)
            except Rejected:
                current = None
        raise Rejected(f"status of {namespace}/{name} kept changing under the settling notes")


def _same_run(run: Mapping[str, Any], uid: str) -> bool:
    """The object is still the run asked about, not deleted, not over."""
    meta = run["metadata"]
    return (
        meta.get("uid") == uid
        and not meta.get("deletionTimestamp")
        and not is_terminal((run.get("status") or {}).get("conditions") or [])
    )
