"""Every command output shown in README.md and docs/ is what the command prints today.

Each annotated console block (see ``samples.py``) is run against a fresh SQLite store prepared by
the scenario its annotation names, with this checkout's CLI; a sample that drifts from the code
fails here, and so does a block that shows output without an annotation.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentrun import open_backend
from agentrun.demo import services
from tests.docs.samples import ROOT, Sample, matches, samples, unchecked_output
from tests.support.cli import COMMAND, cli_env

SAMPLES = [sample for sample in samples() if sample.scenario != "checked-by"]
CHECKED_ELSEWHERE = [sample for sample in samples() if sample.scenario == "checked-by"]


@dataclass
class World:
    """The state samples run in: one store, one demo services folder, a shim ``agentrun``."""

    folder: Path
    env: dict[str, str]

    @property
    def store(self) -> str:
        return self.env["AGENTRUN_STORE"]

    def agentrun(self, *args: str, **extra: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*COMMAND, *args],
            env={**self.env, **extra},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def ran(self, run: str, tenant: str, agent: str = "booking") -> None:
        """A run started and carried to its first stop (done, or waiting on a person)."""
        done = self.agentrun(
            "run", agent, "--input", "Book Ada to Lisbon", "--tenant", tenant, "--run-id", run,
            "--holder", "worker-1",
        )  # fmt: skip
        output, _ = done.communicate(timeout=60)
        assert done.returncode == 0, output

    def killed(self, run: str, tenant: str, at: str, holder: str, ttl: str, lapsed: bool) -> None:
        """A worker SIGKILLed right after the ``at`` tool acted (``book`` or ``notify``)."""
        counter = {"book": services.bookings, "notify": services.messages}[at]
        worker = self.agentrun(
            "run", "booking", "--input", "Book Ada to Lisbon", "--tenant", tenant,
            "--run-id", run, "--holder", holder, "--lease-ttl", ttl,
            AGENTRUN_DEMO_LINGER=at, AGENTRUN_DEMO_LINGER_SECONDS="60",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not counter():
            assert worker.poll() is None, worker.communicate()
            assert time.monotonic() < deadline, f"the worker never reached {at}"
            time.sleep(0.05)
        os.kill(worker.pid, signal.SIGKILL)
        worker.communicate(timeout=10)
        while lapsed and self._held(tenant, run):
            assert time.monotonic() < deadline, "the dead worker's lease never lapsed"
            time.sleep(0.1)

    def _held(self, tenant: str, run: str) -> bool:
        async def held() -> bool:
            async with await open_backend(self.store) as backend:
                return await backend.leases.held(tenant, run) is not None

        return asyncio.run(held())

    def changed_agent(self, run: str, tenant: str, revision: str) -> None:
        """A finished run whose frontier pins ``revision``: the agent deployed now is not it."""
        self.ran(run, tenant)

        async def pin() -> None:
            async with await open_backend(self.store) as backend:
                stored = await backend.checkpoints.latest(tenant, run)
                assert stored is not None
                payload = json.loads(stored)
                payload["agent_revision"] = revision
                await backend.checkpoints.put(
                    tenant, run, json.dumps(payload).encode(), fence=payload["fence"]
                )

        asyncio.run(pin())


def _prepare(world: World, sample: Sample) -> None:
    a = sample.arguments
    scenarios: dict[str, Callable[[], None]] = {
        "fresh": lambda: None,
        "ran": lambda: world.ran(a["run"], a["tenant"], a.get("agent", "booking")),
        "killed": lambda: world.killed(
            a["run"], a["tenant"], a["at"], a["holder"], a.get("ttl", "60"), "lapsed" in a
        ),
        "changed-agent": lambda: world.changed_agent(a["run"], a["tenant"], a["revision"]),
    }
    if sample.scenario not in scenarios:
        raise AssertionError(f"{sample.name}: no scenario {sample.scenario!r}")
    scenarios[sample.scenario]()


def _world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "agentrun").write_text(f'#!/bin/sh\nexec {" ".join(COMMAND)} "$@"\n')
    (shim / "agentrun").chmod(0o755)
    demo = tmp_path / "demo"
    monkeypatch.setenv("AGENTRUN_DEMO_DIR", str(demo))  # the services read here, too
    env = {k: v for k, v in cli_env().items() if not k.startswith("AGENTRUN_")}
    env.update(
        PATH=f"{shim}{os.pathsep}{env['PATH']}",
        AGENTRUN_STORE=f"sqlite:///{tmp_path / 'state.db'}",
        AGENTRUN_DEMO_DIR=str(demo),
        PYTHONUNBUFFERED="1",  # stdout and stderr interleave as a terminal shows them
    )
    return World(tmp_path, env)


def test_every_console_block_that_shows_output_is_checked() -> None:
    assert unchecked_output() == []


@pytest.mark.parametrize("sample", CHECKED_ELSEWHERE, ids=lambda sample: sample.name)
def test_a_sample_checked_elsewhere_names_a_test_that_reads_its_document(sample: Sample) -> None:
    (test,) = sample.arguments
    source = (ROOT / test).read_text()
    assert sample.document.name in source, f"{test} does not read {sample.document.name}"


def _chains() -> list[list[Sample]]:
    """Samples grouped so each ``continue`` runs after the sample it continues."""
    chains: list[list[Sample]] = []
    for sample in SAMPLES:
        if sample.scenario == "continue":
            assert chains, f"{sample.name}: nothing to continue"
            assert chains[-1][0].document == sample.document, sample.name
            chains[-1].append(sample)
        else:
            chains.append([sample])
    return chains


@pytest.mark.parametrize("chain", _chains(), ids=lambda chain: chain[0].name)
def test_the_sample_prints_what_the_document_shows(
    chain: list[Sample], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = _world(tmp_path, monkeypatch)
    _prepare(world, chain[0])
    rc = 0
    for sample in chain:
        for step in sample.steps:
            done = subprocess.run(
                ["bash", "-c", f"(exit {rc}); {step.command}"],
                env=world.env,
                cwd=world.folder,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=120,
            )
            rc = done.returncode
            actual = done.stdout.splitlines()
            assert matches(step.expected, actual), (
                f"{sample.name}: `{step.command}` printed\n"
                + "\n".join(actual)
                + "\n--- the document shows\n"
                + "\n".join(step.expected)
            )
