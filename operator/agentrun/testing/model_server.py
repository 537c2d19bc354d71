"""A fake model server on loopback speaking both real wire formats, for tests and demos.

It answers OpenAI's ``POST /v1/chat/completions`` and Anthropic's ``POST /v1/messages`` from one
script of turns, so the official SDK clients talk to it exactly as they talk to the real thing.
Like ``ScriptedProvider`` it keeps no conversation state: the reply is chosen by how many times
the assistant has already spoken in the conversation it is sent, so a worker killed and resumed
in another process gets the reply the dead one would have got next.

It can be told to misbehave the way real endpoints do: to answer slowly (``delay``), to answer the
next requests with an error status and a ``Retry-After`` (``fail``), to drop the connection
without answering (``drop``), or to give every turn's tool calls the same ids (``reuse_ids``).
It counts what it saw: every request, and the most it had in flight at once.

It runs in a thread of its own with its own event loop (``serving``), so a test that blocks on
a subprocess does not stop it from answering.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import JsonValue

NO_MORE = "(the script has no more replies)"


@dataclass(frozen=True)
class Turn:
    """One scripted reply: text, tool calls as ``(name, arguments)``, and the tokens it cost."""

    text: str = ""
    calls: tuple[tuple[str, dict[str, JsonValue]], ...] = ()
    input_tokens: int = 100
    output_tokens: int = 10


@dataclass(frozen=True)
class Fault:
    """What to answer one request with instead of the script: a status (with ``Retry-After``
    seconds when given), no answer at all (``drop``), or a 200 whose body is not a reply
    (``garbled``)."""

    status: int = 0
    retry_after: float | None = None
    message: str = "scripted failure"
    drop: bool = False
    garbled: bool = False


@dataclass(frozen=True)
class Seen:
    """One request as the server received it."""

    path: str
    headers: Mapping[str, str]
    body: dict[str, Any]
    at: float


@dataclass
class ModelServer:
    script: Sequence[Turn]
    delay: float = 0.0
    reuse_ids: bool = False
    url: str = ""
    faults: deque[Fault] = field(default_factory=deque)
    seen: list[Seen] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    answered: int = 0

    @property
    def openai_url(self) -> str:
        """The base URL an OpenAI client is given (it appends ``/chat/completions``)."""
        return self.url + "/v1"

    @property
    def anthropic_url(self) -> str:
        """The base URL an Anthropic client is given (it appends ``/v1/messages``)."""
        return self.url

    def fail(
        self,
        status: int,
        *,
        times: int = 1,
        retry_after: float | None = None,
        message: str = "scripted failure",
    ) -> None:
        """Answer the next ``times`` requests with ``status`` (and ``Retry-After``)."""
        fault = Fault(status=status, retry_after=retry_after, message=message)
        self.faults.extend(fault for _ in range(times))

    def garble(self) -> None:
        """Answer the next request 200 with a body that is no reply at all."""
        self.faults.append(Fault(status=200, garbled=True))

    def drop(self, *, times: int = 1) -> None:
        """Close the connection of the next ``times`` requests without answering."""
        self.faults.extend(Fault(drop=True) for _ in range(times))

    # -- the two wire formats -----------------------------------------------------------------

    def _turn(self, messages: list[dict[str, Any]]) -> tuple[int, Turn]:
        spoken = sum(1 for message in messages if message.get("role") == "assistant")
        if spoken < len(self.script):
            return spoken, self.script[spoken]
        return spoken, Turn(text=NO_MORE)

    def _call_id(self, prefix: str, turn: int, index: int) -> str:
        return f"{prefix}_{index}" if self.reuse_ids else f"{prefix}_{turn}_{index}"

    def _openai(self, body: dict[str, Any]) -> dict[str, Any]:
        number, turn = self._turn(body.get("messages") or [])
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        if turn.calls:
            message["tool_calls"] = [
                {
                    "id": self._call_id("call", number, index),
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
                for index, (name, arguments) in enumerate(turn.calls)
            ]
        return {
            "id": f"chatcmpl-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if turn.calls else "stop",
                }
            ],
            "usage": {
                "prompt_tokens": turn.input_tokens,
                "completion_tokens": turn.output_tokens,
                "total_tokens": turn.input_tokens + turn.output_tokens,
            },
        }

    def _anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        number, turn = self._turn(body.get("messages") or [])
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
        content.extend(
            {
                "type": "tool_use",
                "id": self._call_id("toolu", number, index),
                "name": name,
                "input": arguments,
            }
            for index, (name, arguments) in enumerate(turn.calls)
        )
        return {
            "id": f"msg_{number}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": content,
            "stop_reason": "tool_use" if turn.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": turn.input_tokens, "output_tokens": turn.output_tokens},
        }

    @staticmethod
    def _error(path: str, fault: Fault) -> dict[str, Any]:
        if path.endswith("/messages"):
            return {"type": "error", "error": {"type": "api_error", "message": fault.message}}
        return {"error": {"message": fault.message, "type": "server_error", "code": None}}

    # -- serving ------------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            body = await request.json()
            self.seen.append(Seen(request.path, dict(request.headers), body, time.monotonic()))
            if self.delay:
                await asyncio.sleep(self.delay)
            fault = self.faults.popleft() if self.faults else None
            if fault is not None and fault.drop:
                assert request.transport is not None
                request.transport.abort()
                raise asyncio.CancelledError  # aiohttp's way of leaving a request unanswered
            if fault is not None and fault.garbled:
                return web.json_response({"choices": None, "content": None, "usage": None})
            if fault is not None:
                headers = {}
                if fault.retry_after is not None:
                    headers["Retry-After"] = f"{fault.retry_after:g}"
                return web.json_response(
                    self._error(request.path, fault), status=fault.status, headers=headers
                )
            answer = (
                self._anthropic(body) if request.path.endswith("/messages") else self._openai(body)
            )
            self.answered += 1
            return web.json_response(answer)
        finally:
            self.in_flight -= 1

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        app.router.add_post("/v1/messages", self._handle)
        return app


@contextmanager
def serving(
    script: Sequence[Turn], *, delay: float = 0.0, reuse_ids: bool = False
) -> Iterator[ModelServer]:
    """A ``ModelServer`` answering on a free loopback port until the block ends."""
    server = ModelServer(script=tuple(script), delay=delay, reuse_ids=reuse_ids)
    with run_in_thread(server.app(), "model server") as url:
        server.url = url
        yield server


@contextmanager
def run_in_thread(app: web.Application, name: str) -> Iterator[str]:
    """Serve an aiohttp ``app`` on 127.0.0.1 from a thread with its own loop; its base URL."""
    started = threading.Event()
    where: list[str] = []
    stopping: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    async def serve() -> None:
        runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
        await site.start()
        stop = asyncio.Event()
        stopping.append((asyncio.get_running_loop(), stop))
        where.append(f"http://127.0.0.1:{runner.addresses[0][1]}")
        started.set()
        try:
            await stop.wait()
        finally:
            await runner.cleanup()

    thread = threading.Thread(target=lambda: asyncio.run(serve()), name=name, daemon=True)
    thread.start()
    if not started.wait(timeout=30):
        raise RuntimeError(f"the {name} did not start")
    try:
        yield where[0]
    finally:
        loop, stop = stopping[0]
        loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
