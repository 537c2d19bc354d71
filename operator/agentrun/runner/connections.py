"""One HTTP connection pool for everything a declared agent talks to.

The model endpoint, each MCP server and each HTTP tool get a client of their own — their own
headers and timeouts — over one shared ``httpx2`` transport, so connections are pooled and kept
alive across calls and across runs, no request waits for a thread, and the only ceiling on calls
in flight is the pool's (``max_connections``). Closing the pool closes every connection; the
clients themselves hold nothing to close.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx2

MAX_CONNECTIONS = 1000
MAX_KEEPALIVE = 100


class Connections:
    def __init__(
        self, *, max_connections: int = MAX_CONNECTIONS, max_keepalive: int = MAX_KEEPALIVE
    ) -> None:
        self.transport = httpx2.AsyncHTTPTransport(
            limits=httpx2.Limits(
                max_connections=max_connections, max_keepalive_connections=max_keepalive
            )
        )

    def client(
        self, *, headers: Mapping[str, str] | None = None, timeout: float | None = None
    ) -> httpx2.AsyncClient:
        """A client over the shared pool; ``timeout`` bounds each request (None: none)."""
        return httpx2.AsyncClient(transport=self.transport, headers=headers, timeout=timeout)

    async def aclose(self) -> None:
        await self.transport.aclose()
