"""The demo's ``booking-paid`` agent: a charge cut short by a killed worker, settled by asking the
payment service (``agentrun settle``), on both sides of the service acting.

The worker is a real process (this checkout's CLI, SQLite store), SIGKILLed while ``charge_card``
lingers: after the service charged the card (the probe finds the charge: it ran, with the
service's receipt as its result) or before it was asked (the probe finds nothing, which the
demo declares authoritative: it did not run, and the resume charges the card). Either way the
resume finishes the run and the card was charged exactly once.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun._idempotency import ClaimState
from agentrun._outcomes import Exit
from tests.support.cli import COMMAND, cli_env

TENANT = "acme"
RUN = "paid-1"


def _charges(demo: Path) -> list[tuple[str, int]]:
    path = demo / "demo-services.db"
    if not path.exists():
        return []
    with sqlite3.connect(path, timeout=10) as connection:
        try:
            rows = connection.execute("SELECT passenger, amount_cents FROM charges").fetchall()
        except sqlite3.OperationalError:  # no table yet
            return []
    return [(str(p), int(a)) for p, a in rows]


async def _in_flight(store: str) -> bool:
    backend = await open_backend(store)
    try:
        records = await backend.idempotency.records(TENANT, RUN)
    finally:
        await backend.close()
    return any(r.state is ClaimState.IN_FLIGHT and r.tool == "charge_card" for r in records)


@pytest.mark.parametrize(
    ("linger", "settled"),
    [("charge", "settled: it ran"), ("charge-before", "settled: it did not run")],
    ids=["service-acted", "service-not-asked"],
)
def test_a_charge_cut_short_is_settled_by_asking_the_payment_service(
    tmp_path: Path, linger: str, settled: str
) -> None:
    store, demo = f"sqlite:///{tmp_path / 'state.db'}", tmp_path / "demo"
    env = cli_env()
    env.update(AGENTRUN_STORE=store, AGENTRUN_DEMO_DIR=str(demo))

    def agentrun(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*COMMAND, *args], env=env, capture_output=True, text=True, timeout=120, check=False
        )

    worker = subprocess.Popen(
        [*COMMAND, "run", "booking-paid", "--input", "go", "--tenant", TENANT, "--run-id", RUN,
         "--lease-ttl", "2"],
        env={**env, "AGENTRUN_DEMO_LINGER": linger, "AGENTRUN_DEMO_LINGER_SECONDS": "60"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not asyncio.run(_in_flight(store)):
            assert worker.poll() is None, "the worker ended before charging"
            assert time.monotonic() < deadline, "charge_card was never in flight"
            time.sleep(0.1)
        time.sleep(0.3)  # in the tool: past the claim, lingering
        assert len(_charges(demo)) == (1 if linger == "charge" else 0)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=10)
    time.sleep(2.2)  # the dead worker's lease lapses

    refused = agentrun("run", "--resume", RUN, "--tenant", TENANT)
    assert refused.returncode == Exit.MUST_NOT_CARRY_ON, refused.stdout + refused.stderr
    asked = agentrun("settle", RUN, "--tenant", TENANT)
    assert asked.returncode == Exit.CARRIED_ON, asked.stdout + asked.stderr
    assert f"call call_2_0 (charge_card): {settled}" in asked.stdout, asked.stdout
    resumed = agentrun("run", "--resume", RUN, "--tenant", TENANT)
    assert resumed.returncode == Exit.CARRIED_ON, resumed.stdout + resumed.stderr
    assert "charged her card once" in resumed.stdout
    assert _charges(demo) == [("Ada Lovelace", 18900)]
