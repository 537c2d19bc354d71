"""What a benchmarked declared agent talks to, in a process of its own: model, MCP and HTTP tool.

``python3 -m bench.fake_endpoints --delay 1 --ready-file F`` serves, on loopback:

* the fake OpenAI-compatible model server (``agentrun.testing.model_server``) answering each
  call after ``--delay`` seconds from ``SCRIPT``: three turns that each call one tool, then the
  answer — 4 model calls and 3 tool calls a run;
* the booking MCP server (``agentrun.testing.mcp_server``) for the first two tools;
* ``POST /tools/notify``, a plain HTTP tool, on the model server's port;
* ``GET /stats``: requests answered and the most model calls it had in flight at once.

It is a process of its own, not a thread of the benchmark, so the CPU it spends is counted
apart from the benchmark's watch and its latency is not the benchmark's GIL's. It writes its URLs
to the ready file as JSON and serves until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from aiohttp import web

from agentrun.testing.mcp_server import serving as mcp_serving
from agentrun.testing.model_server import ModelServer, Turn, run_in_thread

SCRIPT = (
    Turn(calls=(("search_flights", {"origin": "TXL", "destination": "LIS"}),)),
    Turn(calls=(("book_flight", {"flight": "LH1172", "passenger": "Ada"}),)),
    Turn(calls=(("notify", {"booking": "LH1172-Ada", "channel": "email"}),)),
    Turn(text="Booked LH1172 and told Ada."),
)
MODEL_CALLS = len(SCRIPT)
TOOL_CALLS = sum(len(turn.calls) for turn in SCRIPT)


def app(server: ModelServer) -> web.Application:
    """The model server's routes, the HTTP tool and the counters the benchmark reads."""
    served = server.app()

    async def notify(request: web.Request) -> web.Response:
        await request.read()
        return web.json_response({"sent": True})

    async def stats(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "answered": server.answered,
                "in_flight": server.in_flight,
                "peak_in_flight": server.peak_in_flight,
            }
        )

    served.router.add_post("/tools/notify", notify)
    served.router.add_get("/stats", stats)
    return served


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.fake_endpoints", description=__doc__)
    parser.add_argument("--delay", type=float, required=True, help="seconds per model call")
    parser.add_argument("--ready-file", type=Path, required=True, help="where to write the URLs")
    args = parser.parse_args(argv)
    stopping = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server = ModelServer(script=SCRIPT, delay=args.delay)
    with run_in_thread(app(server), "model server") as url, mcp_serving() as books:
        server.url = url
        ready = {
            "model": server.openai_url,
            "tool": f"{url}/tools/notify",
            "mcp": books.url,
            "stats": f"{url}/stats",
        }
        args.ready_file.write_text(json.dumps(ready))
        stopping.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
