"""Fake services on loopback that a settler asks what became of a call, speaking real HTTP.

``PaymentService`` is a payment API that honours ``Idempotency-Key`` the way Stripe does:

* ``POST /charges`` (a JSON body, the key in ``Idempotency-Key``) charges once per key, stores
  the answer, and answers a request with a key it has seen with that same stored answer (no new
  charge); the same key with another body is refused 422; a request whose key is still being
  worked on is answered 409 with ``Retry-After``. Without a key every request charges.
* ``GET /charges/{key}`` looks a charge up by key: 200 and ``{"state": "confirmed", "receipt":
  {...}}``, or 404 ``{"state": "not_found"}``.

It can be told to behave as real services do (each for the next requests, until undone):
``hold(order_id)`` makes the charge of that order wait, once it is made, until ``release``
(``acted(order_id)`` tells when it is made: the moment a test kills the caller);
``conflict(times, retry_after)`` answers the next POSTs 409 before acting (a first request
still in flight); ``lagging = True`` makes the lookup answer 404 for charges that were made (a
read replica behind the primary); ``silent = True`` makes the lookup never answer;
``echo_header`` names a request header whose value every answer quotes (a service echoing a
credential back). It counts what it did: ``effects`` (one per charge made), ``seen`` (every
request).

It runs in a thread of its own with its own event loop (``serving``), so a test that blocks on a
subprocess does not stop it from answering.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agentrun.testing.model_server import run_in_thread

KEY_HEADER = "Idempotency-Key"


@dataclass(frozen=True)
class Effect:
    """One charge the service made."""

    key: str | None
    order_id: str
    amount_cents: int
    answer: str
    """The body it answered with (and answers every replay of the key with)."""


@dataclass(frozen=True)
class Request:
    """One request as the service received it."""

    method: str
    path: str
    key: str | None
    headers: dict[str, str]


@dataclass
class PaymentService:
    url: str = ""
    effects: list[Effect] = field(default_factory=list)
    seen: list[Request] = field(default_factory=list)
    lagging: bool = False
    silent: bool = False
    echo_header: str | None = None
    retry_after: float | None = None
    _stored: dict[str, tuple[str, Effect | None]] = field(default_factory=dict)
    """Key -> the request body it was first sent with, and its charge (None while in flight)."""
    _conflicts: int = 0
    _held: dict[str, threading.Event] = field(default_factory=dict)
    _acted: dict[str, threading.Event] = field(default_factory=dict)
    _closed: threading.Event = field(default_factory=threading.Event)

    # -- what a test tells it -----------------------------------------------------------------

    def hold(self, order_id: str) -> None:
        """Make the charge of ``order_id`` wait, once made, until ``release(order_id)``."""
        self._held[order_id] = threading.Event()
        self._acted[order_id] = threading.Event()

    def acted(self, order_id: str, timeout: float = 30.0) -> bool:
        """Wait until the held charge of ``order_id`` is made; whether it was in time."""
        return self._acted[order_id].wait(timeout)

    def release(self, order_id: str) -> None:
        self._held.pop(order_id).set()

    def conflict(self, times: int = 1, *, retry_after: float | None = None) -> None:
        """Answer the next ``times`` charges 409 (with ``Retry-After`` when given)."""
        self._conflicts += times
        self.retry_after = retry_after

    def made(self, order_id: str) -> list[Effect]:
        """The charges made for ``order_id``."""
        return [effect for effect in self.effects if effect.order_id == order_id]

    def answer_for(self, key: str) -> str | None:
        """The answer stored under ``key`` (what every replay of it gets), if any."""
        stored = self._stored.get(key)
        return None if stored is None or stored[1] is None else stored[1].answer

    # -- serving ------------------------------------------------------------------------------

    def _echo(self, request: web.Request) -> dict[str, Any]:
        if self.echo_header is None:
            return {}
        return {"you_sent": request.headers.get(self.echo_header, "")}

    def _seen(self, request: web.Request) -> str | None:
        key = request.headers.get(KEY_HEADER)
        self.seen.append(Request(request.method, request.path, key, dict(request.headers)))
        return key

    async def _charge(self, request: web.Request) -> web.Response:
        key = self._seen(request)
        body = await request.text()
        if self._conflicts:
            self._conflicts -= 1
            return self._still_in_flight()
        if key is not None and key in self._stored:
            first, effect = self._stored[key]
            if first != body:
                return web.json_response(
                    {"error": "this Idempotency-Key was used with another request"}, status=422
                )
            if effect is None:
                return self._still_in_flight()
            return web.Response(text=effect.answer, content_type="application/json")
        if key is not None:
            self._stored[key] = (body, None)
        sent = json.loads(body)
        order_id, amount = str(sent["order_id"]), int(sent["amount_cents"])
        charge = {
            "charge": f"ch_{len(self.effects) + 1}",
            "order_id": order_id,
            "amount_cents": amount,
            "state": "confirmed",
            **self._echo(request),
        }
        effect = Effect(key, order_id, amount, json.dumps(charge, sort_keys=True))
        self.effects.append(effect)
        if key is not None:
            self._stored[key] = (body, effect)
        held = self._held.get(order_id)
        if held is not None:
            self._acted[order_id].set()
            await asyncio.to_thread(held.wait)
        return web.Response(text=effect.answer, content_type="application/json")

    def _still_in_flight(self) -> web.Response:
        headers = {} if self.retry_after is None else {"Retry-After": f"{self.retry_after:g}"}
        return web.json_response(
            {"error": "a request with this Idempotency-Key is in progress"},
            status=409,
            headers=headers,
        )

    async def _lookup(self, request: web.Request) -> web.Response:
        self._seen(request)
        if self.silent:  # no answer until the test ends
            await asyncio.to_thread(self._closed.wait)
        key = request.match_info["key"]
        found = self._stored.get(key)
        if self.lagging or found is None or found[1] is None:
            return web.json_response({"state": "not_found", **self._echo(request)}, status=404)
        receipt = json.loads(found[1].answer)
        return web.json_response({"state": "confirmed", "receipt": receipt})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/charges", self._charge)
        app.router.add_get("/charges/{key}", self._lookup)
        return app


@contextmanager
def serving() -> Iterator[PaymentService]:
    """A ``PaymentService`` answering on a free loopback port (``url``) until the block ends."""
    service = PaymentService()
    with run_in_thread(service.app(), "payment service") as url:
        service.url = url
        try:
            yield service
        finally:  # nothing left waiting, so the server stops at once
            service._closed.set()
            for held in service._held.values():
                held.set()
