"""The console's web application: its routes, its security headers, and its one watch's life.

Every response carries a Content-Security-Policy that allows scripts and styles from the console's
own origin only (no inline script, no eval), refuses framing, and sends forms nowhere else; pages
are not cached. A write (any method but GET and HEAD) whose ``Origin`` or ``Sec-Fetch-Site``
says another site sent it is refused before any handler reads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agentrun._errors import AgentRunError
from agentrun._redaction import Masker
from agentrun.console._access import Access, Everything
from agentrun.console._actions import act
from agentrun.console._agents_page import agents_page
from agentrun.console._apiserver import ApiServer
from agentrun.console._bulk import bulk
from agentrun.console._index import RunIndex
from agentrun.console._local import StoreListing, local_act, local_run_page
from agentrun.console._pages import inbox_page, runs_page
from agentrun.console._run_page import run_page
from agentrun.console._sessions import Sealer
from agentrun.console._settings import AuthMode, ConsoleSettings
from agentrun.console._signin import local_sign_in, sign_in, sign_in_form, sign_out
from agentrun.console._stream import events
from agentrun.console._watch import keep_watching
from agentrun.console._web import HERE, Console, environment
from agentrun.stores import open_backend

log = logging.getLogger("agentrun.console")

POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SAFE = ("GET", "HEAD", "OPTIONS")


def _same_origin(request: Request) -> bool:
    site = request.headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return origin.split("://", 1)[-1] == host


class Guard:
    """Security headers on every response; writes from another site refused. Plain ASGI, so a
    live-update stream passes through it as it is sent."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        static = request.url.path.startswith("/static/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Content-Security-Policy"] = POLICY
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Referrer-Policy"] = "same-origin"
                headers["X-Frame-Options"] = "DENY"
                if not static:
                    headers["Cache-Control"] = "no-store"
            await send(message)

        if request.method not in SAFE and not _same_origin(request):
            refused = PlainTextResponse(
                "refused: this request came from another site", status_code=403
            )
            await refused(scope, receive, with_headers)
            return
        await self.app(scope, receive, with_headers)


async def _root(request: Request) -> Response:
    return RedirectResponse("/runs", status_code=303)


async def _healthz(request: Request) -> Response:
    console: Console = request.app.state.console
    if not console.index.synced.is_set():
        return PlainTextResponse("the first listing of AgentRuns is not in yet", status_code=503)
    return PlainTextResponse("ok")


async def _open_store(console: Console, url: str) -> None:
    """Open the store, and keep trying while it cannot be reached: the console starts (and its
    pages show what the API server holds) before the store answers, as when both start together
    in a fresh install; a run page says why its transcript is missing meanwhile."""
    delay = 0.5
    while console.backend is None:
        try:
            console.backend = await open_backend(url, create=False)
            console.store_error = ""
        except AgentRunError as error:
            if str(error) != console.store_error:
                log.warning("the store cannot be opened yet: %s; trying again", error)
            console.store_error = str(error)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 10.0)


def create_app(settings: ConsoleSettings, api: ApiServer | None = None) -> Starlette:
    """The console for ``settings``: its watch (or, local, its store listing) starts with the
    application and stops with it.

    Args:
        settings: How it signs people in, what it watches, where the store is.
        api: The API server to use (default: found as kubectl finds it); none when local.

    Returns:
        The ASGI application (serve it with uvicorn, as ``python -m agentrun.console`` does).
    """
    masker = Masker.build()
    key = Sealer.key_from_text(settings.session_key) if settings.session_key else None
    sealer = Sealer(key)
    local = settings.auth is AuthMode.LOCAL
    if sealer.generated and settings.auth is AuthMode.TOKEN:
        log.warning(
            "no session key (AGENTRUN_CONSOLE_SESSION_KEY_FILE): sign-ins end when the "
            "console restarts"
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server = None if local else api or ApiServer()
        console = Console(
            settings=settings,
            api=server,
            index=RunIndex(),
            access=Everything() if server is None else Access(server),
            sealer=sealer,
            masker=masker,
            templates=environment(masker),
        )
        app.state.console = console
        tasks = []
        if server is None:
            # Local: the store is the only source; a URL that names no store is an error now,
            # not an empty console.
            assert settings.store is not None
            console.backend = await open_backend(settings.store, create=False)
            listing = StoreListing(console.backend, console.index)
            console.refresh = listing.fresh
            await listing.fresh()
            tasks.append(asyncio.create_task(listing.keep_listing()))
        else:
            tasks.append(
                asyncio.create_task(keep_watching(server, console.index, settings.namespace))
            )
            if settings.store:
                tasks.append(asyncio.create_task(_open_store(console, settings.store)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if console.backend is not None:
                await console.backend.close()
            if server is not None:
                await server.close()

    common = [
        Route("/", _root),
        Route("/healthz", _healthz),
        Route("/runs", runs_page),
        Route("/inbox", inbox_page),
        Route("/events", events),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if local:
        routes = [
            *common,
            Route("/sign-in", local_sign_in, methods=["GET"]),
            Route("/runs/{namespace}/{name}", local_run_page),
            Route("/runs/{namespace}/{name}/{action}", local_act, methods=["POST"]),
        ]
    else:
        routes = [
            *common,
            Route("/sign-in", sign_in_form, methods=["GET"]),
            Route("/sign-in", sign_in, methods=["POST"]),
            Route("/sign-out", sign_out, methods=["POST"]),
            Route("/agents", agents_page),
            Route("/bulk", bulk, methods=["POST"]),
            Route("/runs/{namespace}/{name}", run_page),
            Route("/runs/{namespace}/{name}/{action}", act, methods=["POST"]),
        ]
    return Starlette(routes=routes, middleware=[Middleware(Guard)], lifespan=lifespan)
