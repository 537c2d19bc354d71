"""The operator's ``SecretResolver``: Kubernetes Secrets in the run's (or Agent's) namespace.

A declared agent names its key and its tools' tokens as ``valueFrom.secretKeyRef``; this reads
the Secret from the API server and hands the value to the request that needs it. What fails is
said with the reference (``name/key``), never with a value.

**A Secret read is kept for ``AGENTRUN_SECRET_MAX_AGE`` seconds** (``SecretCache``; 5 by default,
0 reads at every request). Read at every request, the model key alone cost four ``GET secrets``
a run, a fifth of what a run asks of the API server (``bench.agent_scale``). Why keeping it is
safe:

* *Rotation still takes effect*: a changed Secret is read within the max age, and at once after
  a service refused a value from it (401 or 403: ``refused``); a read that fails is not kept.
* *Nothing reaches disk, a log, a status or an event*: the data stay in this process's memory,
  in one dict keyed by namespace and name, as the API server returned them (base64); the entry
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
import json
import time
from dataclasses import dataclass, field

from kubernetes.client.exceptions import ApiException

from agentrun.operator._kubeapi import KubeApi
from agentrun.runner._secrets import SecretKeyRef, SecretUnavailableError

DEFAULT_MAX_AGE = 5.0

SecretData = dict[str, str] | None
"""A Secret's data (base64 values), None when there is no such Secret."""


@dataclass(frozen=True)
class _Read:
    at: float
    data: asyncio.Future[SecretData] = field(repr=False)


class SecretCache:
    """The Secrets this replica read in the last ``max_age`` seconds (see the module's notes)."""

    def __init__(self, api: KubeApi, max_age: float = DEFAULT_MAX_AGE) -> None:
        self.api = api
        self.max_age = max_age
        self._reads: dict[tuple[str, str], _Read] = {}

    async def data(self, namespace: str, name: str) -> SecretData:
        key = (namespace, name)
        now = time.monotonic()
        kept = self._reads.get(key)
        if kept is None or now - kept.at >= self.max_age:
            kept = _Read(now, asyncio.ensure_future(self.api.secret_data(namespace, name)))
            self._reads[key] = kept
            kept.data.add_done_callback(lambda read: self._arrived(key, kept, read))
        # Shielded: a run cancelled while it waits must not cancel the read the others wait on.
        return await asyncio.shield(kept.data)

    def forget(self, namespace: str, name: str) -> None:
        self._reads.pop((namespace, name), None)

    def _arrived(self, key: tuple[str, str], kept: _Read, read: asyncio.Future[SecretData]) -> None:
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
    cache: SecretCache
    namespace: str

    async def resolve(self, ref: SecretKeyRef) -> str:
        try:
            data = await self.cache.data(self.namespace, ref.name)
        except Exception as error:  # the API server away, or access denied: say which
            raise SecretUnavailableError(
                ref,
                f"the API server did not give Secret {self.namespace}/{ref.name} ({_cause(error)})",
            ) from error
        if data is None:
            raise SecretUnavailableError(ref, f"namespace {self.namespace} has no such Secret")
        if ref.key not in data:
            raise SecretUnavailableError(
                ref,
                f"Secret {self.namespace}/{ref.name} has no key {ref.key!r} "
                f"(it has: {', '.join(sorted(data)) or 'none'})",
            )
        try:
            return base64.b64decode(data[ref.key], validate=True).decode()
        except (binascii.Error, UnicodeDecodeError) as error:
            # The cause is said by its type alone: its text would quote the value's bytes.
            raise SecretUnavailableError(
                ref, f"its value is not UTF-8 text ({type(error).__name__})"
            ) from error

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
        said = f"{error.status} {error.reason}: {_status_message(error)}"
    return f"{type(error).__name__}: {said}"[:CAUSE_CHARS]


def _status_message(error: ApiException) -> str:
    """The ``message`` of the ``Status`` the API server answered with; its body as text when
    it is not one."""
    body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else error.body
    try:
        status = json.loads(body or "")
    except ValueError:
        return str(body or "")
    return str(status.get("message", body)) if isinstance(status, dict) else str(body)
