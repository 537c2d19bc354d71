"""Who a request to the API server is made as: the person at the browser, never the console.

The console holds no right to approve, resolve, suspend or delete, and no right to read a run
that its user may not read: every such request goes to the API server as the person, so RBAC and
the decisions admission policy decide, and the ``by`` the policy checks is who they are. A person
reaches the API server in one of two ways:

* ``BearerToken``: their own token, passed through (sign-in with a token, or an authenticating
  proxy that passes the access token the API server trusts);
* ``Impersonated``: the console's own credentials with ``Impersonate-User`` and
  ``Impersonate-Group`` headers, for a proxy that passes only who the person is. The console's
  ServiceAccount may then impersonate, which is all it may do beyond watching runs.

The console's own identity (``None`` where a ``Caller`` is taken) is used for one thing: the
watch that feeds every page, whose rows are shown only in namespaces the person may list.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class BearerToken:
    """A person's own token, sent as it is; never in a ``repr`` or a log."""

    token: str = field(repr=False)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


@dataclass(frozen=True)
class Impersonated:
    """A person named by an authenticating proxy, whom the console impersonates."""

    user: str
    groups: tuple[str, ...] = ()

    def headers(self) -> list[tuple[str, str]]:
        # One header per group: what kubectl --as-group sends, and what the API server reads.
        return [("Impersonate-User", self.user)] + [("Impersonate-Group", g) for g in self.groups]


@dataclass(frozen=True)
class LocalUser:
    """The person at a local console (``agentrun console``, over a store, without Kubernetes):
    whoever can reach its loopback address, named by the operating system. There is no API
    server to send anything to as them; ``ApiServer`` refuses this caller outright, so a
    request can never fall back to anyone else's identity."""

    user: str


Caller = BearerToken | Impersonated | LocalUser


@dataclass(frozen=True)
class Person:
    """A signed-in person: who the API server says they are, and how to act as them."""

    user: str
    groups: tuple[str, ...]
    caller: Caller = field(repr=False)

    @property
    def key(self) -> str:
        """What access answers are cached under: the same user and groups get the same answers."""
        return "\x00".join((self.user, *sorted(self.groups)))
