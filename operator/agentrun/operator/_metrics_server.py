"""The metrics endpoint: Prometheus' exposition, over HTTPS to reviewed scrapers, or plain.

Secure (the chart's default), it follows controller-runtime's secure metrics: TLS
(``metrics_tls``) and, before any metric is written, the scrape's bearer token reviewed by the
API server (``scrape_reviews``): none or an invalid one is answered 401, a user without ``get``
on the path 403. Not secure, it is what it was before: plain HTTP to anybody who reaches the
port, which then takes a NetworkPolicy to keep to the scrapers.

Each scrape is served in a thread of its own, off the event loop, so that neither a stalled loop
nor a slow scraper holds up the other; the TLS handshake happens in that thread too, not in the
one that accepts connections, and a connection that says nothing is dropped after ``IDLE``
seconds.
"""

from __future__ import annotations

import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from agentrun.operator._scrape_reviews import ScrapeReviews, Verdict

IDLE = 30.0
"""Seconds a connection may stay silent before it is dropped."""

Environ = dict[str, Any]
StartResponse = Callable[..., Any]
App = Callable[[Environ, StartResponse], Iterable[bytes]]

_REFUSALS = {
    Verdict.UNAUTHENTICATED: (
        "401 Unauthorized",
        b"a bearer token the API server accepts is required\n",
    ),
    Verdict.FORBIDDEN: (
        "403 Forbidden",
        b"this user may not get this path (the ClusterRole agentrun-metrics-reader grants "
        b"/metrics)\n",
    ),
    Verdict.UNREVIEWED: ("503 Service Unavailable", b"the API server did not review the token\n"),
}


class _QuietHandler(WSGIRequestHandler):
    """Writes no access log (wsgiref's goes to stderr, past the operator's log masking)."""

    timeout = IDLE

    def log_message(self, format: str, *args: Any) -> None:
        return


def serve(
    port: int,
    registry: CollectorRegistry,
    reviews: ScrapeReviews | None = None,
    tls: ssl.SSLContext | None = None,
) -> WSGIServer | None:
    """Serve ``registry`` on ``port`` of every interface, in a thread, until the process ends.

    Args:
        port: the port, 0 for no endpoint at all.
        registry: the metrics served.
        reviews: who may scrape; None lets everybody.
        tls: the certificate to serve; None for plain HTTP.

    Returns:
        The server, or None for port 0.
    """
    if not port:
        return None
    app = make_wsgi_app(registry)
    if reviews is not None:
        app = _reviewed(app, reviews)
    server = make_server("0.0.0.0", port, app, ThreadingWSGIServer, handler_class=_QuietHandler)
    if tls is not None:
        server.socket = tls.wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


def _reviewed(app: App, reviews: ScrapeReviews) -> App:
    """``app`` for the scrapes the API server says may have it; the others are refused."""

    def guarded(environ: Environ, start_response: StartResponse) -> Iterable[bytes]:
        scheme, _, token = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        verdict = reviews.verdict(token, str(environ.get("PATH_INFO") or "/"))
        if verdict is Verdict.ALLOWED:
            return app(environ, start_response)
        status, body = _REFUSALS[verdict]
        headers = [("Content-Type", "text/plain; charset=utf-8")]
        if verdict is Verdict.UNAUTHENTICATED:
            headers.append(("WWW-Authenticate", 'Bearer realm="agentrun-operator metrics"'))
        start_response(status, headers)
        return [body]

    return guarded
