"""The few Kubernetes calls the operator makes itself, beyond what kopf does for it.

kopf watches, dispatches and posts events, but its patches are merge patches of its own making.
A fenced status write needs a JSON patch whose ``test`` operation the API server evaluates
atomically against the stored object — that is what lets the API server, not the operator,
refuse a superseded replica's write. So status writes, finalizer edits, the namespace lookup and
what a declared agent needs (its Agent, its Secrets) go through the official client. Patches
return the object as patched, which the next write is computed from: no read in between.

That client blocks, so its calls run in a thread pool of their own (``THREADS``), never on the
event loop's default executor: whatever else a process puts there (a tool's blocking work, a
library's DNS lookups) cannot make a fenced status write wait, and a slow Kubernetes call cannot
hold up anything else. The client's connection pool is sized to the thread pool, so a thread never
waits for a connection either.

The pool's threads go to two lanes (``Lane``): the calls of runs at work (a lease holder's fenced
status writes, the Secrets its model calls need) take a free thread before any call that starts
work (a claim, the reads before a first lease). When 1,000 runs start at once, the starts queue,
not the writes of the runs already going: a queue in front of the pool serves the holder's lane
first, so a status write waits for the next thread to free, not for every start queued before it.
The runs waiting to start wait a little longer; they hold nothing yet.

Given ``Metrics``, it times every status patch and each call's wait for a thread, by lane
(``agentrun_status_write_seconds``, ``agentrun_kube_pool_wait_seconds``): what says whether the
pool is big enough.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import json
import os
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from agentrun.operator._agent_resource import AGENT_PLURAL
from agentrun.operator._metrics import Metrics
from agentrun.operator._nesting import loads
from agentrun.operator._quota_resource import QUOTA_PLURAL
from agentrun.operator._resource import GROUP, PLURAL, VERSION

JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class StoredSecret:
    """A Secret as the API server gave it: its data (base64 values, never in a ``repr``) and its
    annotations (an opt-in to being used by Agents is one: ``kube_secrets``)."""

    data: dict[str, str] = field(repr=False)
    annotations: dict[str, str]


class Rejected(Exception):
    """The API server refused a patch: a failed ``test`` (superseded) or a conflict."""


THREADS = 32
"""Kubernetes calls one process has in flight at most, unless told otherwise
(``AGENTRUN_KUBE_THREADS``); each takes milliseconds on a quiet API server."""

T = TypeVar("T")


class Lane(enum.Enum):
    """Whose call it is, which decides who gets the next free thread."""

    HOLDER = "holder"
    """A run at work: its holder's status writes, the Secrets its calls need."""
    OTHER = "other"
    """Everything else: claims, the reads before a run's first lease, quotas."""


class _Threads:
    """The pool's threads, each handed to one call at a time, the holder's lane first.

    A call waits here, on the event loop, rather than in the pool's own queue (first come,
    first served), and is given its thread only once one is free, so it never waits behind
    another lane's call that came earlier."""

    def __init__(self, count: int) -> None:
        self._free = count
        self._waiting: dict[Lane, deque[asyncio.Future[None]]] = {lane: deque() for lane in Lane}

    async def take(self, lane: Lane) -> None:
        if self._free:
            self._free -= 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiting[lane].append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.give()  # handed a thread as it was cancelled: the next call's
            else:
                self._waiting[lane].remove(waiter)
            raise

    def give(self) -> None:
        for lane in Lane:  # the holder's lane first
            queue = self._waiting[lane]
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    waiter.set_result(None)
                    return
        self._free += 1


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """``callback`` on ``loop`` from a pool thread; nothing once the loop is closed (a call that
    outlived the operator's shutdown has no thread to hand on)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)


def _load(threads: int) -> client.ApiClient:
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    configuration = client.Configuration.get_default_copy()
    configuration.connection_pool_maxsize = threads
    return client.ApiClient(configuration)


class KubeApi:
    def __init__(
        self,
        api_client: client.ApiClient | None = None,
        metrics: Metrics | None = None,
        threads: int = THREADS,
    ) -> None:
        self._client = api_client or _load(threads)
        self._metrics = metrics
        self._objects = client.CustomObjectsApi(self._client)
        self._core = client.CoreV1Api(self._client)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="kubeapi")
        self._threads = _Threads(threads)
        self.holder_wrote: Callable[[float], None] | None = None
        """Told how long each of a lease holder's status writes took (``StartLimit``)."""

    @property
    def api_client(self) -> client.ApiClient:
        """The official client's connection, for callers that call it from threads of their own
        (``scrape_reviews``)."""
        return self._client

    async def _off_loop(self, call: Callable[[], T], lane: Lane = Lane.OTHER) -> T:
        """``call`` in this client's own threads, once ``lane`` is given one (see the module's
        notes). The thread is handed on when the call returns, not when its caller stops
        waiting: a cancelled caller's call still holds its thread until it is done."""
        loop = asyncio.get_running_loop()
        asked = time.monotonic()
        await self._threads.take(lane)
        if self._metrics is not None:
            self._metrics.kube_pool_wait_seconds.labels(lane=lane.value).observe(
                time.monotonic() - asked
            )
        try:
            running: Future[T] = self._pool.submit(call)
        except BaseException:
            self._threads.give()
            raise
        running.add_done_callback(lambda _: _call_soon(loop, self._threads.give))
        return await asyncio.wrap_future(running)

    async def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_custom(PLURAL, namespace, name)

    async def _get_custom(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One of our custom objects (an AgentRun or an Agent); None if it is gone."""

        def call() -> dict[str, Any] | None:
            try:
                # Decoded here rather than by the client, whose decoder has no bound on depth
                # (``nesting``): an Agent nested too deep is reported on, not fatal to its run.
                found = self._objects.get_namespaced_custom_object(
                    GROUP, VERSION, namespace, plural, name, _preload_content=False
                )
                return cast(dict[str, Any], loads(cast(Any, found).data))
            except ApiException as error:
                if error.status == 404:
                    return None
                raise

        return await self._off_loop(call)

    async def patch_status(
        self,
        namespace: str,
        name: str,
        operations: list[dict[str, Any]],
        lane: Lane = Lane.OTHER,
    ) -> dict[str, Any]:
        """Apply a JSON patch to the status subresource and return the object as patched;
        ``Rejected`` if a test fails. ``Lane.HOLDER`` for a lease holder's writes."""

        def call() -> dict[str, Any]:
            try:
                patched = self._objects.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, PLURAL, name, operations, _content_type=JSON_PATCH
                )
                return cast(dict[str, Any], patched)
            except ApiException as error:
                if error.status in (409, 422):
                    raise Rejected(error.body) from error
                raise

        asked = time.monotonic()
        answered = False  # by the API server, a refusal included: not an error on the way
        try:
            patched = await self._off_loop(call, lane)
            answered = True
            return patched
        except Rejected:
            answered = True
            raise
        finally:
            took = time.monotonic() - asked
            if self._metrics is not None:
                self._metrics.status_write_seconds.labels(lane=lane.value).observe(took)
            # Only the API server's answers say how busy it is: a connection refused at once
            # is no sign of room.
            if answered and lane is Lane.HOLDER and self.holder_wrote is not None:
                self.holder_wrote(took)

    async def patch_object(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """Apply a JSON patch to the object (its metadata: finalizers) and return it as patched;
        None if it is gone, ``Rejected`` if a test fails."""

        def call() -> dict[str, Any] | None:
            try:
                patched = self._objects.patch_namespaced_custom_object(
                    GROUP, VERSION, namespace, PLURAL, name, operations, _content_type=JSON_PATCH
                )
                return cast(dict[str, Any], patched)
            except ApiException as error:
                if error.status in (409, 422):
                    raise Rejected(error.body) from error
                if error.status == 404:
                    return None
                raise

        return await self._off_loop(call)

    async def dry_run_patch(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> ApiException | None:
        """Have the API server admit or refuse a JSON patch of the run without storing it
        (``dryRun=All``: admission runs as for a real patch); its refusal, None if it took it.
        An answer a retry can change (a 5xx, a timeout) is raised, not returned."""

        def call() -> ApiException | None:
            try:
                self._objects.patch_namespaced_custom_object(
                    GROUP,
                    VERSION,
                    namespace,
                    PLURAL,
                    name,
                    operations,
                    dry_run="All",
                    _content_type=JSON_PATCH,
                )
            except ApiException as error:
                if error.status in range(400, 500) and error.status not in (408, 429):
                    return error  # a refusal; a timeout or throttling is asked again
                raise
            return None

        return await self._off_loop(call)

    async def namespace_labels(self, namespace: str) -> dict[str, str]:
        def call() -> dict[str, str]:
            found = self._core.read_namespace(namespace)
            return dict((found.metadata and found.metadata.labels) or {})

        return await self._off_loop(call)

    async def whoami(self) -> str:
        """The user name the API server authenticates this process as (a SelfSubjectReview, as
        ``kubectl auth whoami`` asks): ``system:serviceaccount:NAMESPACE:NAME`` in a pod."""

        def call() -> str:
            review = client.AuthenticationV1Api(self._client).create_self_subject_review(
                client.V1SelfSubjectReview(
                    api_version="authentication.k8s.io/v1", kind="SelfSubjectReview"
                )
            )
            status = review.status
            user = status.user_info if status is not None else None
            if user is None or not user.username:
                raise Rejected("the API server's SelfSubjectReview named no user")
            return str(user.username)

        return await self._off_loop(call)

    # -- what a declared agent needs: its Agent resource and the Secrets it references ---------

    async def get_agent(self, namespace: str, name: str) -> dict[str, Any] | None:
        return await self._get_custom(AGENT_PLURAL, namespace, name)

    async def secret(self, namespace: str, name: str) -> StoredSecret | None:
        """The Secret's data and annotations; None if there is none. In the holder's lane: a
        run at work waits on it for its next call."""

        def call() -> StoredSecret | None:
            try:
                found = self._core.read_namespaced_secret(name, namespace)
            except ApiException as error:
                if error.status == 404:
                    return None
                raise
            return StoredSecret(
                data={key: str(value) for key, value in (found.data or {}).items()},
                annotations=dict((found.metadata and found.metadata.annotations) or {}),
            )

        return await self._off_loop(call, Lane.HOLDER)

    # -- a namespace's RunQuotas ------------------------------------------------------------

    async def list_quotas(self, namespace: str) -> list[dict[str, Any]]:
        """The namespace's RunQuotas; none where the cluster has no RunQuota CRD (an install
        whose CRDs predate it): no quota can exist there."""

        def call() -> list[dict[str, Any]]:
            try:
                listed = self._objects.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, QUOTA_PLURAL
                )
            except ApiException as error:
                if error.status == 404:
                    return []
                raise
            return [dict(each) for each in cast(dict[str, Any], listed).get("items") or []]

        return await self._off_loop(call)

    async def patch_quota_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge ``status`` into the quota's status; a quota deleted meanwhile is let be."""

        def call() -> None:
            try:
                self._objects.patch_namespaced_custom_object_status(
                    GROUP, VERSION, namespace, QUOTA_PLURAL, name, {"status": status}
                )
            except ApiException as error:
                if error.status != 404:
                    raise

        await self._off_loop(call)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()  # type: ignore[no-untyped-call]


def status_message(error: ApiException) -> str:
    """The ``message`` of the ``Status`` the API server answered with (its own words, never the
    response's headers, which the client's text adds); its body as text when it is not one."""
    body = error.body.decode(errors="replace") if isinstance(error.body, bytes) else error.body
    try:
        status = json.loads(body or "")
    except ValueError:
        return str(body or "")
    return str(status.get("message", body)) if isinstance(status, dict) else str(body)
