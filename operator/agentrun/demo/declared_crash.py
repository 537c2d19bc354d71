"""``make demo``'s declared-agent scenario: a worker SIGKILLed while its MCP call is at the server.

The booking agent is declared as data (``declared.booking_spec``): the fake OpenAI-compatible
model server and the real MCP booking server run in this process, on loopback; each worker is a
process of its own (``declared_worker``) on an SQLite store. The MCP server lets the held call act
and then waits: that is when the worker is killed — the call reached the tool, its answer never
reached the worker. What the resume does depends on what the server's annotations say the tool is:
``charge_card`` (destructiveHint) is indeterminate, named, and not charged again;
``search_flights`` (readOnlyHint) is simply made again. ``tests/crash/test_declared_crash.py``
drives the same ``scenario`` and searches everything it prints, and the store, for the secrets.

    python -m agentrun.demo.declared_crash WORKDIR
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from agentrun.demo.declared import TURNS
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.mcp_server import serving as mcp_serving
from agentrun.testing.model_server import ModelServer, serving


def worker(store: str, models: ModelServer, airline: McpBooks, mode: str) -> list[str]:
    """The command line of a worker that starts (``start``) or carries on (``resume``) the run."""
    module = "agentrun.demo.declared_worker"
    return [sys.executable, "-m", module, store, models.openai_url, airline.url, mode]


def kill_while_held(store: str, models: ModelServer, airline: McpBooks, tool: str) -> None:
    """Start a worker, and SIGKILL it once ``tool``'s call has acted at the server."""
    airline.hold(tool)
    started = subprocess.Popen(
        worker(store, models, airline, "start"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 60
    while not airline.made(tool):
        if started.poll() is not None or time.monotonic() > deadline:
            out, err = started.communicate()
            raise RuntimeError(f"the worker never called {tool}: {out!r} {err!r}")
        time.sleep(0.02)
    started.send_signal(signal.SIGKILL)
    started.communicate(timeout=30)
    airline.release(tool)
    if started.returncode != -signal.SIGKILL:
        raise RuntimeError(f"the worker ended with {started.returncode} before it was killed")


def resume(store: str, models: ModelServer, airline: McpBooks) -> subprocess.CompletedProcess[str]:
    """A new worker carrying the run on, once the dead one's lease lapsed."""
    return subprocess.run(
        worker(store, models, airline, "resume"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def scenario(
    store: str, models: ModelServer, airline: McpBooks, tool: str
) -> subprocess.CompletedProcess[str]:
    """Kill a worker once ``tool``'s call has acted, carry the run on in a new one, and print
    what happened, as ``make demo`` shows it; the new worker is returned for the caller to judge.
    """
    kill_while_held(store, models, airline, tool)
    print(f"-- {tool} acted at the MCP server; the worker was killed with SIGKILL before")
    print("   its answer arrived. A new worker carries the run on:")
    resumed = resume(store, models, airline)
    print(f"   {resumed.stdout.strip()}  (exit {resumed.returncode})")
    made = {name: len(airline.made(name)) for name in ("search_flights", "charge_card")}
    print(f"-- the airline's books: calls {made}, charges {airline.charges}")
    return resumed


def _scenario_passes(workdir: Path, tool: str, expected_exit: int) -> bool:
    with serving(TURNS) as models, mcp_serving() as airline:
        resumed = scenario(f"sqlite:///{workdir}/declared-{tool}.db", models, airline, tool)
        return resumed.returncode == expected_exit and len(airline.charges) == 1


def main() -> int:
    workdir = Path(sys.argv[1])
    print("Killed in charge_card (destructiveHint): the resume refuses, naming the call")
    refused = _scenario_passes(workdir, "charge_card", expected_exit=4)
    print("\nKilled in search_flights (readOnlyHint): the resume makes the search again")
    repeated = _scenario_passes(workdir, "search_flights", expected_exit=0)
    return 0 if refused and repeated else 1


if __name__ == "__main__":
    raise SystemExit(main())
