"""A real MCP server (the ``mcp`` SDK's ``MCPServer`` over streamable HTTP) on loopback.

Four booking tools, one of each kind a resume must tell apart, declared with MCP's annotations,
and a read-only lookup a settler probes with:

* ``search_flights`` — ``readOnlyHint``: made again after a crash;
* ``book_flight`` — ``idempotentHint`` (not destructive): it deduplicates bookings on the
  idempotency key the call carries in ``_meta``, so it is made again too;
* ``charge_card`` — ``destructiveHint``: a crash in its call is indeterminate;
* ``send_sms`` — declares nothing, which must be read as side-effecting;
* ``find_booking`` — ``readOnlyHint``: the booking made with an idempotency key, looked up by
  that key (``{"state": "booked", "seat": ...}`` or ``{"state": "not_found"}``).

The server keeps its own books (``calls``, ``bookings``, ``charges``, ``texts``): that is where a
second charge would show up. ``hold(tool)`` makes that tool's next call wait, once it has acted,
until ``release`` — the moment a test kills the caller. ``sever(times)`` lets the next
``tools/call`` requests run and then answers them with 502, so the caller cannot know whether
they acted; ``refuse(times)`` answers them with a JSON-RPC error instead of running them;
``token``, when set, is the only key it lets in (401 for any other).

It runs under uvicorn in a thread of its own (``serving``), like ``model_server``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import INVALID_PARAMS, ToolAnnotations
from starlette.types import Message, Receive, Scope, Send

IDEMPOTENCY_META = "dev.agentrun/idempotency-key"


@dataclass(frozen=True)
class Call:
    tool: str
    arguments: dict[str, Any]
    key: str | None
    headers: dict[str, str]


@dataclass
class McpBooks:
    """What the server did, and what it was told to do next."""

    url: str = ""
    calls: list[Call] = field(default_factory=list)
    bookings: dict[str, str] = field(default_factory=dict)
    charges: list[tuple[str, int]] = field(default_factory=list)
    texts: list[tuple[str, str]] = field(default_factory=list)
    held: dict[str, threading.Event] = field(default_factory=dict)
    faults: list[Literal["sever", "refuse"]] = field(default_factory=list)
    token: str | None = None
    """When set, a request without ``Authorization: Bearer <token>`` is answered 401 and never
    reaches the server, as a gateway that checks keys answers it."""
    server: MCPServer | None = None
    """The server itself, to change what it lists (``remove_tool``) while it runs."""

    def made(self, tool: str) -> list[Call]:
        return [call for call in self.calls if call.tool == tool]

    def hold(self, tool: str) -> None:
        """Make ``tool``'s next call wait, after it acted, until ``release``."""
        self.held[tool] = threading.Event()

    def release(self, tool: str) -> None:
        self.held.pop(tool).set()

    def sever(self, times: int = 1) -> None:
        """Run the next ``times`` ``tools/call`` requests, then answer each with 502."""
        self.faults.extend(["sever"] * times)

    def refuse(self, times: int = 1) -> None:
        """Answer the next ``times`` ``tools/call`` requests with a JSON-RPC error (invalid
        params), without running them."""
        self.faults.extend(["refuse"] * times)

    async def _acted(self, tool: str) -> None:
        waiting = self.held.get(tool)
        if waiting is not None:
            await asyncio.to_thread(waiting.wait)


def _record(books: McpBooks, tool: str, arguments: dict[str, Any], context: Context) -> str | None:
    meta = context.request_context.meta or {}
    given = meta.get(IDEMPOTENCY_META)
    key = given if isinstance(given, str) else None
    books.calls.append(Call(tool, arguments, key, dict(context.headers or {})))
    return key


def booking_server(books: McpBooks) -> MCPServer:
    server = MCPServer("airline", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def search_flights(origin: str, destination: str, ctx: Context) -> str:
        """Find flights between two airports."""
        _record(books, "search_flights", {"origin": origin, "destination": destination}, ctx)
        await books._acted("search_flights")
        return json.dumps([{"flight": "LH1172", "origin": origin, "destination": destination}])

    @server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=False))
    async def book_flight(flight: str, passenger: str, ctx: Context) -> str:
        """Book one seat; a request with a key already seen gets the same seat back."""
        key = _record(books, "book_flight", {"flight": flight, "passenger": passenger}, ctx)
        seat = books.bookings.setdefault(key or f"unkeyed-{len(books.calls)}", "12A")
        await books._acted("book_flight")
        return json.dumps({"flight": flight, "passenger": passenger, "seat": seat})

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    async def charge_card(order_id: str, amount_cents: int, ctx: Context) -> str:
        """Charge the customer's card (the processor does not deduplicate)."""
        _record(books, "charge_card", {"order_id": order_id, "amount_cents": amount_cents}, ctx)
        if amount_cents <= 0:
            raise ValueError(f"cannot charge {amount_cents} cents")
        books.charges.append((order_id, amount_cents))
        await books._acted("charge_card")
        return f"charged {amount_cents} cents for {order_id}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def find_booking(reference: str, ctx: Context) -> str:
        """Look a booking up by the idempotency key it was made with."""
        _record(books, "find_booking", {"reference": reference}, ctx)
        seat = books.bookings.get(reference)
        return json.dumps({"state": "booked", "seat": seat} if seat else {"state": "not_found"})

    @server.tool()
    async def send_sms(phone: str, text: str, ctx: Context) -> str:
        """Text the passenger."""
        _record(books, "send_sms", {"phone": phone, "text": text}, ctx)
        books.texts.append((phone, text))
        await books._acted("send_sms")
        return f"sent to {phone}"

    return server


def _faulty(books: McpBooks, app: Any) -> Any:
    """The app, but a request without the key (``McpBooks.token``) is answered 401, a severed
    ``tools/call`` runs and is then answered with 502, and a refused one is answered with a
    JSON-RPC error without running."""

    async def faulty(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and books.token is not None:
            given = dict(scope["headers"]).get(b"authorization", b"")
            if given != f"Bearer {books.token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"invalid token"})
                return
        if scope["type"] != "http" or scope["method"] != "POST" or not books.faults:
            await app(scope, receive, send)
            return
        chunks: list[Message] = []
        while not chunks or chunks[-1].get("more_body"):
            chunks.append(await receive())
        body = b"".join(chunk.get("body", b"") for chunk in chunks)

        async def replay() -> Message:
            return chunks.pop(0) if chunks else await receive()

        request = json.loads(body) if body else {}
        if not isinstance(request, dict) or request.get("method") != "tools/call":
            await app(scope, replay, send)
            return
        fault = books.faults.pop(0)
        if fault == "refuse":
            error = {"code": INVALID_PARAMS, "message": "refused: these arguments do not fit"}
            answer = json.dumps({"jsonrpc": "2.0", "id": request.get("id"), "error": error})
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer.encode()})
            return
        answered = asyncio.Event()

        async def swallow(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered.set()

        await app(scope, replay, swallow)
        await asyncio.wait_for(answered.wait(), timeout=30)  # the tool has run and answered
        await send({"type": "http.response.start", "status": 502, "headers": []})
        await send({"type": "http.response.body", "body": b"bad gateway"})

    return faulty


@contextmanager
def serving(port: int = 0) -> Iterator[McpBooks]:
    """The booking MCP server on a free loopback port (``books.url``) until the block ends;
    on ``port`` when given, so a test can stop a server and start it again where its clients
    know it (the address is reused at once, as a restarted server's is)."""
    books = McpBooks()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    server = booking_server(books)
    # MCPServer configures the root logger (basicConfig with a rich handler) when it has no
    # handler yet; a library in a test process has no business doing that, so it is undone.
    root.handlers[:], root.level = handlers, level
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        _faulty(books, server.streamable_http_app()), log_level="warning", lifespan="on"
    )
    runner = uvicorn.Server(config)
    thread = threading.Thread(
        target=lambda: asyncio.run(runner.serve(sockets=[sock])), name="mcp server", daemon=True
    )
    thread.start()
    deadline = time.monotonic() + 30
    while not runner.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the MCP server did not start")
        time.sleep(0.01)
    books.url = f"http://127.0.0.1:{port}/mcp"
    books.server = server
    try:
        yield books
    finally:
        for waiting in books.held.values():
            waiting.set()
        runner.should_exit = True
        thread.join(timeout=10)
        sock.close()
