"""What the operator tests look at: AgentRuns as kubectl shows them, and the world's records.

``tests.kube.operator_agents`` writes every side effect (a booking, a text, a refund) to a
SQLite file; counting its rows is how a test proves a call was made once and not twice.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.kube import Kube
from tests.support.operator import Operators, wait_for


def count_effects(effects: Path, kind: str, detail_like: str = "%") -> int:
    with sqlite3.connect(effects, timeout=10) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
        return int(
            connection.execute(
                "SELECT count(*) FROM effects WHERE kind = ? AND detail LIKE ?", (kind, detail_like)
            ).fetchone()[0]
        )


def effect_details(effects: Path, kind: str) -> list[str]:
    """The details of every effect of ``kind``, in the order they were made."""
    with sqlite3.connect(effects, timeout=10) as connection:
        connection.execute("CREATE TABLE IF NOT EXISTS effects (kind TEXT, detail TEXT)")
        rows = connection.execute(
            "SELECT detail FROM effects WHERE kind = ? ORDER BY rowid", (kind,)
        ).fetchall()
    return [str(row[0]) for row in rows]


def run_manifest(name: str, agent: str, *, extra: str = "", ttl: int = 5) -> str:
    return (
        textwrap.dedent(f"""\
        apiVersion: agentrun.dev/v1alpha1
        kind: AgentRun
        metadata:
          name: {name}
        spec:
          agent: {agent}
          input: go
          leasePolicy:
            ttlSeconds: {ttl}
            renewWithinSeconds: 2
        """)
        + extra
    )


def apply_run(kube: Kube, name: str, agent: str, *, extra: str = "", ttl: int = 5) -> None:
    kube.kubectl("apply", "-f", "-", stdin=run_manifest(name, agent, extra=extra, ttl=ttl))


def get_run(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "agentrun", name, "-o", "json").stdout)
    return found


def condition(kube: Kube, name: str, type_: str) -> dict[str, Any]:
    for found in (get_run(kube, name).get("status") or {}).get("conditions") or ():
        if found["type"] == type_:
            return dict(found)
    return {}


def has_condition(
    kube: Kube, name: str, type_: str, status: str, reason: str | None = None
) -> bool:
    found = condition(kube, name, type_)
    return found.get("status") == status and reason in (None, found.get("reason"))


def wait_until_completed(
    kube: Kube, name: str, logs: Callable[[], str], *, within: float = 60
) -> None:
    """Wait for AgentRun ``name`` to end ``Completed`` (``Succeeded`` True); after ``within``
    seconds fail with what ``logs`` gives (the operators' logs say why it did not)."""
    wait_for(
        f"{name} to complete",
        lambda: has_condition(kube, name, "Succeeded", "True", "Completed"),
        within,
        logs,
    )


def book_slowly(kube: Kube, operators: Operators, effects: Path, name: str, ttl: int = 5) -> int:
    """Apply a ``slowbook`` run and wait until it has booked; the bookings made before it."""
    before = count_effects(effects, "booking")
    apply_run(kube, name, "slowbook", ttl=ttl)
    wait_for(
        "the booking", lambda: count_effects(effects, "booking") == before + 1, 60, operators.logs
    )
    return before


def lease_of(kube: Kube, name: str) -> dict[str, Any]:
    return dict((get_run(kube, name).get("status") or {}).get("lease") or {})


def create_run(kube: Kube, name: str) -> None:
    """An AgentRun of the ``booking`` agent, created with kubectl."""
    kube.kubectl(
        "apply",
        "-f",
        "-",
        stdin=textwrap.dedent(f"""\
            apiVersion: agentrun.dev/v1alpha1
            kind: AgentRun
            metadata:
              name: {name}
            spec:
              agent: booking
              input: go
            """),
    )


def text_cut_short(kube: Kube, operators: Operators, effects: Path, name: str) -> dict[str, Any]:
    """A run of agent ``texter`` whose holder is SIGKILLed while its keyless text is in flight
    (a replica whose gateway lingers 30 s takes it, the others paused meanwhile): the run waits
    ``Indeterminate``; its one undecidable call (``status.indeterminateCalls``)."""
    lingering = operators.start("replica-slow", AGENTRUN_TEST_SMS_LINGER="30")
    for replica in operators.replicas:
        if replica is not lingering:
            replica.signal(signal.SIGSTOP)  # only the lingering replica may take this run
    try:
        apply_run(kube, name, "texter")
        wait_for("the text", lambda: count_effects(effects, "sms") == 1, 60, operators.logs)
        lingering.signal(signal.SIGKILL)
        lingering.wait()
    finally:
        for replica in operators.replicas:
            if replica is not lingering:
                replica.signal(signal.SIGCONT)
    wait_for(
        f"{name} to be indeterminate",
        lambda: has_condition(kube, name, "Indeterminate", "True"),
        60,
        operators.logs,
    )
    [call] = get_run(kube, name)["status"]["indeterminateCalls"]
    return dict(call)
