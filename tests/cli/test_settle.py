"""``agentrun settle``: a worker SIGKILLed while the payment service held its answer, then the
CLI asks the service and records what it says, and ``agentrun run --resume`` finishes the run
with the service's result and one charge."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from subprocess import CompletedProcess

import pytest

from agentrun import Backend
from agentrun._outcomes import Exit
from agentrun.testing.settle_services import PaymentService, serving
from tests.cli.conftest import Cli
from tests.support.settle_agent import ORDER_VARIABLE, SERVICE_VARIABLE
from tests.support.settle_kills import REPO, kill_worker
from tests.support.settle_worker import LEASE, TENANT

RUN = "run-7"


@pytest.fixture
def service() -> Iterator[PaymentService]:
    with serving() as payments:
        yield payments


@pytest.fixture
async def killed(cli: Cli, service: PaymentService) -> Cli:
    """The run's worker killed once the service charged and held its answer; the CLI told
    where the agent is registered (``tests.support.settle_agent``)."""
    await kill_worker(service, cli.store, RUN, held=True)
    await asyncio.sleep(LEASE.ttl + 0.2)  # the dead worker's lease lapses
    cli.env = {
        **cli.env,
        "PYTHONPATH": os.pathsep.join([cli.env["PYTHONPATH"], str(REPO)]),
        "AGENTRUN_AGENT_MODULES": "tests.support.settle_agent",
        SERVICE_VARIABLE: service.url,
        ORDER_VARIABLE: RUN,
    }
    return cli


def settle(cli: Cli, *more: str) -> CompletedProcess[str]:
    return cli("settle", RUN, "--tenant", TENANT, *more)


def test_settle_replays_the_call_and_the_resume_finishes_with_one_charge(
    killed: Cli, service: PaymentService
) -> None:
    refused = killed("run", "--resume", RUN, "--tenant", TENANT)
    assert refused.returncode == Exit.MUST_NOT_CARRY_ON, refused.stdout + refused.stderr
    done = settle(killed, "--by", "oncall-bot")
    assert done.returncode == Exit.CARRIED_ON, done.stdout + done.stderr
    first, then = done.stdout.splitlines()
    assert first.startswith(
        f"call call_0_0 (charge): settled: it ran; its result is recorded (replayed POST "
        f"{service.url}/charges with the same Idempotency-Key: it answered "
    )
    assert then == f"carry it on with `agentrun run --resume {RUN} --tenant {TENANT}`"
    resumed = killed("run", "--resume", RUN, "--tenant", TENANT)
    assert resumed.returncode == Exit.CARRIED_ON, resumed.stdout + resumed.stderr
    assert "completed" in resumed.stdout.splitlines()[-1]
    (charge,) = service.effects
    assert charge.answer in first
    again = settle(killed)
    assert (again.returncode, again.stdout) == (0, f"run {RUN} has no undecidable call\n")


def test_settle_leaves_what_the_service_cannot_settle_to_a_person(
    killed: Cli, service: PaymentService
) -> None:
    service.conflict(10, retry_after=0.1)  # still in flight at every attempt
    done = settle(killed, "--json")
    assert done.returncode == Exit.MUST_NOT_CARRY_ON, done.stdout + done.stderr
    (call,) = json.loads(done.stdout)["calls"]
    assert call["call_id"] == "call_0_0"
    assert call["settled"] == "left_to_a_person"
    assert call["evidence"].startswith(f"replayed POST {service.url}/charges")
    assert "3 times" in call["evidence"]
    assert len(service.effects) == 1


def test_settle_explains_itself(cli: Cli, backend: Backend) -> None:
    shown = cli("settle", "--help")
    assert shown.returncode == 0
    assert "docs/settling.md" in shown.stdout
    assert "4 when some are left to a person" in shown.stdout
    missing = cli("settle", "nope", "--tenant", "t")
    assert missing.returncode == Exit.NOTHING_CHECKPOINTED
