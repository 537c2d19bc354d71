"""The console's one watch of AgentRuns: list, then watch from the list's resourceVersion.

The usual informer loop, kept small: a listing in pages (``limit``/``continue``) replaces the
index; the watch then applies each event; a watch the server ends (its timeout) is resumed from
the last resourceVersion seen (bookmarks keep it fresh while nothing changes); a ``410 Gone``
(the version is too old) or any error lists afresh after a backoff. A console started before its
API server answers keeps trying, and says so in its log.
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from agentrun.console._apiserver import ApiServer
from agentrun.console._index import RunIndex
from agentrun.console._runs import RunRow, row_of
from agentrun.operator._resource import GROUP, PLURAL, VERSION

log = logging.getLogger("agentrun.console")

PAGE = 500
WATCH_SECONDS = 300
BACKOFF = (0.5, 1.0, 2.0, 5.0, 10.0)


class Gone(Exception):
    """The watch's resourceVersion is too old: list again."""


def collection(namespace: str | None) -> str:
    scope = f"/namespaces/{namespace}" if namespace else ""
    return f"/apis/{GROUP}/{VERSION}{scope}/{PLURAL}"


async def _list(api: ApiServer, index: RunIndex, namespace: str | None) -> str:
    rows: list[RunRow] = []
    token = ""
    while True:
        params = {"limit": str(PAGE)} | ({"continue": token} if token else {})
        answer = await api.call("GET", collection(namespace), None, params=params)
        if not answer.ok:
            raise RuntimeError(f"listing AgentRuns was refused: {answer.message}")
        rows.extend(row_of(item) for item in answer.body.get("items") or ())
        meta = answer.body.get("metadata") or {}
        token = str(meta.get("continue") or "")
        if not token:
            index.replace_all(rows)
            return str(meta.get("resourceVersion", ""))


async def _watch(api: ApiServer, index: RunIndex, namespace: str | None, version: str) -> str:
    params = {
        "watch": "1",
        "allowWatchBookmarks": "true",
        "resourceVersion": version,
        "timeoutSeconds": str(WATCH_SECONDS),
    }
    async for event in api.stream(collection(namespace), params, WATCH_SECONDS):
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == 410:
                raise Gone()
            raise RuntimeError(f"the watch of AgentRuns failed: {obj.get('message')}")
        version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
        if kind in ("ADDED", "MODIFIED"):
            index.upsert(row_of(obj))
        elif kind == "DELETED":
            index.delete(row_of(obj))
    return version


async def keep_watching(api: ApiServer, index: RunIndex, namespace: str | None) -> None:
    """List and watch until cancelled; never returns otherwise."""
    failures = 0
    while True:
        try:
            version = await _list(api, index, namespace)
            failures = 0
            while True:
                version = await _watch(api, index, namespace, version)
        except Gone:
            log.info("the watch's resourceVersion expired; listing AgentRuns again")
        except (aiohttp.ClientError, RuntimeError, ValueError, TimeoutError) as error:
            delay = BACKOFF[min(failures, len(BACKOFF) - 1)]
            failures += 1
            log.warning("watching AgentRuns: %s; again in %.1f s", error, delay)
            await asyncio.sleep(delay)
