"""A worker process for the cross-process tests: opens a SQLite store, obeys JSON lines on stdin.

Run as ``python worker.py URL``. It answers ``{"ready": true}`` once the store is open, then one
JSON line per command:

* ``acquire`` (tenant, run, holder, at): at wall-clock time ``at``, try to take the run's lease.
* ``begin`` (tenant, run, key, holder, at): at ``at``, try to claim the key under fence 1.
* ``put`` (tenant, run, payload, fence): write a checkpoint.
* ``lock``: take the database's write lock with a plain connection and keep it until killed.

``at`` lines the racers up on one instant, so they really do hit the file together.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import time
from typing import Any

from agentrun import Backend, open_backend
from agentrun._errors import RunLeaseError
from agentrun.stores._sqlite._database import parse_url


async def _obey(backend: Backend, command: dict[str, Any], url: str) -> dict[str, Any]:
    await asyncio.sleep(max(0.0, command.get("at", 0.0) - time.time()))
    op = command["op"]
    if op == "acquire":
        try:
            lease = await backend.leases.acquire(
                command["tenant"], command["run"], command["holder"], ttl=30
            )
        except RunLeaseError as refused:
            return {"won": False, "holder": refused.holder}
        return {"won": True, "holder": lease.holder, "fence": lease.fence}
    if op == "begin":
        claim = await backend.idempotency.begin(
            command["tenant"], command["run"], command["key"], holder=command["holder"], fence=1
        )
        return {"won": claim.won, "holder": claim.record.holder}
    if op == "put":
        await backend.checkpoints.put(
            command["tenant"], command["run"], command["payload"].encode(), fence=command["fence"]
        )
        return {"written": True}
    if op == "lock":
        path, _ = parse_url(url)
        locker = sqlite3.connect(path, isolation_level=None)
        locker.execute("BEGIN IMMEDIATE")
        return {"locked": True}
    raise ValueError(f"unknown command {op!r}")


async def main(url: str) -> None:
    backend = await open_backend(url)
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        print(json.dumps(await _obey(backend, json.loads(line), url)), flush=True)
    await backend.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
