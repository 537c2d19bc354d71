"""The operator's ``SecretResolver``: Kubernetes Secrets in the run's (or Agent's) namespace.

A declared agent names its key and its tools' tokens as ``valueFrom.secretKeyRef``; this reads
the Secret from the API server and hands the value to the request that needs it. What fails is
said with the reference (``name/key``), never with a value.

**A Secret is used only for the Agents it names** in its annotation ``agentrun.dev/agents`` (a
comma-separated list of Agent names, or ``*`` for every Agent of its namespace). The operator may
read every Secret of a namespace; whoever may write an Agent there may not, and without this
check could have the operator send any Secret's value to an endpoint they choose (the chart's
admission policy ``agentrun-agent-secrets`` refuses such an Agent up front; this holds where the
policy is not enforced). A ``KubeSecrets`` resolves for one Agent and checks the annotation
before it looks at the data.

**What the Agent's author learns is "not usable", and no more**: a Secret that does not exist,
one the operator may not read, one that does not name the Agent, a missing key and a value that
is not UTF-8 all fail with the same ``SecretNotUsableError``, which names the reference and what
it takes, never the Secret's keys or whether it exists. The operator's log (masked, read by the
cluster's admins) says which it was. Only an API server that did not answer says so: that is
about the cluster, not the Secret, and worth waiting out.

**A Secret read is kept for ``AGENTRUN_SECRET_MAX_AGE`` seconds** (``SecretCache``; 5 by default,
0 reads at every request). Read at every request, the model key alone cost four ``GET secrets``
a run, a fifth of what a run asks of the API server (``bench.agent_scale``). Why keeping it is
safe:

* *Rotation still takes effect*: a changed Secret is read within the max age, and at once after
  a service refused a value from it (401 or 403: ``refused``); a read that fails is not kept.
* *Nothing reaches disk, a log, a status or an event*: the data stay in this process's memory,
  in one dict keyed by namespace and name, as the API server returned them (base64), beside the
  Secret's annotations (which each Agent's use is checked against at every request); the entry
  shows no data in its ``repr``, is let go once it is ``max_age`` old, and the value is decoded
  only for the request that uses it: the read-per-request it replaces held the same bytes in
  memory for the length of a request, this for ``max_age`` seconds more.
* *No namespace sees another's*: the key is (namespace, name), and a ``KubeSecrets`` reads only
  its own namespace, as before.
* *Many runs at once cost one read*: runs that ask while a read is on its way wait for it rather
  than each sending their own (a thousand queued runs start within a second).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from agentrun._errors import AgentRunError
from agentrun.operator._kubeapi import KubeApi, StoredSecret, status_message
from agentrun.runner._secrets import SecretKeyRef, SecretUnavailableError

DEFAULT_MAX_AGE = 5.0
AGENTS_ANNOTATION = "agentrun.dev/agents"
"""The annotation a Secret names the Agents that may use it in (see the module's notes)."""
EVERY_AGENT = "*"

log = logging.getLogger(__name__)

SecretRead = StoredSecret | None
"""A Secret's data and annotations, None when there is no such Secret."""


class SecretNotUsableError(SecretUnavailableError):
    """A referenced Secret cannot be used by this Agent. One message for every reason (see the
    module's notes), so that an Agent's status tells its author nothing about a Secret they may
    not read; retryable, as a Secret is often created or annotated after the Agent."""

    def __init__(self, ref: SecretKeyRef, namespace: str, agent: str) -> None:
        self.ref = ref
        AgentRunError.__init__(
            self,
            f"Secret reference {ref} is not usable: it must exist in namespace {namespace} with "
            f"key {ref.key} and be annotated {AGENTS_ANNOTATION} listing Agent {agent} (or "
            f"{EVERY_AGENT}); the request that needed it was not sent",
        )


def opted_in(annotations: Mapping[str, str], agent: str) -> bool:
    """Whether a Secret with ``annotations`` lets Agent ``agent`` of its namespace use it."""
    listed = {each.strip() for each in annotations.get(AGENTS_ANNOTATION, "").split(",")}
    return EVERY_AGENT in listed or agent in listed


@dataclass(frozen=True)
class _Read:
    at: float
    data: asyncio.Future[SecretRead] = field(repr=False)


class SecretCache:
    """The Secrets this replica read in the last ``max_age`` seconds (see the module's notes)."""

    def __init__(self, api: KubeApi, max_age: float = DEFAULT_MAX_AGE) -> None:
        self.api = api
        self.max_age = max_age
        self._reads: dict[tuple[str, str], _Read] = {}

    async def secret(self, namespace: str, name: str) -> SecretRead:
        key = (namespace, name)
        now = time.monotonic()
        kept = self._reads.get(key)
        if kept is None or now - kept.at >= self.max_age:
            kept = _Read(now, asyncio.ensure_future(self.api.secret(namespace, name)))
            self._reads[key] = kept
            kept.data.add_done_callback(lambda read: self._arrived(key, kept, read))
        # Shielded: a run cancelled while it waits must not cancel the read the others wait on.
        return await asyncio.shield(kept.data)

    def forget(self, namespace: str, name: str) -> None:
        self._reads.pop((namespace, name), None)

    def _arrived(self, key: tuple[str, str], kept: _Read, read: asyncio.Future[SecretRead]) -> None:
        """A failed read is not kept (the next request reads again), nor one with no max age;
        one that came is let go once it is ``max_age`` old, so a Secret no run asks for any
        more (a deleted one, an Agent gone) does not stay in memory for the life of the
        process."""
        failed = read.cancelled() or read.exception() is not None
        if failed or self.max_age <= 0:
            self._expire(key, kept)
        else:
            asyncio.get_running_loop().call_later(self.max_age, self._expire, key, kept)

    def _expire(self, key: tuple[str, str], kept: _Read) -> None:
        if self._reads.get(key) is kept:  # not a newer read of the same Secret
            del self._reads[key]


@dataclass(frozen=True)
class KubeSecrets:
    """The Secrets of ``namespace`` as Agent ``agent`` may use them."""

    cache: SecretCache
    namespace: str
    agent: str

    async def resolve(self, ref: SecretKeyRef) -> str:
        try:
            found = await self.cache.secret(self.namespace, ref.name)
        except ApiException as error:
            if error.status != 403:
                raise self._not_given(ref, error) from error
            raise self._not_usable(ref, f"the operator may not read it ({_cause(error)})") from None
        except Exception as error:  # the API server away: say so, it is worth waiting out
            raise self._not_given(ref, error) from error
        if found is None:
            raise self._not_usable(ref, "there is no such Secret")
        if not opted_in(found.annotations, self.agent):
            raise self._not_usable(ref, f"its annotation {AGENTS_ANNOTATION} does not list it")
        if ref.key not in found.data:
            raise self._not_usable(ref, f"it has no key {ref.key!r}")
        try:
            return base64.b64decode(found.data[ref.key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as error:
            # The cause is said by its type alone: its text would quote the value's bytes.
            raise self._not_usable(
                ref, f"its value is not UTF-8 text ({type(error).__name__})"
            ) from None

    def _not_given(self, ref: SecretKeyRef, error: Exception) -> SecretUnavailableError:
        return SecretUnavailableError(
            ref, f"the API server did not give Secret {self.namespace}/{ref.name} ({_cause(error)})"
        )

    def _not_usable(self, ref: SecretKeyRef, why: str) -> SecretNotUsableError:
        """The error the Agent's author sees; which case it was goes to the operator's log."""
        agent = f"{self.namespace}/{self.agent}"
        log.warning("Agent %s: Secret reference %s is not usable: %s", agent, ref, why)
        return SecretNotUsableError(ref, self.namespace, self.agent)

    def refused(self, ref: SecretKeyRef) -> None:
        """A service refused a value from ``ref``'s Secret: read it afresh next time."""
        self.cache.forget(self.namespace, ref.name)


CAUSE_CHARS = 500
"""How much of a failed read's cause its message keeps: the API server's reason, not a page."""


def _cause(error: Exception) -> str:
    """What a failed read's cause says, for the run's status and events (which mask it, as
    everything they write): the API server's status and its own words (its ``Status``
    message), never the response's headers; or the error the connection to it met."""
    said = str(error)
    if isinstance(error, ApiException):
        said = f"{error.status} {error.reason}: {status_message(error)}"
    return f"{type(error).__name__}: {said}"[:CAUSE_CHARS]
