"""A listener on 127.0.0.1 that records every request it gets, and answers it with a model list
or a redirect: what an egress test points an Agent or a client at, to see whether anything
reached it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Listener:
    port: int
    received: list[str] = field(default_factory=list)
    """``METHOD /path`` of every request, in the order they came."""

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def listening(redirect_to: str | None = None) -> Iterator[Listener]:
    """A listener that answers 200 with an empty model list, or 307 to ``redirect_to`` + the
    request's path when given."""
    lock = threading.Lock()
    state = Listener(port=0)

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                state.received.append(f"{self.command} {self.path}")
            if redirect_to is None:
                body = b'{"object": "list", "data": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
            else:
                body = b""
                self.send_response(307)
                self.send_header("Location", redirect_to + self.path)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
