"""A throwaway HTTP endpoint on 127.0.0.1 that answers from a queue and records what it was sent.

It stands in for a remote booking API behind an HTTP tool. It runs in a thread of the test
process on a free port and is shut down when the ``with`` block ends.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DROP = 0
"""The status of a queued answer that is no answer: the connection is closed instead."""


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Endpoint:
    url: str
    answers: list[tuple[int, bytes, float]] = field(default_factory=list)
    received: list[Received] = field(default_factory=list)

    def answer(self, status: int, body: object, *, after: float = 0.0) -> None:
        """Queue one answer, sent ``after`` seconds: ``body`` as JSON, or as it is when it is
        bytes."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.answers.append((status, raw, after))

    def drop(self) -> None:
        """Queue a request read in full and then the connection closed without an answer."""
        self.answers.append((DROP, b"", 0.0))


@contextmanager
def endpoint() -> Iterator[Endpoint]:
    lock = threading.Lock()
    state = Endpoint(url="")

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            with lock:
                state.received.append(
                    Received(self.command, self.path, dict(self.headers.items()), body)
                )
                status, answer, after = (
                    state.answers.pop(0) if state.answers else (599, b"no answer", 0.0)
                )
            time.sleep(after)
            if status == DROP:
                self.close_connection = True
                return
            with contextlib.suppress(ConnectionError):  # the client gave up waiting
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(
        target=server.serve_forever, args=(0.05,), name="wire endpoint", daemon=True
    )
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def chat_reply(
    text: str | None = None,
    calls: list[tuple[str, str, dict[str, Any]]] = (),  # type: ignore[assignment]
    *,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
) -> dict[str, Any]:
    """A chat-completions response body, as OpenAI sends it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for call_id, name, arguments in calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
