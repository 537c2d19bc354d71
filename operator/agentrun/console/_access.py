"""What a person may do, as the API server answers it: SelfSubjectAccessReviews made as them.

The store, which holds a run's transcript and timeline, is guarded by nobody but the console:
the API server does not know it. So before the console reads a run from the store, or shows a
row its watch gave it, it asks the API server whether this person may ``get`` that AgentRun (or
``list`` AgentRuns in its namespace), with a SelfSubjectAccessReview sent as them (their token,
or impersonating them). Every user may create one (``system:basic-user``), so the console needs
no right to review others, and RBAC, whatever its bindings and aggregations, answers.

Answers are kept a few seconds (``TTL``), per user and groups, so a page of 5,000 runs costs one
review per namespace and not one per row, and a binding removed takes effect within seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Protocol

from agentrun.console._apiserver import ApiServer
from agentrun.console._callers import Person
from agentrun.operator._resource import GROUP, PLURAL

TTL = 5.0
KEPT = 10_000
"""Answers kept at most (the oldest go first): a bound on memory whatever the traffic."""

Question = tuple[str, str, str, str]
"""(verb, namespace, name, resource): ``""`` for all namespaces or any name."""


class AccessPolicy(Protocol):
    """What a page asks before it shows or reads anything of a run."""

    async def may(
        self, person: Person, verb: str, namespace: str, name: str = "", resource: str = PLURAL
    ) -> bool: ...

    async def listable(self, person: Person, namespaces: set[str]) -> set[str]: ...


class Everything:
    """A local console's policy: its one user may see and answer for every run of the store
    it was pointed at, as ``agentrun inspect`` and ``agentrun resolve`` let them."""

    async def may(
        self, person: Person, verb: str, namespace: str, name: str = "", resource: str = PLURAL
    ) -> bool:
        return True

    async def listable(self, person: Person, namespaces: set[str]) -> set[str]:
        return set(namespaces)


class Access:
    """Cached access reviews, made as the person they are about."""

    def __init__(self, api: ApiServer) -> None:
        self._api = api
        self._answers: OrderedDict[tuple[str, Question], tuple[float, bool]] = OrderedDict()

    async def may(
        self, person: Person, verb: str, namespace: str, name: str = "", resource: str = PLURAL
    ) -> bool:
        """Whether ``person`` may ``verb`` ``resource`` (``name`` in ``namespace``)."""
        key = (person.key, (verb, namespace, name, resource))
        kept = self._answers.get(key)
        if kept is not None and kept[0] > time.monotonic():
            return kept[1]
        allowed = await self._review(person, verb, namespace, name, resource)
        self._answers[key] = (time.monotonic() + TTL, allowed)
        self._answers.move_to_end(key)
        while len(self._answers) > KEPT:
            self._answers.popitem(last=False)
        return allowed

    async def _review(
        self, person: Person, verb: str, namespace: str, name: str, resource: str
    ) -> bool:
        attributes = {"group": GROUP, "resource": resource, "verb": verb}
        if namespace:
            attributes["namespace"] = namespace
        if name:
            attributes["name"] = name
        answer = await self._api.call(
            "POST",
            "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            person.caller,
            body={
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attributes},
            },
        )
        # Anything but a clear "allowed" (an error, the API server away) is a no: the console
        # shows nothing it cannot prove the person may see.
        return answer.ok and (answer.body.get("status") or {}).get("allowed") is True

    async def listable(self, person: Person, namespaces: set[str]) -> set[str]:
        """The namespaces among ``namespaces`` whose AgentRuns ``person`` may list."""
        if await self.may(person, "list", ""):
            return set(namespaces)
        ordered = sorted(namespaces)
        allowed = await asyncio.gather(*(self.may(person, "list", ns) for ns in ordered))
        return {ns for ns, ok in zip(ordered, allowed, strict=True) if ok}
