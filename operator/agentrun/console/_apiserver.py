"""The console's HTTP client to the API server: requests as a person, and the console's watch.

Async (aiohttp, which the runner already uses for its connection pool), so a page that waits on
the API server holds no thread, and fifty browsers' live updates cost one task each and one
watch in all. Where the API server is and how to trust it come from the official client's
loaders (in-cluster, else the kubeconfig), as the operator's do; the console's own token is
re-read through the client's refresh hook, so a projected ServiceAccount token that rotates is
followed.
"""

from __future__ import annotations

import json
import os
import ssl
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from kubernetes import client, config

from agentrun.console._callers import Caller, Impersonated, LocalUser

JSON_PATCH = "application/json-patch+json"


@dataclass(frozen=True)
class Answer:
    """What the API server answered: its HTTP status and its JSON body (a ``Status`` on errors)."""

    status: int
    body: dict[str, Any]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300

    @property
    def message(self) -> str:
        """The API server's own words for a refusal (the admission policy's message, RBAC's)."""
        return str(self.body.get("message") or f"HTTP {self.status}")


def _configuration() -> client.Configuration:
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    else:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    return client.Configuration.get_default_copy()


def _ssl_context(configuration: client.Configuration) -> ssl.SSLContext | bool:
    if not configuration.verify_ssl:
        return False
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert or None)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    return context


class ApiServer:
    """Requests to one API server, as a person (``Caller``) or as the console itself."""

    def __init__(self, configuration: client.Configuration | None = None) -> None:
        self._configuration = configuration or _configuration()
        self._server = str(self._configuration.host).rstrip("/")
        self._ssl = _ssl_context(self._configuration)
        self._session: aiohttp.ClientSession | None = None

    def _own_headers(self) -> dict[str, str]:
        refresh = getattr(self._configuration, "refresh_api_key_hook", None)
        if refresh is not None:
            refresh(self._configuration)
        # The client's loaders keep the token under "BearerToken" (recent releases) or
        # "authorization" (older ones), "Bearer " included.
        keys = self._configuration.api_key or {}
        token = keys.get("BearerToken") or keys.get("authorization")
        return {"Authorization": str(token)} if token else {}

    def _headers(self, caller: Caller | None) -> list[tuple[str, str]]:
        if caller is None:
            return list(self._own_headers().items())
        if isinstance(caller, Impersonated):
            return list(self._own_headers().items()) + caller.headers()
        if isinstance(caller, LocalUser):
            raise TypeError("a local console's user has no identity at an API server")
        return list(caller.headers().items())

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self._ssl, limit=64),
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=10),
                # A watch event is one line of JSON, and an AgentRun's may run to hundreds of
                # KiB (sixteen conditions of 32 KiB messages): readline's limit follows this.
                read_bufsize=2**21,
            )
        return self._session

    async def call(
        self,
        method: str,
        path: str,
        caller: Caller | None,
        *,
        body: object = None,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
        within: float = 30.0,
    ) -> Answer:
        """``method path`` as ``caller`` (the console itself when None); never raises for an
        HTTP error, which the ``Answer`` carries: the caller shows the API server's refusal."""
        headers = self._headers(caller)
        data = None
        if body is not None:
            data = json.dumps(body)
            headers.append(("Content-Type", content_type))
        try:
            async with self._client().request(
                method,
                self._server + path,
                headers=headers,
                data=data,
                params=params,
                timeout=aiohttp.ClientTimeout(total=within),
            ) as response:
                text = await response.text()
                try:
                    parsed = json.loads(text) if text else {}
                except ValueError:
                    parsed = {"message": text[:500]}
                return Answer(response.status, parsed if isinstance(parsed, dict) else {})
        except (aiohttp.ClientError, TimeoutError) as error:
            return Answer(503, {"message": f"the API server could not be reached: {error}"})

    async def stream(
        self, path: str, params: Mapping[str, str], seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        """A watch's events as the console, one JSON object a line, until the server ends it.

        Raises:
            aiohttp.ClientError: The connection failed or the server refused the watch.
        """
        async with self._client().get(
            self._server + path,
            headers=self._headers(None),
            params=params,
            timeout=aiohttp.ClientTimeout(total=seconds + 30, sock_read=seconds + 30),
        ) as response:
            response.raise_for_status()
            async for line in response.content:
                if line.strip():
                    yield json.loads(line)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
