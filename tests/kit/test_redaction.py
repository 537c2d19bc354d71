"""Redaction: every secret shape masked, every benign string untouched, everywhere it persists.

The corpus (``secrets_corpus``) is the contract: a secret that survives is a pattern to fix, and
so is a benign string that changes, because a masked id is a corrupted transcript.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from agentrun._checkpointing import Checkpointer
from agentrun._errors import ConfigurationError
from agentrun._frontier import Boundary, Checkpoint, decode
from agentrun._history import decode_segment
from agentrun._messages import BinaryPart, Message, TextPart, ToolCall
from agentrun._redaction import MASK, Masker, Redactor, Rule
from agentrun._resume import plan_resume
from agentrun.stores._memory import MemoryBackend
from tests.kit.secrets_corpus import BENIGN, SECRETS, Secret
from tests.support.frontiers import RUN, TENANT, frontier, pending

REDACTOR = Redactor.build()

REQUIRED_KINDS = {
    "openai-legacy",
    "openai-project",
    "anthropic",
    "google",
    "stripe-secret",
    "stripe-restricted",
    "stripe-webhook",
    "github-classic",
    "github-oauth",
    "github-fine-grained",
    "gitlab",
    "slack-bot",
    "slack-user",
    "slack-webhook",
    "aws-access-key",
    "aws-session-key",
    "aws-secret",
    "jwt",
    "bearer",
    "basic",
    "postgres-url",
    "pem-rsa",
    "pem-ec",
    "pem-openssh",
    "password-assign",
    "api-key-colon",
    "client-secret-json",
    "huggingface",
    "npm",
    "sendgrid",
}


def _strings(value: Any) -> Iterator[str]:
    """Every string (keys included) anywhere in a decoded JSON document."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _leaks(payload: bytes, secret: str) -> bool:
    """Whether ``secret`` is in the stored bytes, raw or in any decoded string."""
    return secret.encode() in payload or any(secret in s for s in _strings(json.loads(payload)))


def test_the_corpus_is_large_and_covers_the_required_shapes() -> None:
    assert len(SECRETS) >= 40
    assert len(BENIGN) >= 40
    assert {s.kind for s in SECRETS} >= REQUIRED_KINDS
    assert len({s.secret for s in SECRETS}) == len(SECRETS)
    for entry in SECRETS:
        assert entry.secret in entry.text
        assert len(entry.secret) >= 12


@pytest.mark.parametrize("entry", SECRETS, ids=lambda s: s.kind)
def test_every_secret_is_masked(entry: Secret) -> None:
    masked = REDACTOR.mask(entry.text)
    assert entry.secret not in masked
    assert MASK in masked


def test_a_private_key_cut_short_keeps_no_line_of_its_body() -> None:
    entry = next(secret for secret in SECRETS if secret.kind == "pem-cut-short")
    masked = REDACTOR.mask(entry.text)
    assert "-----END" not in entry.text
    assert masked == f"id_rsa (first 300 bytes):\n{MASK}... [truncated]"


@pytest.mark.parametrize("text", BENIGN)
def test_every_benign_string_survives_unchanged(text: str) -> None:
    assert REDACTOR.mask(text) == text


def test_masking_keeps_the_context_around_a_secret() -> None:
    assert REDACTOR.mask("Authorization: Bearer abc123def456ghi789") == (
        f"Authorization: Bearer {MASK}"
    )
    assert REDACTOR.mask("login with password=hunter22 now") == f"login with password={MASK} now"
    assert REDACTOR.mask("postgres://app:s3cretpw@db:5432/x") == f"postgres://{MASK}@db:5432/x"


def test_every_secret_in_one_message_is_masked_at_once() -> None:
    text = "\n".join(entry.text for entry in SECRETS)
    masked = REDACTOR.mask(text)
    for entry in SECRETS:
        assert entry.secret not in masked, entry.kind


def test_benign_strings_survive_inside_one_long_message() -> None:
    text = "\n".join(BENIGN)
    assert REDACTOR.mask(text) == text


def test_nested_tool_arguments_are_masked_and_keep_their_shape() -> None:
    secret = SECRETS[0].secret
    call = ToolCall(
        id="c1",
        name="deploy",
        arguments={
            "env": [{"name": "OPENAI", "value": {"raw": f"key {secret}", "n": 3}}, 7, None],
            "plain": "nothing here",
            "flag": True,
        },
    )
    masked = REDACTOR.mask_call(call)
    assert secret not in masked.model_dump_json()
    assert masked.arguments == {
        "env": [{"name": "OPENAI", "value": {"raw": f"key {MASK}", "n": 3}}, 7, None],
        "plain": "nothing here",
        "flag": True,
    }
    untouched = ToolCall(id="c2", name="search", arguments={"q": ["flights", {"to": "LIS"}]})
    assert REDACTOR.mask_call(untouched) is untouched


def test_binary_parts_are_left_alone() -> None:
    raw = SECRETS[0].text.encode()
    message = Message(
        role="user",
        parts=(TextPart(text=SECRETS[1].text), BinaryPart(media_type="text/plain", data=raw)),
    )
    masked = REDACTOR.mask_message(message)
    text, binary = masked.parts
    assert isinstance(text, TextPart)
    assert isinstance(binary, BinaryPart)
    assert SECRETS[1].secret not in text.text
    assert binary.data == raw


def test_extra_patterns_add_to_the_builtins() -> None:
    redactor = Redactor.build([r"EMP-\d+", r"(?P<secret>\d{3})-CASE"])
    masked = redactor.mask(f"employee EMP-4411 with case 123-CASE and {SECRETS[0].text}")
    assert "EMP-4411" not in masked
    assert f"{MASK}-CASE" in masked  # only the named group is replaced
    assert SECRETS[0].secret not in masked
    assert Redactor.build().mask("EMP-4411") == "EMP-4411"


def test_a_literal_holding_a_nul_is_refused_by_name() -> None:
    # The strings of a message are looked for literals joined by a NUL (Redactor._leaves_alone).
    with pytest.raises(ConfigurationError, match="NUL"):
        Redactor((Rule(re.compile("a\0b"), ("a\0b",)),))


def test_a_secret_in_any_one_string_of_a_message_is_masked() -> None:
    # One scan of the message's strings joined decides whether any is masked at all.
    secret = SECRETS[0].secret
    call = ToolCall(id="c1", name="f", arguments={"a": "x", "b": ["y", {"c": f"use {secret}"}]})
    message = Message(
        role="assistant", parts=(TextPart(text="plain"), TextPart(text="words")), tool_calls=(call,)
    )
    masked = REDACTOR.mask_message(message)
    assert secret not in masked.model_dump_json()
    assert masked.parts == message.parts
    plain = Message(
        role="assistant",
        parts=(TextPart(text="s"),),
        tool_calls=(ToolCall(id="c2", name="f", arguments={"k": "k-" + "a" * 30}),),
    )
    assert REDACTOR.mask_message(plain) is plain  # "s" and "k-..." are two strings, not "sk-..."


def test_an_invalid_extra_pattern_names_its_index() -> None:
    with pytest.raises(ConfigurationError, match=r"extra_patterns\[1\]"):
        Redactor.build([r"fine\d+", r"(unclosed"])
    with pytest.raises(ConfigurationError, match=r"extra_patterns\[0\]"):
        Checkpointer(MemoryBackend().checkpoints, extra_patterns=["[z-a]"])


def _leaky_frontier(**fields: Any) -> Any:
    texts = [entry.text for entry in SECRETS]
    return frontier(
        boundary=Boundary.AFTER_MODEL_CALL,
        messages=(
            Message.of("user", texts[0]),
            Message(
                role="assistant",
                parts=(TextPart(text=texts[1]),),
                tool_calls=(
                    ToolCall(
                        id="c1", name="configure", arguments={"deep": [{"x": {"y": texts[2:20]}}]}
                    ),
                ),
            ),
        ),
        pending=(
            pending("c1", name="configure", arguments={"deep": [{"x": {"y": texts[2:20]}}]}),
            pending("c2", name="search", arguments={"q": "flights to Lisbon", "n": 3}),
        ),
        metadata={"notes": texts[20:40], "more": {"inner": [texts[40:]]}},
        **fields,
    )


async def test_the_checkpointer_stores_no_secret(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints)
    receipt = await checkpointer.write(_leaky_frontier())
    assert receipt is not None, checkpointer.last_error
    payload = await backend.checkpoints.latest(TENANT, RUN)
    assert payload is not None
    for entry in SECRETS:
        assert not _leaks(payload, entry.secret), entry.kind
    stored = decode(payload)
    assert stored.pending[1].call.arguments == {"q": "flights to Lisbon", "n": 3}


async def test_redact_false_stores_the_text_as_given(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, redact=False)
    assert await checkpointer.write(_leaky_frontier()) is not None
    payload = await backend.checkpoints.latest(TENANT, RUN)
    assert payload is not None
    assert all(_leaks(payload, entry.secret) for entry in SECRETS)
    assert not decode(payload).pending[0].arguments_masked


async def test_the_checkpointer_applies_extra_patterns(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, extra_patterns=(r"EMP-\d+",))
    await checkpointer.write(
        frontier(messages=(Message.of("user", "I am EMP-9912"),), metadata={"who": "EMP-9912"})
    )
    payload = await backend.checkpoints.latest(TENANT, RUN)
    assert payload is not None
    assert b"EMP-9912" not in payload


async def test_history_segments_hold_no_secret(backend: MemoryBackend) -> None:
    checkpointer = Checkpointer(backend.checkpoints, history=backend.history)
    await checkpointer.write(_leaky_frontier())
    checkpoint = await checkpointer.latest(TENANT, RUN)
    assert checkpoint is not None
    assert checkpoint.history_handle is not None
    stored = await backend.history.fetch(TENANT, RUN, checkpoint.history_handle)
    _, segment = decode_segment(RUN, checkpoint.history_handle, stored)
    for entry in SECRETS:
        assert not _leaks(segment, entry.secret), entry.kind


async def _leaky_frontier_as_stored(backend: MemoryBackend) -> Checkpoint:
    checkpointer = Checkpointer(backend.checkpoints)
    await checkpointer.write(_leaky_frontier())
    stored = await checkpointer.latest(TENANT, RUN)
    assert stored is not None
    return stored


async def test_a_masked_pending_call_is_marked_and_withheld_on_resume(
    backend: MemoryBackend,
) -> None:
    stored = await _leaky_frontier_as_stored(backend)
    masked, clean = stored.pending
    assert masked.arguments_masked
    assert not clean.arguments_masked
    plan = await plan_resume(stored, backend.idempotency)
    assert plan.withheld == (masked,)
    assert plan.to_dispatch == (clean,)
    assert plan.safe


async def test_a_masked_call_that_completed_is_replayed_not_withheld(
    backend: MemoryBackend,
) -> None:
    stored = await _leaky_frontier_as_stored(backend)
    key = "idem:v1:configured"
    masked = stored.pending[0].model_copy(update={"idempotency_key": key})
    stored = stored.model_copy(update={"pending": (masked,)})
    await backend.idempotency.begin(TENANT, RUN, key, holder="w1", fence=0)
    await backend.idempotency.record(TENANT, RUN, key, '{"ok": true}', holder="w1", fence=0)
    plan = await plan_resume(stored, backend.idempotency)
    assert plan.withheld == ()
    assert [d.outcome for d in plan.completed] == ['{"ok": true}']


def test_an_outcome_is_masked_as_its_tool_message_is() -> None:
    masker = Masker.build()
    for secret in SECRETS:
        outcome = f"done: {secret.text}"
        assert masker.outcome(outcome) == masker.text(outcome)
        assert secret.secret not in masker.outcome(outcome), secret.kind


def test_a_json_outcome_stays_the_same_document_with_every_string_masked() -> None:
    masker = Masker.build()
    password = "hunter2-" + "x" * 12
    # Beside its key, as JSON text: only the text shows what the value is.
    keyed = json.dumps({"password": password, "seat": "12A"})
    # Inside a string, quoted and escaped: only the string shows it.
    escaped = json.dumps({"approved": False, "reason": f'use password="{password}"'})
    for document in (keyed, escaped):
        masked = masker.outcome(document)
        assert password not in masked, document
        assert json.loads(masked).keys() == json.loads(document).keys()
    # A credential pattern that runs across quotes in the text would eat a field: the text's
    # masking is dropped, and each string is masked on its own.
    across = '{"url":"ftp://u:","note":"p@host","key":"' + SECRETS[0].text + '"}'
    masked = json.loads(masker.outcome(across))
    assert masked.keys() == {"url", "note", "key"}
    assert SECRETS[0].secret not in masked["key"]
    assert json.loads(masker.outcome(keyed))["seat"] == "12A"
    assert masker.outcome('{"seat": "12A"}') == '{"seat": "12A"}'  # nothing to mask: as it came


def test_no_masking_keeps_outcomes_as_they_are() -> None:
    secret = SECRETS[0].text
    assert Masker.build(redact=False).outcome(secret) == secret
