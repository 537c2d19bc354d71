"""``agentrun``: start, inspect, carry on, approve, resolve and settle runs from a terminal.

The store comes from ``--store`` or ``AGENTRUN_STORE`` (default: an SQLite file under
``./.agentrun``). Every command that could touch a run another worker holds goes through the
run's lease; ``inspect`` takes none, so it is always safe to type.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import os
import sys
import textwrap
from collections.abc import Awaitable, Callable, Sequence

from agentrun import Backend, open_backend
from agentrun._backend import StoreSet
from agentrun._checkpointing import Checkpointer, WriteReceipt
from agentrun._decisions import ApprovalDecision, answer_approval, answer_call
from agentrun._errors import AgentRunError, ConfigurationError, NothingCheckpointedError
from agentrun._frontier import Checkpoint, describe
from agentrun._leases import LeasePolicy, RunLease, default_holder
from agentrun._outcomes import Exit
from agentrun._resume import plan_resume
from agentrun.cli import _kube as kube
from agentrun.cli._render import lease_line, plan_json, plan_lines, result_line
from agentrun.runner._loop import AgentRunner
from agentrun.runner._registry import RegisteredAgent, load_agent, registered_agents
from agentrun.runner._results import RunResult
from agentrun.runner._run_settler import Settled, SettledCall, settle_run
from agentrun.runner._tracing import export_if_configured

DEFAULT_STORE = "sqlite:///./.agentrun/state.db"
EXIT_HELP = "exit codes:\n" + "\n".join(
    textwrap.fill(
        code.meaning, width=95, initial_indent=f"  {code.value}  ", subsequent_indent="     "
    )
    for code in Exit
)

Command = Callable[[argparse.Namespace, Backend], Awaitable[Exit]]


def _say(line: str = "") -> None:
    """Print ``line``. A reader that stopped reading (``agentrun schema postgres | head -1``)
    is no error: the rest of the output goes nowhere and the command carries on to its end, so
    a run whose progress nobody reads still finishes, and the exit code says what it did."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, sys.stdout.fileno())
        os.close(nowhere)


async def _frontier(backend: Backend, tenant: str, run_id: str) -> Checkpoint:
    checkpoint = await Checkpointer(backend.checkpoints).latest(tenant, run_id)
    if checkpoint is None:
        raise NothingCheckpointedError(run_id=run_id, tenant=tenant)
    return checkpoint


async def _inspect(args: argparse.Namespace, backend: Backend) -> Exit:
    # Frontier and transcript in one read where the store can, so that a live run's commit
    # (a compaction deletes the segments it replaces) never lands between the two.
    commits = backend.commits if isinstance(backend, StoreSet) else None
    found = await Checkpointer(
        backend.checkpoints, history=backend.history, commits=commits
    ).resumable(args.tenant, args.run_id)
    if found is None:
        raise NothingCheckpointedError(run_id=args.run_id, tenant=args.tenant)
    checkpoint, transcript = found
    plan = await plan_resume(checkpoint, backend.idempotency, transcript)
    lease = await backend.leases.held(args.tenant, args.run_id)
    if args.json:
        _say(json.dumps(plan_json(checkpoint, plan, lease), indent=2))
        return Exit.CARRIED_ON
    _say(describe(checkpoint))
    for line in plan_lines(checkpoint, plan):
        _say(line)
    _say(lease_line(lease))
    return Exit.CARRIED_ON


async def _announce_lease(lease: RunLease, resumed: bool) -> None:
    _say(f"held with fence {lease.fence} by {lease.holder}")


def _runner(args: argparse.Namespace, backend: Backend, registered: RegisteredAgent) -> AgentRunner:
    async def progress(
        checkpoint: Checkpoint, receipt: WriteReceipt | None, error: Exception | None
    ) -> None:
        written = f"checkpointed {receipt.size} bytes" if receipt else f"NOT checkpointed: {error}"
        _say(f"  iteration {checkpoint.iteration}  {checkpoint.boundary.value}  {written}")

    return AgentRunner.on_backend(
        backend,
        registered,
        lease_policy=LeasePolicy(ttl=args.lease_ttl, renew_within=args.lease_ttl / 3),
        holder=args.holder or default_holder(),
        on_boundary=progress,
        on_lease=_announce_lease,
    )


async def _run(args: argparse.Namespace, backend: Backend) -> Exit:
    if args.resume:
        return await _resume(args, backend)
    if not args.agent or args.input is None:
        raise ConfigurationError(
            "starting a run needs AGENT and --input TEXT (or --resume RUN_ID to carry one on)"
        )
    registered = load_agent(args.agent)
    runner = _runner(args, backend, registered)
    _say(f"starting {args.agent} as {runner.holder}")
    result = await runner.run(
        registered.definition,
        args.input,
        tenant=args.tenant,
        run_id=args.run_id,
        budget_micros=args.budget_micros,
    )
    return _finish(result)


async def _resume(args: argparse.Namespace, backend: Backend) -> Exit:
    checkpoint = await _frontier(backend, args.tenant, args.resume)
    _say(describe(checkpoint))
    registered = load_agent(checkpoint.agent_name)
    runner = _runner(args, backend, registered)
    result = await runner.resume(
        registered.definition, args.resume, tenant=args.tenant, budget_micros=args.budget_micros
    )
    return _finish(result)


def _finish(result: RunResult) -> Exit:
    _say(result_line(result))
    return result.outcome.exit_code


def _decision(args: argparse.Namespace) -> ApprovalDecision:
    return ApprovalDecision(approved=not args.deny, by=args.by, reason=args.reason)


def _verb(decision: ApprovalDecision) -> str:
    return "approved" if decision.approved else "denied"


def _answer(args: argparse.Namespace) -> str:
    return f"it ran, with result {args.result!r}" if args.ran else "it did not run"


async def _approve(args: argparse.Namespace, backend: Backend) -> Exit:
    decision = _decision(args)
    waiting = await answer_approval(backend, args.tenant, args.run_id, args.request, decision)
    _say(
        f"{_verb(decision)} {args.request} ({waiting.tool}, call {waiting.call_id}) for run "
        f"{args.run_id} as {args.by}; carry it on with "
        f"`agentrun run --resume {args.run_id} --tenant {args.tenant}`"
    )
    return Exit.CARRIED_ON


async def _resolve(args: argparse.Namespace, backend: Backend) -> Exit:
    await answer_call(
        backend, args.tenant, args.run_id, args.call, ran=args.ran, result=args.result, by=args.by
    )
    _say(
        f"recorded for call {args.call} of run {args.run_id}: {_answer(args)} (by {args.by}); "
        f"carry it on with `agentrun run --resume {args.run_id} --tenant {args.tenant}`"
    )
    return Exit.CARRIED_ON


_SETTLED_SAYS = {
    Settled.RAN: "settled: it ran; its result is recorded",
    Settled.DID_NOT_RUN: "settled: it did not run; the next resume makes it",
    Settled.LEFT_TO_A_PERSON: "left to a person",
    Settled.NO_SETTLEMENT: "left to a person: no way to settle it is declared",
    Settled.ANSWERED_MEANWHILE: "answered by somebody else meanwhile; nothing written",
}


def _settled_line(call: SettledCall) -> str:
    return f"call {call.call_id} ({call.tool or 'unknown tool'}): {_SETTLED_SAYS[call.settled]}" + (
        f" ({call.evidence})" if call.evidence else ""
    )


async def _settle(args: argparse.Namespace, backend: Backend) -> Exit:
    checkpoint = await _frontier(backend, args.tenant, args.run_id)
    registered = load_agent(checkpoint.agent_name)
    calls = await settle_run(
        backend,
        registered.definition,
        args.tenant,
        args.run_id,
        by=args.by,
        secrets=registered.secrets,
    )
    unsettled = [call for call in calls if call.settled in _UNSETTLED]
    if args.json:
        listed = [call.model_dump(mode="json") for call in calls]
        _say(json.dumps({"run_id": args.run_id, "tenant": args.tenant, "calls": listed}, indent=2))
    else:
        for call in calls:
            _say(_settled_line(call))
        if not calls:
            _say(f"run {args.run_id} has no undecidable call")
        elif not unsettled:
            _say(f"carry it on with `agentrun run --resume {args.run_id} --tenant {args.tenant}`")
        else:
            _say(f"answer the rest with `agentrun resolve {args.run_id} --tenant {args.tenant}`")
    return Exit.MUST_NOT_CARRY_ON if unsettled else Exit.CARRIED_ON


_UNSETTLED = (Settled.LEFT_TO_A_PERSON, Settled.NO_SETTLEMENT)


def _schema(args: argparse.Namespace) -> Exit:
    if args.dialect == "postgres":
        from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA

        _say(EXPECTED_CHECKPOINT_SCHEMA)
    else:
        from agentrun.stores._sqlite import EXPECTED_SQLITE_SCHEMA

        _say(EXPECTED_SQLITE_SCHEMA)
    return Exit.CARRIED_ON


def _agents() -> Exit:
    for name, registered in sorted(registered_agents().items()):
        tools = ", ".join(t.name for t in registered.definition.tools)
        _say(
            f"{name}  {registered.definition.revision}  model {registered.definition.model}  "
            f"tools: {tools}"
        )
    return Exit.CARRIED_ON


def _console(args: argparse.Namespace) -> Exit:
    """Become ``python -m agentrun.console --auth local``: the console is a server of its own
    (Starlette and uvicorn, agentrun[console]), which the CLI neither imports nor needs."""
    argv = [sys.executable, "-m", "agentrun.console", "--auth", "local", "--store", args.store]
    argv += ["--host", args.host, "--port", str(args.port)]
    if args.read_only:
        argv.append("--read-only")
    sys.stdout.flush()
    os.execv(sys.executable, argv)
    return Exit.CARRIED_ON  # not reached: the process is the console now


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentrun",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Crash-safe agent runs: start, inspect, carry on, approve, resolve, settle.",
        epilog=EXIT_HELP + "\n\nstore URLs: sqlite:///path/state.db, redis://host:port/0, "
        "postgresql://user@host:port/db",
    )
    parser.add_argument(
        "--store",
        default=os.environ.get("AGENTRUN_STORE", DEFAULT_STORE),
        help="where runs are kept (env AGENTRUN_STORE; default %(default)s)",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def with_run(name: str, help: str, *, kube: bool = False) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help, description=help)
        sub.add_argument(
            "run_id",
            metavar="RUN_ID",
            help="the run id (with --kube: the AgentRun's name)" if kube else "the run id",
        )
        sub.add_argument(
            "--tenant",
            required=not kube,
            help="the run's tenant (not needed with --kube)" if kube else "the run's tenant",
        )
        if kube:
            sub.add_argument(
                "--kube",
                action="store_true",
                help="answer for an AgentRun in the cluster: patch its spec with "
                "kubectl (current context) instead of writing to --store",
            )
            sub.add_argument("--namespace", "-n", help="with --kube: the AgentRun's namespace")
        return sub

    inspect = with_run(
        "inspect", "show a run's frontier and what a resume would do (takes no lease)"
    )
    inspect.add_argument("--json", action="store_true", help="machine-readable output")

    run = commands.add_parser(
        "run",
        help="start a run, or carry one on with --resume",
        description="Start AGENT on --input, or carry RUN_ID on with --resume.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXIT_HELP,
    )
    run.add_argument("agent", nargs="?", metavar="AGENT", help="a registered agent name")
    run.add_argument("--input", help="what to ask the agent")
    run.add_argument("--resume", metavar="RUN_ID", help="carry this run on from its checkpoint")
    run.add_argument("--tenant", required=True, help="the tenant the run belongs to")
    run.add_argument("--run-id", help="id for a new run (default: generated)")
    run.add_argument("--budget-micros", type=int, help="refuse to spend more than this")
    run.add_argument(
        "--lease-ttl",
        type=float,
        default=60.0,
        help="seconds a lease outlives a silent worker (default %(default)s)",
    )
    run.add_argument("--holder", help="this worker's identity (default: host-pid-random)")

    approve = with_run("approve", "approve (or --deny) the approval a run waits on", kube=True)
    approve.add_argument("--request", required=True, help="the request id `inspect` shows")
    approve.add_argument("--deny", action="store_true", help="refuse the call instead")
    approve.add_argument("--reason", default="", help="told to the model on a denial")
    approve.add_argument(
        "--by", help="who decides (default: your login name; with --kube, who kubectl is)"
    )

    resolve = with_run("resolve", "answer for a call nobody can decide", kube=True)
    resolve.add_argument("--call", required=True, help="the call id `inspect` shows")
    answer = resolve.add_mutually_exclusive_group(required=True)
    answer.add_argument("--ran", action="store_true", help="it happened (give --result)")
    answer.add_argument("--did-not-run", action="store_true", help="it did not happen")
    resolve.add_argument("--result", help="with --ran: the result the call had")
    resolve.add_argument(
        "--by", help="who answers (default: your login name; with --kube, who kubectl is)"
    )

    settle = with_run("settle", "ask the services what became of a run's undecidable calls")
    settle.formatter_class = argparse.RawDescriptionHelpFormatter
    settle.description = textwrap.fill(
        "For each call of RUN_ID left in flight by a worker that died, whose tool declares a "
        "way to settle it (replay with the same idempotency key, or a read-only probe: "
        "docs/settling.md), ask the service now and record what it says as an answer by --by. "
        "Calls it cannot settle are left to a person (agentrun resolve), each with what was "
        "asked and answered. It takes the run's lease, and ignores the tools' delaySeconds: "
        "you asked for it now. The agent is the registered one the run's checkpoint names.",
        width=95,
    )
    settle.epilog = (
        EXIT_HELP + "\n\nsettle exits 0 when every undecidable call is settled (or there is none: "
        "carry the run on),\nand 4 when some are left to a person"
    )
    settle.add_argument(
        "--by", help="who the answers are recorded as given by (default: agentrun settle (LOGIN))"
    )
    settle.add_argument("--json", action="store_true", help="machine-readable output")

    schema = commands.add_parser(
        "schema", help="print the published DDL (never applied by the kit to PostgreSQL)"
    )
    schema.add_argument("dialect", choices=("sqlite", "postgres"), help="whose DDL to print")
    commands.add_parser("agents", help="list the agents registered in this installation")
    console = commands.add_parser(
        "console",
        help="serve the run console over --store in a browser (loopback only)",
        description="Serve the run console over the runs of --store, without Kubernetes: the "
        "runs, the inbox of what waits on a person, each run's tool calls and transcript, and "
        "approve, deny and resolve as you (your login name). It listens on a loopback address "
        "only and prints the address to open, which carries a token made at each start (or "
        "AGENTRUN_CONSOLE_TOKEN): only a browser that opened it acts as you, not another user "
        "of the machine. Needs agentrun[console].",
    )
    console.add_argument("--host", default="127.0.0.1", help="loopback address (%(default)s)")
    console.add_argument("--port", type=int, default=8080, help="port (default %(default)s)")
    console.add_argument("--read-only", action="store_true", help="show runs; answer nothing")
    return parser


COMMANDS: dict[str, Command] = {
    "inspect": _inspect,
    "run": _run,
    "approve": _approve,
    "resolve": _resolve,
    "settle": _settle,
}


def _in_cluster(args: argparse.Namespace) -> Exit:
    if args.command == "approve":
        tool, by = kube.approve(
            args.namespace, args.run_id, args.request, approved=not args.deny, reason=args.reason
        )
        verb = "denied" if args.deny else "approved"
        _say(
            f"{verb} {args.request} ({tool}) in AgentRun {args.run_id} as {by}; the "
            "operator carries it on"
        )
    else:
        tool, by = kube.resolve(
            args.namespace, args.run_id, args.call, ran=args.ran, result=args.result
        )
        _say(
            f"recorded for {tool} (call {args.call}) in AgentRun {args.run_id}: {_answer(args)} "
            f"(by {by}); the operator carries it on"
        )
    return Exit.CARRIED_ON


async def _dispatch(args: argparse.Namespace) -> Exit:
    # Only a new run may create a store; every other command reads or answers for existing runs.
    creates = args.command == "run" and not args.resume
    async with await open_backend(args.store, create=creates) as backend:
        return await COMMANDS[args.command](args, backend)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "resolve" and args.ran != (args.result is not None):
        # a command line it cannot read: say so (exit 2) before looking the run up
        parser.error(
            "resolve: --ran needs --result (the result the call had); --did-not-run takes none"
        )
    if getattr(args, "kube", False) is False and getattr(args, "tenant", "") is None:
        parser.error(f"{args.command}: --tenant is required (or --kube for an AgentRun)")
    if getattr(args, "by", None) is not None and getattr(args, "kube", False):
        parser.error(
            f"{args.command}: --by cannot be used with --kube: the answer names the user the "
            "API server authenticates you as (kubectl auth whoami), and no one else"
        )
    if args.command in ("approve", "resolve") and not args.kube and args.by is None:
        args.by = getpass.getuser()
    if args.command == "settle" and args.by is None:
        args.by = f"agentrun settle ({getpass.getuser()})"
    try:
        export_if_configured()
        if args.command == "schema":
            return _schema(args)
        if args.command == "agents":
            return _agents()
        if args.command == "console":
            return _console(args)
        if getattr(args, "kube", False):
            return _in_cluster(args)
        return int(asyncio.run(_dispatch(args)))
    except AgentRunError as error:
        print(f"agentrun: {error}", file=sys.stderr, flush=True)
        return int(error.outcome.exit_code)
    except KeyboardInterrupt:
        return 130


def frontier_main(argv: Sequence[str] | None = None) -> int:
    """``agentrun inspect ...``"""
    return main(["inspect", *(sys.argv[1:] if argv is None else argv)])


def resume_main(argv: Sequence[str] | None = None) -> int:
    """``agentrun run --resume ...``"""
    return main(["run", *(sys.argv[1:] if argv is None else argv)])
