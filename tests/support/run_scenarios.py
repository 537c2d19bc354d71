"""Whole runs against a real store: the kit's promises that only show across a run, a crash and
a resume, exercised once per store (memory, SQLite, Redis, PostgreSQL).

``RunScenarios`` is subclassed in each store's test folder with a ``stores`` fixture yielding the
five stores of a fresh backend. A crash is a ``Crash`` raised where the process would have died
(see ``tests.runner.helpers``); what the next worker finds is what the stores kept.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator

import pytest

from agentrun import Backend
from agentrun._backend import StoreSet
from agentrun._decisions import approval_request_id, decide, resolve
from agentrun._errors import IndeterminateToolCallError
from agentrun._frontier import Boundary
from agentrun._resume import plan_resume
from agentrun.runner._providers.openai import OpenAIChatProvider
from agentrun.runner._results import RunStatus
from tests.kit.secrets_corpus import SECRETS
from tests.kit.stores import LosingCheckpointStore
from tests.runner.helpers import (
    Boundaries,
    Crash,
    Probe,
    agent,
    runner,
    script,
    tool_results,
)
from tests.runner.wire import chat_reply, endpoint

NOTE_THEN_SMS = ([("note", {"item": "a"})], [("send_sms", {"item": "hi"})], "done")

SECRET = {
    secret.kind: secret
    for secret in SECRETS
    if secret.kind
    in {
        "github-classic",
        "openai-project",
        "anthropic",
        "aws-access-key",
        "jwt-bare",
        "pem-rsa",
        "slack-bot",
        "stripe-secret",
        "password-env",
        "postgres-url",
        "google",
        "bearer",
    }
}
"""Secrets of several kinds, each put somewhere else in a run (see the test that uses them)."""


def _parsed(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def texts_in(kept: Iterable[str | bytes]) -> Iterator[str]:
    """Every text in ``kept`` as stored, and every string inside each one that is JSON (to any
    depth: an outcome that is a JSON document inside a record that is one), so that a secret
    escaped by an encoder (a PEM key's newlines, a slash) is still found."""

    def inside(value: object) -> Iterator[str]:
        if isinstance(value, str):
            yield value
            if value[:1] in ("{", "[", '"'):
                yield from inside(_parsed(value))
        elif isinstance(value, dict):
            for key, item in value.items():
                yield from inside(key)
                yield from inside(item)
        elif isinstance(value, list):
            for item in value:
                yield from inside(item)

    for item in kept:
        yield from inside(item.decode("utf-8", "replace") if isinstance(item, bytes) else item)


def _losing_turn(stores: Backend, turn: int) -> tuple[Backend, LosingCheckpointStore]:
    """The stores, but every frontier written at iteration ``turn`` is lost."""
    losing = LosingCheckpointStore(stores.checkpoints, lambda c: c.iteration == turn)
    return (
        StoreSet(
            checkpoints=losing,
            leases=stores.leases,
            idempotency=stores.idempotency,
            history=stores.history,
            ledger=stores.ledger,
            quotas=stores.quotas,
            url=stores.url,
        ),
        losing,
    )


class RunScenarios:
    async def kept(self, stores: Backend, tenant: str) -> list[str | bytes]:
        """Everything the stores keep for ``tenant``: every key, field and value, as stored."""
        raise NotImplementedError

    async def test_nothing_secret_is_kept_from_a_run_full_of_secrets(
        self, stores: Backend, tenant: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Secrets in the input, in the model's replies, in tool arguments and results, in an
        approval's reason and in a person's answer; afterwards, every table, key and row the
        stores keep for the run, and the log, hold none of them."""
        caplog.set_level(logging.DEBUG)
        backend = stores

        async def fails(item: str) -> None:
            if item.endswith("first try"):
                raise RuntimeError(f"gateway timed out sending {item}")

        probes = {
            "lookup": Probe("lookup"),
            "charge": Probe("charge"),
            "sms": Probe("sms"),
            "refund": Probe("refund"),
            "flaky": Probe("flaky", during=fails),
        }
        defined = agent(
            probes["lookup"].tool(read_only=True),
            probes["charge"].tool(key_arguments=("item",)),
            probes["sms"].tool(),
            probes["refund"].tool(requires_approval=True),
            probes["flaky"].tool(),
        )
        turns = script(
            [
                ("lookup", {"item": SECRET["github-classic"].text}),
                ("charge", {"item": SECRET["stripe-secret"].text}),
                ("sms", {"item": SECRET["slack-bot"].text}),
            ],
            [("refund", {"item": "order-7"})],
            [("flaky", {"item": f"{SECRET['pem-rsa'].text} first try"})],
            f"all done; your new key is {SECRET['openai-project'].text}",
        )
        # The model's text of every turn but the last is "turn N"; make one carry a secret.
        replies = list(turns.script)
        replies[0] = replies[0].model_copy(update={"text": SECRET["jwt-bare"].text})
        turns.script = tuple(replies)
        first = runner(backend, turns, history=True)
        stopped = await first.run(
            defined, f"use {SECRET['aws-access-key'].text}", tenant=tenant, run_id="r"
        )
        assert stopped.status is RunStatus.AWAITING_APPROVAL
        request = approval_request_id(tenant, "r", "c1_0")
        reason = f"fine, and the refund API takes {SECRET['password-env'].text}"
        await decide(
            backend.idempotency, tenant, "r", request, approved=True, by="al", reason=reason
        )

        second = runner(backend, turns, holder="worker-b", history=True)
        with pytest.raises(IndeterminateToolCallError):
            await second.resume(defined, "r", tenant=tenant)
        checkpoint = await second.checkpoints.latest(tenant, "r")
        assert checkpoint is not None
        answer = f"it went out; the gateway said {SECRET['postgres-url'].text}"
        assert await resolve(
            backend.idempotency,
            checkpoint,
            "c2_0",
            ran=True,
            result=answer,
            by="bob",
            history=backend.history,
        )
        third = runner(backend, turns, holder="worker-c", history=True)
        done = await third.resume(defined, "r", tenant=tenant)
        assert done.status is RunStatus.COMPLETED
        assert probes["refund"].calls == ["order-7"]
        assert len(probes["flaky"].calls) == 1

        texts = list(texts_in(await self.kept(stores, tenant)))
        assert texts, "the stores keep nothing for the run: the dump is broken"
        assert any("[REDACTED]" in text for text in texts)
        texts.append(caplog.text)
        for kind, secret in SECRET.items():
            found = [text[:200] for text in texts if secret.secret in text]
            assert not found, f"the {kind} secret is kept in clear text: {found}"

    @pytest.mark.parametrize("died", ["in_flight", "completed"])
    async def test_a_call_no_frontier_names_is_refused_until_a_person_answers(
        self, stores: Backend, tenant: str, died: str
    ) -> None:
        """The frontiers of the turn that sent a text were lost, and the worker died (during
        the send, or after it was recorded). The newest frontier the next worker finds is the
        turn before: it names no text. Carrying on from it would ask the model that turn again
        and go on as if no text had been sent (or send it again)."""

        async def die(item: str) -> None:
            raise Crash("killed while the text was being sent")

        sms = Probe("send_sms", during=die if died == "in_flight" else None)
        defined = agent(Probe("note").tool(read_only=True), sms.tool())
        lossy, losing = _losing_turn(stores, 2)
        crash = Boundaries(crash_at=(Boundary.AFTER_TOOL_RESULT, 2))
        with pytest.raises(Crash):
            await runner(lossy, script(*NOTE_THEN_SMS), boundaries=crash).run(
                defined, "go", tenant=tenant, run_id="r"
            )
        assert sms.calls == ["hi"]
        assert [c.boundary for c in losing.dropped][:1] == [Boundary.AFTER_MODEL_CALL]

        # The model, asked the second turn again, would say it is done.
        second = runner(stores, script(NOTE_THEN_SMS[0], "done"), holder="worker-b")
        with pytest.raises(IndeterminateToolCallError) as caught:
            await second.resume(defined, "r", tenant=tenant)
        assert caught.value.unnamed == (("c1_0", "send_sms"),)
        assert "c1_0" in str(caught.value)
        checkpoint = await second.checkpoints.latest(tenant, "r")
        assert checkpoint is not None
        assert checkpoint.iteration == 1
        plan = await plan_resume(checkpoint, stores.idempotency)
        assert [(r.call_id, r.tool) for r in plan.unaccounted] == [("c1_0", "send_sms")]
        assert not plan.safe

        # A person checked the gateway: it was sent. The run carries on without sending it again.
        assert await resolve(
            stores.idempotency, checkpoint, "c1_0", ran=True, result="sent", by="alice"
        )
        plan = await plan_resume(checkpoint, stores.idempotency)
        assert plan.safe
        third = runner(stores, script(NOTE_THEN_SMS[0], "done"), holder="worker-c")
        result = await third.resume(defined, "r", tenant=tenant)
        assert result.status is RunStatus.COMPLETED
        assert sms.calls == ["hi"]

    @pytest.mark.parametrize("crash", [None, "after_model_call", "during_send"])
    @pytest.mark.parametrize("reused", ["call_0", ""], ids=["numbered-per-reply", "empty"])
    async def test_a_call_id_a_later_turn_reuses_is_a_new_call(
        self, stores: Backend, tenant: str, reused: str, crash: str | None
    ) -> None:
        """A server that numbers calls per reply (or sends no id at all) gives the second turn's
        text the first one's id. It is another call: it is sent, and the model is never told it
        ran when it did not; after a crash too."""

        async def die(item: str) -> None:
            if crash == "during_send" and item == "second":
                raise Crash("killed while the second text was being sent")

        sms = Probe("send_sms", during=die)
        defined = agent(sms.tool())
        killed_after = Boundaries(crash_at=(Boundary.AFTER_MODEL_CALL, 2))
        with endpoint() as server:
            for item in ("first", "second"):
                server.answer(200, chat_reply(calls=[(reused, "send_sms", {"item": item})]))
            server.answer(200, chat_reply("both sent"))
            first = runner(
                stores,
                OpenAIChatProvider(server.url),
                boundaries=killed_after if crash == "after_model_call" else None,
            )
            if crash is None:
                result = await first.run(defined, "text twice", tenant=tenant, run_id="r")
            else:
                with pytest.raises(Crash):
                    await first.run(defined, "text twice", tenant=tenant, run_id="r")
                second = runner(stores, OpenAIChatProvider(server.url), holder="worker-b")
                if crash == "during_send":
                    with pytest.raises(IndeterminateToolCallError) as caught:
                        await second.resume(defined, "r", tenant=tenant)
                    checkpoint = await second.checkpoints.latest(tenant, "r")
                    assert checkpoint is not None
                    (held,) = checkpoint.pending
                    assert held.call.arguments == {"item": "second"}
                    assert caught.value.calls == ((held.call.id, "send_sms"),)
                    assert sms.calls == ["first", "second"]
                    return
                result = await second.resume(defined, "r", tenant=tenant)
        assert result.status is RunStatus.COMPLETED
        assert sms.calls == ["first", "second"]
        ids = [call.id for message in result.messages for call in message.tool_calls]
        assert len(ids) == len(set(ids)) == 2
        assert tool_results(result.messages) == {
            ids[0]: "send_sms did first",
            ids[1]: "send_sms did second",
        }
        # the model is shown each result answering its own call
        shown = server.received[-1].json()["messages"]
        answered = [m["tool_call_id"] for m in shown if m["role"] == "tool"]
        asked = [c["id"] for m in shown if m["role"] == "assistant" for c in m["tool_calls"]]
        assert answered == asked == ids
