"""One HTTP connection pool for everything a declared agent talks to.

The model endpoint, each MCP server and each HTTP tool get a client of their own — their own
headers and timeouts — over one shared transport, so connections are pooled and kept alive across
calls and across runs, no request waits for a thread, and the only ceiling on calls in flight is
the pool's (``max_connections``). Closing the pool closes every connection; the clients
themselves hold nothing to close.

**Why aiohttp under the ``httpx2`` clients.** The SDKs (``openai``, ``anthropic``, ``mcp``) take
an ``httpx2.AsyncClient``, so the clients stay ``httpx2``; what moves the bytes is aiohttp's
connection pool, through ``_Transport``, an ``httpx2`` transport over one aiohttp session.
Profiled under ``bench.agent_scale``, ``httpx2``'s own pool (``httpcore2``) took half of a
replica's interpreter: assigning each request walks every connection of the pool, and ``h11``
checks each header in Python; aiohttp keeps its pool per host and parses HTTP in C.

``_Transport`` is written here rather than taken from ``httpx-aiohttp`` (used until 0.2.0):
of that package only its base class was left, every method of it overridden or unused, for the
points below, each of which its own transport does otherwise:

* **A failure means what it meant.** That package's transport names a refused connection and
  one dropped after the request was sent alike (``ConnectTimeout``); callers decide from the
  exception whether a request reached the server — an HTTP tool reports ``ConnectError`` as "the
  call was not made" and anything else as indeterminate — so ``_MEANING`` names aiohttp's
  exceptions as ``httpx2``'s own transport does.
* **Headers go out as written** (``Idempotency-Key``, not ``idempotency-key``), as ``httpx2``
  sent them: names are case-insensitive by the RFC, not by every service.
* **No request sent twice**: aiohttp resends an idempotent method once on a closed connection;
  that is switched off (``_Transport._opened``, through ``agentrun._compat.aiohttp``).
* **No cookie jar**: the pool is shared by every agent and tenant of a replica, and a cookie one
  server set must not ride along on anyone's next request. Neither the session's jar (aiohttp's)
  nor each client's (``httpx2`` keeps one per client, and a tool's client serves every run) keeps
  one: ``_no_cookies`` refuses every cookie offered.

**An egress policy, when given** (the operator's, ``agentrun.runner._egress``): every request
is checked before aiohttp has it, and the pool's resolver leaves out the addresses the policy
refuses, so nothing the policy refuses is ever connected to. Without one (the kit's CLI) the
pool connects wherever a URL points.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from http.cookiejar import CookieJar, DefaultCookiePolicy

import aiohttp
import httpx2

from agentrun._compat.aiohttp import never_resend
from agentrun.runner._egress import EgressPolicy, ScreeningResolver

MAX_CONNECTIONS = 1000
KEEPALIVE_SECONDS = 2.0
"""How long an idle connection is kept for the next request: less than the idle timeout of the
servers an agent talks to (uvicorn's and Node's 5 s, nginx's 75 s), so a request never goes out
on a connection the server is closing. Such a request fails after it was sent — a tool call left
indeterminate that the server never saw. ``httpx2``'s pool checked each idle socket for the
server's close before reusing it; aiohttp's knows of the close only once the event loop has read
it, which a busy loop does late (``bench.agent_scale`` saw hundreds of such MCP calls with 5 s)."""


def _no_cookies() -> CookieJar:
    """A jar that refuses every cookie a server sets (no domain is allowed to set one)."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


_MEANING: tuple[tuple[type[Exception], type[httpx2.TransportError]], ...] = (
    # Most specific first: the first match wins.
    (aiohttp.ConnectionTimeoutError, httpx2.ConnectTimeout),  # connecting, or waiting for the pool
    (aiohttp.ClientConnectorError, httpx2.ConnectError),  # no connection: the request was not sent
    (aiohttp.InvalidURL, httpx2.UnsupportedProtocol),
    (aiohttp.SocketTimeoutError, httpx2.ReadTimeout),
    (aiohttp.ServerDisconnectedError, httpx2.RemoteProtocolError),  # sent, closed without answer
    (aiohttp.ClientPayloadError, httpx2.ReadError),  # the answer cut short
    (aiohttp.ClientConnectionError, httpx2.ReadError),  # reset or broken once connected
    (aiohttp.ClientError, httpx2.TransportError),
)


@contextmanager
def _named_as_httpx2() -> Iterator[None]:
    try:
        yield
    except aiohttp.ClientError as error:
        meant = next(meant for raised, meant in _MEANING if isinstance(error, raised))
        raise meant(f"{type(error).__name__}: {error}") from error


class _Body(httpx2.AsyncByteStream):
    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _named_as_httpx2():
            async for chunk in self.response.content.iter_any():
                yield chunk

    async def aclose(self) -> None:
        self.response.release()


class _Transport(httpx2.AsyncBaseTransport):
    """``httpx2``'s transport interface over one aiohttp session, made at the first request
    inside the event loop that serves it (aiohttp binds a session to its loop)."""

    def __init__(self, *, max_connections: int, policy: EgressPolicy | None) -> None:
        self.max_connections = max_connections
        self.policy = policy
        self.resolver: ScreeningResolver | None = None
        # What httpx2's own transport verifies against by default: the system's certificates
        # (truststore), and SSL_CERT_FILE / SSL_CERT_DIR when set.
        self.ssl_context = httpx2.create_ssl_context()
        self.session: aiohttp.ClientSession | None = None

    def _opened(self) -> aiohttp.ClientSession:
        if self.session is None:
            if self.policy is not None:
                self.resolver = ScreeningResolver(self.policy)
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self.max_connections,
                    keepalive_timeout=KEEPALIVE_SECONDS,
                    ssl=self.ssl_context,
                    resolver=self.resolver,
                ),
                cookie_jar=aiohttp.DummyCookieJar(),
            )
            # tests/runner/test_http_tool.py fails if a request is ever sent twice.
            never_resend(self.session)
        return self.session

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        if self.policy is not None:
            self.policy.before_connecting(request.url)
        session = self._opened()
        timeout = request.extensions.get("timeout", {})
        try:
            body: bytes | httpx2.AsyncByteStream | None = request.content or None
        except httpx2.RequestNotRead:  # a streamed upload: aiohttp frames it itself
            body = request.stream  # type: ignore[assignment]
            request.headers.pop("transfer-encoding", None)
        with _named_as_httpx2():
            response = await session.request(
                request.method,
                str(request.url),
                headers=[
                    (name.decode(), value.decode("latin-1")) for name, value in request.headers.raw
                ],
                data=body,
                allow_redirects=False,  # the httpx2 client follows them, if it is told to
                auto_decompress=False,  # and decodes the body
                compress=False,
                timeout=aiohttp.ClientTimeout(
                    sock_connect=timeout.get("connect"),
                    sock_read=timeout.get("read"),
                    connect=timeout.get("pool"),
                ),
                server_hostname=request.extensions.get("sni_hostname"),
            )
        return httpx2.Response(
            response.status,
            headers=response.raw_headers,
            stream=_Body(response),
            request=request,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": (response.reason or "").encode(),
            },
        )

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.close()
        if self.resolver is not None:  # a resolver given to aiohttp is not closed by it
            await self.resolver.close()


class Connections:
    def __init__(
        self, *, max_connections: int = MAX_CONNECTIONS, policy: EgressPolicy | None = None
    ) -> None:
        self.transport = _Transport(max_connections=max_connections, policy=policy)

    async def screen(self, url: str) -> None:
        """Check ``url`` against the pool's egress policy (if any) without connecting.

        Raises:
            EgressRefused: the policy refuses it.
        """
        if self.transport.policy is not None:
            await self.transport.policy.screen(url)

    def client(
        self,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        on_request: Callable[[httpx2.Request], Awaitable[None]] | None = None,
        on_response: Callable[[httpx2.Response], Awaitable[None]] | None = None,
    ) -> httpx2.AsyncClient:
        """A client over the shared pool; ``timeout`` bounds each request (None: none),
        ``on_request`` is shown every request the client hands to the transport and
        ``on_response`` every response it gets back (before any body is read)."""
        hooks: dict[str, list[Callable[..., Awaitable[None]]]] = {}
        if on_request is not None:
            hooks["request"] = [on_request]
        if on_response is not None:
            hooks["response"] = [on_response]
        return httpx2.AsyncClient(
            transport=self.transport,
            headers=headers,
            timeout=timeout,
            cookies=_no_cookies(),
            event_hooks=hooks or None,
        )

    async def aclose(self) -> None:
        await self.transport.aclose()
