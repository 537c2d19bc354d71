"""The ``agentrun`` console script: its output and its exit codes, which are what scripts read.

0 carried on, 1 nothing checkpointed under that id, 2 a command line it could not read, 3 another
worker holds the run (named), 4 it must not be carried on.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from agentrun import Backend
from agentrun._decisions import approval_request_id
from agentrun._frontier import (
    Boundary,
    Checkpoint,
    PendingApproval,
    PendingCall,
    encode,
)
from agentrun._idempotency import marker_key
from agentrun._messages import Message, ToolCall, Usage
from agentrun.demo import services
from agentrun.demo.booking import BOOKING, BOOKING_APPROVED, BOOKING_PAID
from tests.cli.conftest import Cli
from tests.runner.wire import endpoint
from tests.support.cli import COMMAND

DESCRIBE_DONE = [
    "run r  tenant t  agent booking",
    "iteration 4  2490 in, 144 out  6132 micros",
    "waiting on nothing",
]
FINAL = "Booked one seat on LH1172 for Ada Lovelace and sent her a text."


START = ("run", "booking", "--input", "book Ada", "--tenant", "t", "--run-id")
"""How every test starts the booking run (the run id follows)."""


def _start(cli: Cli, run_id: str = "r") -> None:
    done = cli(*START, run_id)
    assert done.returncode == 0, done.stderr
    assert f"run {run_id} completed at iteration 4, 6132 micros: {FINAL}" in done.stdout


def test_help_lists_the_commands_and_the_exit_codes(cli: Cli) -> None:
    shown = cli("--help")
    assert shown.returncode == 0
    for command in ("inspect", "run", "approve", "resolve", "schema", "agents"):
        assert f"    {command} " in shown.stdout
    for code in (
        "0  carried on",
        "1  nothing is checkpointed",
        "2  a command line it could not read",
        "3  another worker holds the run's lease",
        "4  the run must not be carried on",
    ):
        assert code in shown.stdout
    run_help = cli("run", "--help")
    assert run_help.returncode == 0
    assert "--resume RUN_ID" in run_help.stdout
    assert "4  the run must not be carried on" in run_help.stdout


def test_run_inspect_and_resume_a_finished_run(cli: Cli) -> None:
    started = cli(*START, "r", "--holder", "w1")
    assert started.returncode == 0, started.stderr
    lines = started.stdout.splitlines()
    assert lines[:2] == ["starting booking as w1", "held with fence 1 by w1"]
    assert "  iteration 2  after_tool_result  checkpointed" in started.stdout
    assert lines[-1] == f"run r completed at iteration 4, 6132 micros: {FINAL}"

    inspected = cli("inspect", "r", "--tenant", "t")
    assert inspected.returncode == 0, inspected.stderr
    lines = inspected.stdout.splitlines()
    assert lines[:3] == DESCRIBE_DONE
    assert lines[3].startswith("boundary after_model_call  fence 1  written ")
    assert lines[4:] == ["no outstanding calls", "lease: free"]

    as_json = cli("inspect", "r", "--tenant", "t", "--json")
    assert as_json.returncode == 0
    frontier = json.loads(as_json.stdout)
    assert frontier["agent_revision"] == BOOKING.revision
    assert (frontier["boundary"], frontier["iteration"], frontier["cost_micros"]) == (
        "after_model_call",
        4,
        6132,
    )
    assert frontier["usage"] == {"input_tokens": 2490, "output_tokens": 144}
    assert (frontier["calls"], frontier["safe"], frontier["lease"]) == ([], True, None)

    resumed = cli("run", "--resume", "r", "--tenant", "t", "--holder", "w2")
    assert resumed.returncode == 0, resumed.stderr
    lines = resumed.stdout.splitlines()
    assert lines[:3] == DESCRIBE_DONE
    assert lines[3] == "held with fence 2 by w2"
    assert lines[-1] == f"run r completed at iteration 4, 6132 micros: {FINAL}"
    assert len(services.bookings()) == 1
    assert len(services.messages()) == 1


def test_an_unknown_run_exits_1(cli: Cli, backend: Backend) -> None:
    for args in (
        ("inspect", "nope", "--tenant", "t"),
        ("run", "--resume", "nope", "--tenant", "t"),
    ):
        answer = cli(*args)
        assert answer.returncode == 1, answer.stderr
        assert "nothing is checkpointed for run 'nope' of tenant 't'" in answer.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "r"),
        ("frobnicate", "r", "--tenant", "t"),
        ("resolve", "r", "--tenant", "t", "--call", "c", "--ran", "--did-not-run"),
        ("resolve", "r", "--tenant", "t", "--call", "c", "--ran"),
        ("resolve", "r", "--tenant", "t", "--call", "c"),
        ("run", "--tenant", "t"),
        ("run", "booking", "--tenant", "t"),
        ("approve", "r", "--tenant", "t"),
        ("schema", "mysql"),
    ],
    ids=[
        "missing-tenant",
        "unknown-command",
        "ran-and-did-not-run",
        "ran-without-result",
        "no-answer",
        "run-without-agent",
        "run-without-input",
        "approve-without-request",
        "unknown-dialect",
    ],
)
def test_a_command_line_it_cannot_read_exits_2(cli: Cli, args: tuple[str, ...]) -> None:
    answer = cli(*args)
    assert answer.returncode == 2, (answer.stdout, answer.stderr)
    assert answer.stderr.strip()


def test_ran_without_result_exits_2_for_an_existing_run(cli: Cli) -> None:
    _start(cli)
    answer = cli("resolve", "r", "--tenant", "t", "--call", "call_2_0", "--ran")
    assert answer.returncode == 2
    assert "--result" in answer.stderr


async def test_starting_an_existing_run_id_again_exits_2_without_taking_its_lease(
    cli: Cli, backend: Backend
) -> None:
    _start(cli)
    fence = (await backend.leases.acquire("t", "r", "probe", ttl=5)).fence
    await backend.leases.release(await backend.leases.acquire("t", "r", "probe", ttl=5))
    again = cli("run", "booking", "--input", "again", "--tenant", "t", "--run-id", "r")
    assert again.returncode == 2
    assert "already has a checkpoint" in again.stderr
    assert "held with fence" not in again.stdout
    assert (await backend.leases.acquire("t", "r", "probe", ttl=5)).fence == fence + 2


@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "r", "--tenant", "t"),
        ("run", "--resume", "r", "--tenant", "t"),
        ("approve", "r", "--tenant", "t", "--request", "apr-1"),
        ("resolve", "r", "--tenant", "t", "--call", "c", "--did-not-run"),
    ],
    ids=["inspect", "resume", "approve", "resolve"],
)
def test_a_store_url_naming_no_file_is_refused_and_nothing_is_created(
    cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    typo = tmp_path / "typo" / "dir" / "state.db"
    answer = cli("--store", f"sqlite:///{typo}", *args)
    assert answer.returncode == 2, (answer.stdout, answer.stderr)
    assert f"there is no SQLite store at {typo} (the file does not exist)" in answer.stderr
    assert not (tmp_path / "typo").exists()


def test_a_kubectl_failure_is_one_line_naming_the_reason(cli: Cli, tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    cli.env["KUBECONFIG"] = str(kubeconfig)
    answer = cli("approve", "r", "--kube", "--request", "apr-1")
    assert answer.returncode == 6, (answer.stdout, answer.stderr)
    lines = answer.stderr.strip().splitlines()
    assert len(lines) == 1, answer.stderr
    assert "connection to the server 127.0.0.1:9 was refused" in lines[0]


async def test_a_run_held_by_another_worker_exits_3_naming_it(cli: Cli, backend: Backend) -> None:
    _start(cli)
    lease = await backend.leases.acquire("t", "r", "worker-on-host-9", ttl=60)
    inspected = cli("inspect", "r", "--tenant", "t")
    assert inspected.returncode == 0
    assert inspected.stdout.splitlines()[-1].startswith(
        f"lease: held by worker-on-host-9 with fence {lease.fence}, "
    )
    answer = cli("run", "--resume", "r", "--tenant", "t")
    assert answer.returncode == 3
    assert answer.stdout.splitlines() == DESCRIBE_DONE  # it read the frontier, then was refused
    assert f"held by 'worker-on-host-9' with fence {lease.fence}" in answer.stderr
    await backend.leases.release(lease)
    assert cli("run", "--resume", "r", "--tenant", "t").returncode == 0


async def _kill_while_notifying(cli: Cli, backend: Backend) -> None:
    """Start the booking run and SIGKILL it while the (keyless) text message is in flight."""
    worker = cli.spawn(
        *START, "r", "--lease-ttl", "1", "--holder", "doomed",
        AGENTRUN_DEMO_LINGER="notify", AGENTRUN_DEMO_LINGER_SECONDS="60",
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not services.messages():
        assert worker.poll() is None, worker.communicate()
        assert time.monotonic() < deadline, "the worker never sent the text"
        await asyncio.sleep(0.05)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    while await backend.leases.held("t", "r") is not None:  # its 1 s lease lapses
        assert time.monotonic() < deadline, "the dead worker's lease never lapsed"
        await asyncio.sleep(0.1)


@pytest.mark.parametrize("answer", ["did-not-run", "ran"])
async def test_an_indeterminate_call_exits_4_until_a_person_resolves_it(
    cli: Cli, backend: Backend, answer: str
) -> None:
    await _kill_while_notifying(cli, backend)

    inspected = cli("inspect", "r", "--tenant", "t")
    assert inspected.returncode == 0
    assert "  call_2_0  notify_passenger  indeterminate: refuse" in inspected.stdout
    calls = json.loads(cli("inspect", "r", "--tenant", "t", "--json").stdout)["calls"]
    assert [(c["call_id"], c["disposition"]) for c in calls] == [("call_2_0", "indeterminate")]

    refused = cli("run", "--resume", "r", "--tenant", "t")
    assert refused.returncode == 4
    assert "notify_passenger (call call_2_0)" in refused.stderr
    assert len(services.messages()) == 1  # not sent again

    by_hand = (
        ("--did-not-run",) if answer == "did-not-run" else ("--ran", "--result", "message 1 sent")
    )
    answer_it = ("resolve", "r", "--tenant", "t", "--call", "call_2_0", *by_hand, "--by", "bob")
    lease = await backend.leases.acquire("t", "r", "busy-worker", ttl=30)
    held = cli(*answer_it)
    assert held.returncode == 3, "an answer is given under the run's lease, never beside a worker"
    assert "busy-worker" in held.stderr
    await backend.leases.release(lease)

    resolved = cli(*answer_it)
    assert resolved.returncode == 0, resolved.stderr
    assert "recorded for call call_2_0 of run r" in resolved.stdout
    before_again = await backend.idempotency.read("t", "r", marker_key("call_2_0"))
    again = cli(*answer_it)
    assert again.returncode == 2
    assert "not undecidable now" in again.stderr
    assert await backend.idempotency.read("t", "r", marker_key("call_2_0")) == before_again

    carried = cli("run", "--resume", "r", "--tenant", "t")
    assert carried.returncode == 0, carried.stderr
    assert carried.stdout.splitlines()[-1].endswith(FINAL)
    # "it did not run": the resume sends it; "it ran": the recorded result is replayed
    assert len(services.messages()) == (2 if answer == "did-not-run" else 1)
    assert len(services.bookings()) == 1


async def test_a_checkpoint_from_a_newer_kit_exits_4(cli: Cli, backend: Backend) -> None:
    future = {"format_version": 99, "run_id": "f", "tenant": "t", "hologram": True}
    await backend.checkpoints.put("t", "f", json.dumps(future).encode(), fence=1)
    for args in (("inspect", "f", "--tenant", "t"), ("run", "--resume", "f", "--tenant", "t")):
        answer = cli(*args)
        assert answer.returncode == 4, answer.stderr
        assert "has format 99; this kit reads format 1" in answer.stderr
    assert await backend.checkpoints.latest("t", "f") == json.dumps(future).encode()


async def test_a_revision_mismatch_exits_4(cli: Cli, backend: Backend) -> None:
    _start(cli)
    stored = await backend.checkpoints.latest("t", "r")
    assert stored is not None
    payload = json.loads(stored)
    payload["agent_revision"] = "rev-0000000000000000"
    await backend.checkpoints.put("t", "r", json.dumps(payload).encode(), fence=payload["fence"])
    answer = cli("run", "--resume", "r", "--tenant", "t", "--holder", "w2")
    assert answer.returncode == 4
    assert "checkpointed under agent revision rev-0000000000000000" in answer.stderr
    assert BOOKING.revision in answer.stderr
    assert await backend.leases.held("t", "r") is None


async def test_approve_names_the_request_the_run_waits_on(cli: Cli, backend: Backend) -> None:
    call = ToolCall(id="call_0_0", name="notify_passenger", arguments={"phone": "1", "text": "hi"})
    request = approval_request_id("t", "w", call.id)
    waiting = Checkpoint(
        run_id="w",
        tenant="t",
        agent_name="booking",
        agent_revision=BOOKING.revision,
        boundary=Boundary.BEFORE_APPROVAL,
        fence=1,
        messages=(
            Message.of("system", BOOKING.instructions),
            Message.of("user", "text Ada"),
            Message(role="assistant", tool_calls=(call,)),
        ),
        pending=(PendingCall(call=call, requires_approval=True),),
        approval=PendingApproval(request_id=request, call_id=call.id, tool=call.name),
        usage=Usage(input_tokens=10, output_tokens=2),
        cost_micros=36,
        iteration=1,
    )
    await backend.checkpoints.put("t", "w", encode(waiting), fence=1)
    inspected = cli("inspect", "w", "--tenant", "t")
    assert inspected.stdout.splitlines()[2] == f"waiting on approval {request}"
    assert (
        f"  {call.id}  notify_passenger  never_ran: waits on approval {request}: made only once "
        "approved" in inspected.stdout.splitlines()
    )

    wrong = cli("approve", "w", "--tenant", "t", "--request", "apr-000000000000")
    assert wrong.returncode == 2
    assert f"it is waiting on approval {request}" in wrong.stderr
    right = cli("approve", "w", "--tenant", "t", "--request", request, "--by", "alice")
    assert right.returncode == 0, right.stderr
    assert right.stdout.startswith(f"approved {request} (notify_passenger, call call_0_0)")
    done = cli("approve", "r-missing", "--tenant", "t", "--request", request)
    assert done.returncode == 1


def test_schema_and_agents(cli: Cli) -> None:
    ddl = cli("schema", "sqlite")
    assert ddl.returncode == 0
    assert "CREATE TABLE" in ddl.stdout
    agents = cli("agents")
    assert agents.returncode == 0
    tools = "tools: search_flights, book_flight, notify_passenger"
    assert agents.stdout.splitlines() == [
        f"booking  {BOOKING.revision}  model scripted  {tools}",
        f"booking-approved  {BOOKING_APPROVED.revision}  model scripted  {tools}",
        f"booking-paid  {BOOKING_PAID.revision}  model scripted  "
        "tools: search_flights, book_flight, charge_card",
    ]


def test_a_budget_stops_the_run_and_resume_can_raise_it(cli: Cli) -> None:
    stopped = cli(*START, "r", "--budget-micros", "2000")
    assert stopped.returncode == 0, stopped.stderr
    assert stopped.stdout.splitlines()[-1] == "run r budget_exceeded at iteration 2, 2692 micros"
    # the reply that crossed the budget was kept (iteration 2); over budget, nothing is dispatched
    same = cli("run", "--resume", "r", "--tenant", "t")
    assert same.returncode == 0
    assert same.stdout.splitlines()[-1] == "run r budget_exceeded at iteration 2, 2692 micros"
    assert services.bookings() == []
    raised = cli("run", "--resume", "r", "--tenant", "t", "--budget-micros", "100000")
    assert raised.returncode == 0, raised.stderr
    # the kept reply's booking is dispatched without asking the model again: 4 calls in all
    assert raised.stdout.splitlines()[-1].startswith("run r completed at iteration 4, 6132 micros")
    assert len(services.bookings()) == 1


@pytest.mark.parametrize(
    ("status", "exit_code", "says"),
    [(503, 5, "answered 503"), (401, 6, "answered 401")],
)
def test_a_provider_that_fails_exits_5_only_when_a_retry_can_help(
    cli: Cli, status: int, exit_code: int, says: str
) -> None:
    """A busy model is worth asking again (5); one that refuses the key is not (6)."""
    with endpoint() as server:
        server.answer(status, {"error": {"message": "no"}})
        cli.env["AGENTRUN_AGENT_MODULES"] = "tests.cli.remote_agent"
        cli.env["AGENTRUN_TEST_PROVIDER_URL"] = server.url
        cli.env["PYTHONPATH"] += os.pathsep + str(Path(__file__).parents[2])
        answer = cli("run", "remote", "--input", "hi", "--tenant", "t", "--run-id", "p")
    assert answer.returncode == exit_code, answer.stderr
    assert says in answer.stderr


NOT_UTF8 = os.fsdecode(b"run-\xff")
"""What Python makes of a byte that is not UTF-8 on a command line: a lone surrogate."""


@pytest.mark.parametrize(
    ("command", "named"),
    [
        (("inspect", NOT_UTF8, "--tenant", "t"), "run id"),
        (("inspect", "r", "--tenant", NOT_UTF8), "tenant"),
        (("run", "booking", "--input", "go", "--tenant", "t", "--run-id", NOT_UTF8), "run id"),
        (("run", "--resume", NOT_UTF8, "--tenant", "t"), "run id"),
        (("resolve", NOT_UTF8, "--tenant", "t", "--call", "c1", "--did-not-run"), "run id"),
    ],
    ids=["inspect", "inspect-tenant", "run", "resume", "resolve"],
)
def test_an_id_that_is_not_utf8_is_refused_naming_it(
    cli: Cli, backend: Backend, command: tuple[str, ...], named: str
) -> None:
    done = cli(*command)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"{named} 'run-\\udcff' is not valid Unicode" in done.stderr


@pytest.mark.parametrize(
    "command",
    [
        ("schema", "postgres"),
        ("inspect", "r", "--tenant", "t", "--json"),
        ("run", "booking", "--input", "book Ada", "--tenant", "t", "--run-id", "r2"),
    ],
    ids=["schema", "inspect", "run"],
)
def test_a_reader_that_stops_reading_is_no_error(cli: Cli, command: tuple[str, ...]) -> None:
    """``agentrun schema postgres | head -1``: the reader closed the pipe before the command
    wrote to it. The command does its work and exits 0, saying nothing; a run goes on to its end."""
    _start(cli)
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [*COMMAND, "--store", cli.store, *command],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=cli.env,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (0, "")
    if command[0] == "run":
        inspected = cli("inspect", "r2", "--tenant", "t")
        assert inspected.stdout.splitlines()[0] == "run r2  tenant t  agent booking"


async def test_a_call_no_frontier_names_exits_4_until_a_person_answers(
    cli: Cli, backend: Backend
) -> None:
    """A text was being sent for the run after its newest frontier, which was then lost: the
    frontier left does not name it, its record does."""
    _start(cli)
    await backend.idempotency.begin(
        "t", "r", marker_key("call_9_0"), holder="gone", fence=1, call_id="call_9_0",
        tool="notify_passenger",
    )  # fmt: skip
    inspected = cli("inspect", "r", "--tenant", "t")
    assert inspected.returncode == 0
    assert (
        "  call_9_0  notify_passenger  not_in_any_frontier: refuse until a person answers"
        in inspected.stdout
    )
    assert "(dispatched by gone (fence 1) after the newest frontier was written, and in flight" in (
        inspected.stdout
    )
    calls = json.loads(cli("inspect", "r", "--tenant", "t", "--json").stdout)["calls"]
    assert [(c["call_id"], c["disposition"]) for c in calls] == [
        ("call_9_0", "not_in_any_frontier")
    ]
    refused = cli("run", "--resume", "r", "--tenant", "t")
    assert refused.returncode == 4
    assert "notify_passenger (call call_9_0) was dispatched after its newest checkpoint" in (
        refused.stderr
    )
    answered = cli(
        "resolve", "r", "--tenant", "t", "--call", "call_9_0", "--ran", "--result", "sent",
        "--by", "bob",
    )  # fmt: skip
    assert answered.returncode == 0, answered.stderr
    assert "no outstanding calls" in cli("inspect", "r", "--tenant", "t").stdout
    assert cli("run", "--resume", "r", "--tenant", "t").returncode == 0
