"""A built-in HTTP tool that carries the call's idempotency key to the remote service.

The kit can stop a run from repeating a call; only the remote service can stop a request it
already received from taking effect twice. Sending the key as ``Idempotency-Key`` (the header
Stripe and the IETF draft use) lets it deduplicate on its side too.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

from agentrun.runner.tools import Tool, ToolError


def http_post_tool(
    name: str, url: str, *, description: str = "", keyed: bool = True, timeout: float = 30.0
) -> Tool:
    """A tool that POSTs ``payload`` as JSON to ``url``.

    ``keyed`` derives the idempotency key from the payload and sends it; a 4xx answer is the
    service refusing (``ToolError``), anything else that fails leaves the call undecided.
    """

    def send(body: dict[str, Any], key: str | None) -> str:
        headers = {"Content-Type": "application/json"}
        if key is not None:
            headers["Idempotency-Key"] = key
        request = urllib.request.Request(
            url, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                answer: bytes = response.read()
                return answer.decode()
        except urllib.error.HTTPError as exc:
            if 400 <= exc.code < 500:
                raise ToolError(
                    f"{url} refused the request ({exc.code}): "
                    f"{exc.read()[:300].decode(errors='replace')}"
                ) from exc
            raise

    async def post(payload: dict[str, Any], idempotency_key: str | None = None) -> str:
        return await asyncio.to_thread(send, payload, idempotency_key)

    return Tool(
        name=name,
        fn=post,
        description=description or f"POST JSON to {url}",
        key_arguments=("payload",) if keyed else (),
        version="http-1",
    )
