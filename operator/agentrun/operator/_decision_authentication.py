"""Whether the API server authenticates decisions, asked before the operator acts on one.

An approval makes the operator make a call a person held; a resolution tells it whether a call
ran. The ``by`` of each is honest only because the chart's ValidatingAdmissionPolicy
(``agentrun-decisions``) refuses an entry appended in somebody else's name, or by a user without
the verb ``approve`` / ``resolve``. Nothing tells the operator that the policy is enforced: a
release can turn it off (``accessControl.decisionPolicy``), an API server can run with its
ValidatingAdmissionPolicy admission plugin disabled (the policy is listed, and nothing enforces
it), a cluster can be too old for the v1 policy. There, whoever may patch a run may approve in
anyone's name, and the operator would make the held call.

So before it acts on a decision the operator asks the API server itself: a dry run
(``dryRun=All``: admitted or refused, never stored) of a JSON patch that appends to the very run
an entry of the same kind, with a fresh id, in the name of nobody (a ``by`` that no user, the
operator's own included, can be). Only the policy's own refusal (``REFUSALS``) says decisions are
authenticated; the patch taken says they are not; any other refusal (the list appeared since the
run was seen, a list at its bound, a 403 of the operator's RBAC) says neither, and is raised
as ``Rejected``, so nothing is acted on and the worker tries again after its backoff, as it does
when the API server is away.

An answer is kept per namespace and kind, and used for ``VERDICT_MAX_AGE`` by every run of the
namespace: a policy binding may be scoped to namespaces, so one namespace's answer says nothing
of another's, and a dry run needs a run of the namespace anyway. Concurrent workers of one
namespace ask once (a lock per namespace and kind). So the requests grow with the namespaces
that are acting on decisions, not with the runs, and not with time: a worker whose run's spec has
not changed since it last asked (no decision appended since) takes the answer kept, however old
(``ask``): a run held because its decisions are not authenticated costs no request while it
waits, and a decision authenticated when it was appended stays so.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentrun.operator._kubeapi import KubeApi, Rejected, status_message

Kind = Literal["approvals", "resolutions"]
"""The ``spec`` list a person's decision is appended to."""

VERDICT_MAX_AGE = 10.0
"""Seconds an answer serves a namespace's runs whose spec changed: the longest a decision appended
after the policy stopped being enforced can be acted on."""

REFUSALS: Mapping[Kind, str] = {
    "approvals": "spec.approvals: by must be the user who appends the decision",
    "resolutions": "spec.resolutions: by must be the user who appends the answer",
}
"""How the chart's policy (templates/decision-policy.yaml) refuses an entry in somebody else's
name: the one refusal that says the API server authenticates that kind of decision."""

ACCEPT_VALUE = "accessControl.acceptUnauthenticatedDecisions"


@dataclass(frozen=True)
class _Verdict:
    why_not: str | None
    """None: decisions of the kind are authenticated; else why they may not be acted on."""
    at: float


def _probe(run: Mapping[str, Any], kind: Kind) -> list[dict[str, Any]]:
    """A JSON patch appending to ``run`` an entry of ``kind`` that nobody could have written. It
    tests nothing of the run: whatever else changed, the policy judges the entry appended, and a
    list that appeared since ``run`` was seen makes the patch replace it, which the CRD refuses."""
    token = secrets.token_hex(8)
    nobody = f"agentrun.dev/authentication-check-{token}"
    entry: dict[str, str] = (
        {"requestId": nobody, "decision": "deny", "by": nobody}
        if kind == "approvals"
        else {"callId": nobody, "outcome": "didNotRun", "by": nobody}
    )
    if isinstance((run.get("spec") or {}).get(kind), list):
        return [{"op": "add", "path": f"/spec/{kind}/-", "value": entry}]
    return [{"op": "add", "path": f"/spec/{kind}", "value": [entry]}]


class DecisionAuthentication:
    """Asks the API server, at most once per namespace and kind at a time, whether it refuses a
    decision in somebody else's name, and keeps the answer (see the module's notes)."""

    def __init__(
        self, api: KubeApi, *, accept_unauthenticated: bool, max_age: float = VERDICT_MAX_AGE
    ) -> None:
        self._api = api
        self.accept_unauthenticated = accept_unauthenticated
        self._max_age = max_age
        self._verdicts: dict[tuple[str, Kind], _Verdict] = {}
        self._asking: dict[tuple[str, Kind], asyncio.Lock] = {}

    async def unauthenticated(
        self, run: Mapping[str, Any], kinds: Sequence[Kind], *, ask: bool
    ) -> str | None:
        """Why the decisions of ``kinds`` that ``run`` holds may not be acted on, or None if they
        may (authenticated, or the install accepts them unauthenticated).

        Args:
            run: the AgentRun as last seen (its namespace, name and spec's lists are used).
            kinds: the lists of its spec that hold decisions about to be acted on.
            ask: whether the run's spec changed since its worker last asked: if not, a kept
                answer is used however old, and only a namespace never asked about is asked.

        Returns:
            None, or the reason, for the run's condition and event.

        Raises:
            Rejected: the API server refused the dry run for another reason than the policy's;
                the answer is not known yet.
            ApiException: the API server could not answer (the worker retries).
        """
        if self.accept_unauthenticated:
            return None
        for kind in kinds:
            why_not = await self._verdict(run, kind, ask)
            if why_not is not None:
                return why_not
        return None

    def _kept(self, key: tuple[str, Kind], ask: bool) -> _Verdict | None:
        kept = self._verdicts.get(key)
        if kept is not None and (not ask or time.monotonic() - kept.at < self._max_age):
            return kept
        return None

    async def _verdict(self, run: Mapping[str, Any], kind: Kind, ask: bool) -> str | None:
        meta = run["metadata"]
        key = (str(meta["namespace"]), kind)
        kept = self._kept(key, ask)
        if kept is None:
            async with self._asking.setdefault(key, asyncio.Lock()):
                kept = self._kept(key, ask) or await self._ask(run, kind)
                self._verdicts[key] = kept
        return kept.why_not

    async def _ask(self, run: Mapping[str, Any], kind: Kind) -> _Verdict:
        meta = run["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        refusal = await self._api.dry_run_patch(namespace, name, _probe(run, kind))
        now = time.monotonic()
        if refusal is None:
            return _Verdict(
                f"not acting on spec.{kind}: the API server took, in a dry run, an entry of "
                f"spec.{kind} appended to this run in somebody else's name, so nothing enforces "
                f"the chart's decisions policy in namespace {namespace} and anyone who may patch "
                f"the run can write {kind} in any name. Enforce it (Kubernetes 1.30 or later, "
                "its ValidatingAdmissionPolicy admission plugin on, the chart's "
                "accessControl.decisionPolicy true): the operator asks again when the run's spec "
                f"changes or the operator restarts. {ACCEPT_VALUE} true acts on them anyway, "
                "which is unsafe",
                now,
            )
        said = status_message(refusal) or str(refusal.reason)
        if REFUSALS[kind] in said:
            return _Verdict(None, now)
        raise Rejected(
            f"could not tell whether the API server authenticates spec.{kind} in namespace "
            f"{namespace}: its dry run of one in somebody else's name was refused otherwise "
            f"({refusal.status} {refusal.reason}: {said}); acting on none until it can tell"
        )
