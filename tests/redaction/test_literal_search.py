"""The literal search finds every occurrence, and every secret it gates stays masked.

``Redactor`` decides which rules to search from where their literals stand (``_Literals``): a
leftmost automaton pass with a SIMD prefilter, then an overlapping search only where it found
one. A literal it misses is a rule never searched and a secret stored in clear. The cases that
machinery could get wrong: a literal overlapping another (the leftmost pass skips it), one at
either end of a message's strings (they are joined by a NUL for one scan), and a keyword of a
case-insensitive rule in mixed case (looked for in the text folded).
"""

from __future__ import annotations

import random

import pytest

from agentrun._messages import Message, TextPart, ToolCall
from agentrun._redaction import MASK, Redactor, _Literals

BUILTIN = Redactor.build()
LITERALS = tuple(sorted({literal for rule in BUILTIN.rules for literal in rule.literals}))


def every_occurrence(literals: tuple[str, ...], text: str) -> set[tuple[int, int]]:
    return {
        (index, at)
        for index, literal in enumerate(literals)
        for at in range(len(text))
        if text.startswith(literal, at)
    }


OVERLAPS = (
    "passphrasecret",  # "passphrase" runs into "secret"
    "x-api-key",
    "_test_v1_",  # stripe's "_test_" into digitalocean's "_v1_"
    "AKIASIAIDA",
    "SK0SK1SKf",
    "ghp_gho_",
    "xoxox",
    "sk-sk-",
    "a@@b",
)


@pytest.mark.parametrize("text", OVERLAPS)
def test_every_occurrence_is_found_where_literals_overlap(text: str) -> None:
    literals = _Literals(LITERALS)
    assert set(literals.found(text)) == every_occurrence(LITERALS, text)


def test_a_literal_hidden_in_a_non_ascii_one_is_found() -> None:
    # The window after a match is as long as the longest literal in bytes, not in characters.
    literals = _Literals(["abc", "c\u00e9\u00e9\u00e9"])
    assert set(literals.found("abc\u00e9\u00e9\u00e9")) == {(0, 0), (1, 2)}


def test_every_occurrence_is_found_in_random_mixes() -> None:
    rng = random.Random(11)
    literals = _Literals(LITERALS)
    pieces = [*LITERALS, *OVERLAPS, *"abcSK-_@ .", "\u212a", "stra\u00dfe", "\ud800", "\U0001f600"]
    for _ in range(5_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 10)))
        assert set(literals.found(text)) == every_occurrence(LITERALS, text), text


@pytest.mark.parametrize(
    ("strings", "secret"),
    [
        (["plain words", "api_key=hunter22"], "hunter22"),  # at the start of the last string
        (["password=hunter22", "plain words"], "hunter22"),  # at the start of the first
        (["plain words secret=", "hunter22"], None),  # a keyword at a string's end: no value
        (["x", "ghp_" + "a" * 36], "ghp_" + "a" * 36),  # the whole last string
        (["sk-" + "a" * 24, "y"], "sk-" + "a" * 24),  # the whole first string
    ],
)
def test_a_literal_at_either_end_of_a_message_strings_is_found(
    strings: list[str], secret: str | None
) -> None:
    message = Message(
        role="assistant",
        parts=tuple(TextPart(text=text) for text in strings[:-1]),
        tool_calls=(ToolCall(id="c1", name="f", arguments={"q": strings[-1]}),),
    )
    masked = BUILTIN.mask_message(message).model_dump_json()
    if secret is None:
        assert masked == message.model_dump_json()  # no rule matched across the NUL either
    else:
        assert secret not in masked
        assert MASK in masked


@pytest.mark.parametrize(
    "text",
    [
        "Api_KeY=hunter22",
        "PassWord: hunter22",
        "DB_PASSWORD=hunter22",
        "x-Api-Key: hunter22",
        "cLiEnT_sEcReT = 'hunter22'",
        "ACCESS-TOKEN=hunter22",
        "Pa\u017f\u017fword=hunter22",  # the long s, which re matches to "s" ignoring case
    ],
)
def test_a_keyword_in_mixed_case_is_found(text: str) -> None:
    masked = BUILTIN.mask(text)
    assert "hunter22" not in masked
    assert masked.endswith(MASK) or masked.endswith(f"{MASK}'")


def test_text_holding_a_lone_surrogate_is_masked() -> None:
    # JSON's "\\ud800" decodes to a lone surrogate, which UTF-8 refuses: the automaton's input
    # is encoded with surrogatepass, and its positions are counted back to characters.
    text = "\ud800 \u00e9 password=hunter22 and ghp_" + "a" * 36
    masked = BUILTIN.mask(text)
    assert masked == f"\ud800 \u00e9 password={MASK} and {MASK}"
