"""What a model call costs the replica's interpreter: the HTTP pool under it, and how it is sent.

``python3 -m bench.provider_cpu`` starts the fake model server (``agentrun.testing.model_server``,
answering at once in OpenAI's and Anthropic's formats) in a thread, then makes ``--calls`` model
requests in batches of ``--concurrency`` with a conversation of eight messages and one tool, for
each provider four ways: over ``httpx2``'s own pool or ``Connections`` (aiohttp's pool), each
through the SDK's resource method (``chat.completions.create``, ``messages.create``) on a
``with_options(api_key=)`` copy (how the providers sent them before) or through the provider's
``complete`` (the SDK's ``post``, as they send them now), with the same body.
It reports the CPU time of the thread that runs the event loop, per call: the server's thread is
not counted, so the figure is the client's cost alone. Ratios within one run are what to read;
the absolute figures follow the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence

import httpx2
from pydantic import JsonValue
from tests.runner.models import Kind, by_the_sdk_method

from agentrun._messages import Message
from agentrun.runner._connections import MAX_CONNECTIONS, Connections
from agentrun.runner._providers.anthropic import AnthropicMessagesProvider
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.testing.model_server import ModelServer, Turn, serving

KEY = "sk-bench-not-a-real-key"
CONVERSATION = (
    Message.of("system", "Find a flight, book it, tell the passenger."),
    *(Message.of("user", "Book LH1172 from Munich to Lisbon for Ada Lovelace. " * 4),) * 7,
)
TOOL: dict[str, JsonValue] = {
    "name": "search_flights",
    "description": "Search flights between two airports.",
    "parameters": {
        "type": "object",
        "properties": {"origin": {"type": "string"}, "destination": {"type": "string"}},
        "required": ["origin", "destination"],
    },
}


async def per_call(
    server: ModelServer, kind: Kind, pool: str, path: str, calls: int, batch: int
) -> float:
    """CPU milliseconds of this thread per call, for one provider, pool and way of sending."""
    connections = Connections() if pool == "aiohttp" else None
    http = (
        connections.client()
        if connections
        else httpx2.AsyncClient(
            transport=httpx2.AsyncHTTPTransport(
                limits=httpx2.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=100)
            )
        )
    )
    provider = (
        OpenAIChatProvider(server.openai_url, api_key=KEY, http_client=http)
        if kind == "openai"
        else AnthropicMessagesProvider(server.anthropic_url, api_key=KEY, http_client=http)
    )

    async def complete() -> object:
        return await provider.complete(model="bench-model", messages=CONVERSATION, tools=[TOOL])

    await complete()  # the first connection, imports and caches: not counted
    body = server.seen[-1].body  # what both ways send

    async def create() -> object:
        return await by_the_sdk_method(provider, body, KEY)

    call: Callable[[], Awaitable[object]] = create if path == "create" else complete
    await call()
    started = time.thread_time()
    for _ in range(calls // batch):
        await asyncio.gather(*(call() for _ in range(batch)))
    spent = time.thread_time() - started
    await http.aclose()
    if connections:
        await connections.aclose()
    return spent * 1000 / (calls // batch * batch)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m bench.provider_cpu", description=__doc__)
    parser.add_argument("--calls", type=int, default=1000, help="calls a way (1000)")
    parser.add_argument("--concurrency", type=int, default=50, help="calls at once (50)")
    args = parser.parse_args(argv)
    kinds: tuple[Kind, ...] = ("openai", "anthropic")
    rows = []
    with serving([Turn(text="done")]) as server:
        for kind in kinds:
            for pool in ("httpx2", "aiohttp"):
                for path in ("create", "complete"):
                    spent = asyncio.run(
                        per_call(server, kind, pool, path, args.calls, args.concurrency)
                    )
                    rows.append((kind, pool, path, spent))
    print(f"{'provider':9} | {'pool':8} | {'sent with':38} | CPU-ms a call | against its first")
    for kind, pool, path, spent in rows:
        base = next(row[3] for row in rows if row[0] == kind)
        how = "create on a with_options copy" if path == "create" else "complete (the SDK's post)"
        print(f"{kind:9} | {pool:8} | {how:38} | {spent:13.2f} | {spent / base:.2f}")
    print(
        f"{args.calls} calls a way, {args.concurrency} at once; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
