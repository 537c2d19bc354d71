"""Secrets masked by value (``SecretValues``): what a run's ``Masker`` adds to its patterns.

A value is masked as it is and as JSON writes it inside a string, in every place the redactor
masks (a message's text, a tool call's arguments, an outcome that is a JSON document); values
whose occurrences overlap are masked as one; a value too short to mask is refused rather than
taking ordinary text out with it; and a masker knows only the values it was given.
"""

from __future__ import annotations

import json

from agentrun._messages import Message, ToolCall
from agentrun._redaction import MASK, SHORTEST_SECRET, Masker, SecretValues

VALUE = 'pass"word\\with-quote-4471'
"""No pattern knows its shape; a quote and a backslash, which JSON escapes."""


def _masker(*values: str) -> Masker:
    secrets = SecretValues()
    for value in values:
        assert secrets.add(value)
    return Masker.build().with_secrets(secrets)


def test_a_value_is_masked_as_it_is_and_as_json_writes_it() -> None:
    masker = _masker(VALUE, "naïve-token-0042")
    assert masker.text(f"said {VALUE}.") == f"said {MASK}."
    assert masker.text(json.dumps({"said": VALUE})) == json.dumps({"said": MASK})
    assert masker.text(json.dumps("naïve-token-0042")) == json.dumps(MASK)
    assert masker.text(json.dumps("naïve-token-0042", ensure_ascii=False)) == json.dumps(MASK)
    assert json.loads(masker.outcome(json.dumps({"a": [VALUE]}))) == {"a": [MASK]}


def test_a_message_and_its_calls_are_masked_of_the_values() -> None:
    masker = _masker(VALUE)
    assert masker.redactor is not None
    call = ToolCall(id="c1", name="note", arguments={"text": f"key {VALUE}", "n": [VALUE]})
    message = Message.of("assistant", f"I hold {VALUE}").model_copy(update={"tool_calls": (call,)})
    masked = masker.redactor.mask_message(message)
    assert masked.text == f"I hold {MASK}"
    assert masked.tool_calls[0].arguments == {"text": f"key {MASK}", "n": [MASK]}


def test_overlapping_values_are_one_mask_and_the_patterns_still_apply() -> None:
    masker = _masker("abcd-1111", "1111-wxyz")
    assert masker.text("x abcd-1111-wxyz y") == f"x {MASK} y"
    assert masker.text("abcd-1111 and Bearer ghp_" + "a" * 36) == f"{MASK} and Bearer {MASK}"


def test_a_value_too_short_to_mask_is_refused() -> None:
    secrets = SecretValues()
    assert not secrets.add("a" * (SHORTEST_SECRET - 1))
    assert not secrets
    masker = Masker.build().with_secrets(secrets)
    assert masker.text("a banana") == "a banana"


def test_a_masker_knows_only_the_values_it_was_given() -> None:
    base = Masker.build()
    mine = _masker(VALUE)
    assert mine.text(VALUE) == MASK
    assert base.text(VALUE) == VALUE
    assert _masker("other-agent-value-99").text(VALUE) == VALUE


def test_a_value_added_later_is_masked_from_then_on() -> None:
    secrets = SecretValues()
    masker = Masker.build().with_secrets(secrets)
    assert masker.text("rotated-value-0815") == "rotated-value-0815"
    secrets.add("rotated-value-0815")
    assert masker.text("rotated-value-0815") == MASK
    assert Masker.build(redact=False).with_secrets(secrets).text("rotated-value-0815") != MASK
