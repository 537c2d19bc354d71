"""A loopback HTTP/1.1 gateway in front of a test server, to fail at the transport's layer.

An MCP call is several POSTs to one URL (``server/discover``, then ``tools/call``, then
``tools/list``), so a server that is down for the whole call says nothing about the POST that
matters. The gateway forwards one request per connection (``Connection: close`` both ways, so a
client opens a new connection for each: nothing rides on a kept-alive one) and can be told,
by the JSON-RPC method of a request:

* ``go_down_after(method)``: once that request is answered, stop listening, so the client's next
  connection is refused — before any byte of the next request is written — until ``up()``;
* ``drop(method)``: forward that request, let the server answer it, and close the client's
  connection without the answer: the server acted, the client cannot know.

``forwarded`` lists the methods it handed to the server, in order. It runs in a thread of its own
with its own event loop, like the servers it stands in front of.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import urlsplit


def _listening(port: int) -> socket.socket:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    return sock


def _method(body: bytes) -> str | None:
    try:
        request = json.loads(body)
    except ValueError:
        return None
    return request.get("method") if isinstance(request, dict) else None


def _closing(head: bytes) -> bytes:
    """The request's head with ``Connection: close`` in place of any ``Connection`` it had."""
    lines = [
        line for line in head.split(b"\r\n") if line and not line.lower().startswith(b"connection:")
    ]
    return b"\r\n".join([*lines, b"Connection: close", b"", b""])


@dataclass
class Gateway:
    upstream: tuple[str, int]
    port: int = 0
    forwarded: list[str | None] = field(default_factory=list)
    down_after: list[str] = field(default_factory=list)
    dropping: list[str] = field(default_factory=list)
    loop: asyncio.AbstractEventLoop | None = None
    server: asyncio.Server | None = None

    def go_down_after(self, method: str) -> None:
        """Stop listening once the next ``method`` request is answered (until ``up``)."""
        self.down_after.append(method)

    def drop(self, method: str) -> None:
        """Let the server answer the next ``method`` request, and close without the answer."""
        self.dropping.append(method)

    def up(self) -> None:
        """Listen again on the same port (nothing if it is listening)."""
        assert self.loop is not None
        asyncio.run_coroutine_threadsafe(self._listen(), self.loop).result(timeout=10)

    async def _listen(self) -> None:
        if self.server is None or not self.server.is_serving():
            self.server = await asyncio.start_server(self._serve, sock=_listening(self.port))
            self.port = self.server.sockets[0].getsockname()[1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            method = _method(body)
            self.forwarded.append(method)
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.upstream)
            upstream_writer.write(_closing(head) + body)
            await upstream_writer.drain()
            answer = await upstream_reader.read()  # the server closes once it has answered
            upstream_writer.close()
            if method in self.dropping:
                self.dropping.remove(method)
                writer.transport.abort()
                return
            if method in self.down_after:
                self.down_after.remove(method)
                assert self.server is not None
                self.server.close()  # before the client reads the answer and connects again
            writer.write(answer)
            await writer.drain()
        finally:
            writer.close()


@contextmanager
def gateway(url: str) -> Iterator[tuple[Gateway, str]]:
    """A ``Gateway`` in front of the server at ``url``, and the same URL through the gateway."""
    where = urlsplit(url)
    assert where.hostname is not None
    assert where.port is not None
    proxy = Gateway(upstream=(where.hostname, where.port))
    started = threading.Event()
    stop: list[asyncio.Event] = []

    async def run() -> None:
        proxy.loop = asyncio.get_running_loop()
        await proxy._listen()
        stop.append(asyncio.Event())
        started.set()
        await stop[0].wait()
        if proxy.server is not None:
            proxy.server.close()

    thread = threading.Thread(target=lambda: asyncio.run(run()), name="gateway", daemon=True)
    thread.start()
    if not started.wait(timeout=10):
        raise RuntimeError("the gateway did not start")
    try:
        yield proxy, where._replace(netloc=f"127.0.0.1:{proxy.port}").geturl()
    finally:
        assert proxy.loop is not None
        proxy.loop.call_soon_threadsafe(stop[0].set)
        thread.join(timeout=10)
