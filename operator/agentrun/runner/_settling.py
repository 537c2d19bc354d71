"""Settling a call a crash left undecided, by asking the service what became of it.

``settle_call`` asks the way the call's tool declares (``Tool.settlement``: a ``Replay`` or a
``Probe``, ``agentrun.runner._settlement``) and returns a ``Verdict``: it ran (with the result
the call had), it did not run, or ``None``: left to a person, with what was asked and answered.
It decides nothing itself and writes nothing: the caller records a conclusive verdict as a
person's answer is recorded (``agentrun.runner._run_settler`` in the kit, the operator's
``spec.resolutions`` in a cluster).

Settling is never a guess:

* **replay** — the same call again, with the same arguments and idempotency key. An answer is
  the first outcome (the service replays it): ran, with that result. A service still working on
  the first request (``StillInFlightError``: HTTP 409) is asked again after its
  ``Retry-After`` (or a pause), within ``attempts``. Anything else — a refusal (a key reused
  with other data is 422), a 5xx, a timeout, no connection — is left to a person at once.
* **probe** — a read-only question. An answer that says it ran settles the call as ran; one that
  says it did not run settles it so only when the tool declares that answer authoritative.
  One that says neither, an error or a timeout is asked again, within ``attempts``.
* A call whose arguments were masked in the frontier cannot be replayed or looked up (the real
  values are gone), and a call without a key cannot be replayed or probed by its key: both are
  left to a person at once.

What a service answers may quote anything, secrets included: the result and the evidence go
through the run's masker before they are in a ``Verdict``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import Field

from agentrun._base import FrozenModel
from agentrun._frontier import PendingCall
from agentrun._idempotency import remote_key
from agentrun._redaction import Masker
from agentrun.runner._settlement import Answer, DidNotRun, Probe, Ran, Replay, Unknown
from agentrun.runner._tools import StillInFlightError, Tool

EVIDENCE_LIMIT = 2000
PAUSE_SECONDS = 2.0
"""How long to wait before asking again when the service did not say (no ``Retry-After``)."""
LONGEST_PAUSE_SECONDS = 30.0
"""The longest a ``Retry-After`` is waited: a settler holds the run's lease meanwhile."""

Sleep = Callable[[float], Awaitable[None]]


class Verdict(FrozenModel):
    """What asking the service settled: ``outcome`` None leaves the call to a person."""

    outcome: Literal["ran", "didNotRun"] | None
    result: str | None = None
    """When it ran: the call's result, masked."""
    evidence: str = Field(max_length=EVIDENCE_LIMIT)
    """What was asked and what was answered, masked."""


def _verdict(
    outcome: Literal["ran", "didNotRun"] | None,
    evidence: str,
    masker: Masker,
    result: str | None = None,
) -> Verdict:
    return Verdict(
        outcome=outcome,
        result=None if result is None else masker.outcome(result),
        evidence=masker.text(evidence)[:EVIDENCE_LIMIT],
    )


async def settle_call(
    tool: Tool,
    pending: PendingCall,
    *,
    tenant: str,
    run_id: str,
    masker: Masker,
    sleep: Sleep = asyncio.sleep,
) -> Verdict:
    """Ask the service what became of ``pending`` (a call of ``tool`` left in flight), the way
    ``tool`` declares; ``delay_seconds`` is the caller's to wait, ``attempts`` is kept here.

    Args:
        tool: The call's tool, as the run's agent defines it.
        pending: The call, as the run's frontier names it.
        tenant: The run's tenant.
        run_id: The run's id (the key the service was sent is scoped to the run:
            ``remote_key``).
        masker: The run's masker (the backend's, with the agent's secrets).
        sleep: How to wait between attempts.

    Returns:
        The verdict: ran (with the result), did not run, or left to a person (``outcome``
        None); with the evidence.
    """
    settlement = tool.settlement
    if settlement is None:
        return _verdict(None, f"{tool.name} declares no way to settle its calls", masker)
    if pending.arguments_masked:
        return _verdict(
            None,
            "the call's arguments were masked when its frontier was written; the real values "
            "are gone, so the service cannot be asked about it",
            masker,
        )
    key = pending.idempotency_key
    if key is None and (isinstance(settlement, Replay) or settlement.needs_key):
        return _verdict(
            None, "the call carries no idempotency key, and settling it asks by its key", masker
        )
    sent = None if key is None else remote_key(tenant, run_id, key)
    if isinstance(settlement, Replay):
        return await _replayed(tool, settlement, pending, sent, masker, sleep)
    return await _probed(settlement, pending, sent, masker, sleep)


async def _replayed(
    tool: Tool, replay: Replay, pending: PendingCall, key: str | None, masker: Masker, sleep: Sleep
) -> Verdict:
    sends = replay.sends or f"{tool.name} with the same arguments and idempotency key"
    said: list[str] = []
    for attempt in range(1, replay.attempts + 1):
        try:
            result = await tool.invoke(pending.call.arguments, key=key)
        except StillInFlightError as error:
            said.append(f"still in flight: {error}")
            if attempt < replay.attempts:
                await sleep(_pause(error.retry_after))
            continue
        except Exception as error:  # any answer but the first outcome is not one to act on
            said.append(f"{type(error).__name__}: {error}")
            return _verdict(None, f"replayed {sends}: {'; '.join(said)}", masker)
        said.append(f"it answered {result}")
        return _verdict("ran", f"replayed {sends}: {'; '.join(said)}", masker, result)
    return _verdict(None, f"replayed {sends} {replay.attempts} times: {'; '.join(said)}", masker)


def _pause(retry_after: float | None) -> float:
    return PAUSE_SECONDS if retry_after is None else min(retry_after, LONGEST_PAUSE_SECONDS)


async def _probed(
    probe: Probe, pending: PendingCall, key: str | None, masker: Masker, sleep: Sleep
) -> Verdict:
    said: list[str] = []
    for attempt in range(1, probe.attempts + 1):
        try:
            answer: Answer = await probe.fn(pending.call.arguments, key)
        except Exception as error:  # a probe that fails says nothing about the call
            answer = Unknown(f"the probe failed: {type(error).__name__}: {error}")
        if isinstance(answer, Ran):
            return _verdict("ran", answer.evidence or answer.result, masker, answer.result)
        if isinstance(answer, DidNotRun):
            evidence = answer.evidence or "the probe says the call did not run"
            if probe.did_not_run_is_authoritative:
                return _verdict("didNotRun", evidence, masker)
            return _verdict(
                None,
                f"{evidence} — but the tool does not declare that answer authoritative "
                "(didNotRunIsAuthoritative), and a call that did run would be made twice",
                masker,
            )
        said.append(answer.why)
        if attempt < probe.attempts:
            await sleep(PAUSE_SECONDS)
    return _verdict(None, f"asked {probe.attempts} times: {'; '.join(said)}", masker)
