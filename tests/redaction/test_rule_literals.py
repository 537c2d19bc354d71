"""The literals that gate each built-in redaction pattern must never hide a match.

``Redactor.mask`` searches a built-in pattern only in text holding one of its literals. A literal
that some match lacks would let that secret through unmasked, silently, so these tests check the
literals against the pattern itself: every match found in the kit's secret and benign corpus (and
its case-swapped forms) contains one; a redactor without the gates masks a seeded mix of that
corpus exactly as the gated one does; and folding (``fold``), which the case-insensitive
pattern's gate relies on, maps every character ``re`` matches to one of its letters onto that
letter.
"""

from __future__ import annotations

import random
import re
import sys

import pytest

from agentrun._redaction import BUILTIN_PATTERNS, Redactor, Rule, fold
from tests.kit.secrets_corpus import BENIGN, SECRETS

TEXTS = tuple(
    variant
    for text in (*(secret.text for secret in SECRETS), *BENIGN)
    for variant in (text, text.upper(), text.swapcase())
)
GATED = Redactor.build()


def test_every_builtin_pattern_has_literals() -> None:
    assert all(literals for _, _, literals in BUILTIN_PATTERNS)
    assert all(rule.literals for rule in GATED.rules)


@pytest.mark.parametrize(
    ("name", "rule"), [(p[0], r) for p, r in zip(BUILTIN_PATTERNS, GATED.rules, strict=True)]
)
def test_every_match_in_the_corpus_holds_one_of_the_literals(name: str, rule: Rule) -> None:
    matched = 0
    for text in TEXTS:
        for match in rule.pattern.finditer(text):
            matched += 1
            found = fold(match.group(0)) if rule.ignores_case else match.group(0)
            assert any(literal in found for literal in rule.literals), (name, match.group(0))
    assert matched, f"the corpus has no match of {name}: the check above proved nothing"


def test_the_gates_change_no_output() -> None:
    ungated = Redactor(tuple(Rule(rule.pattern) for rule in GATED.rules))
    rng = random.Random(20240315)
    pieces = [*TEXTS, " ", "\n", "=", ": ", "\u017fecret=hunter22", "API_\u212aEY: abcdef"]
    for _ in range(2_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6)))
        assert GATED.mask(text) == ungated.mask(text), text


def test_folding_maps_what_re_matches_ignoring_case_onto_the_letter() -> None:
    letters = {
        letter
        for rule in GATED.rules
        if rule.ignores_case
        for literal in rule.literals
        for letter in literal
    }
    assert all(letter == letter.casefold() for letter in letters)
    any_letter = re.compile(f"[{''.join(sorted(letters))}]", re.IGNORECASE)
    for point in range(sys.maxunicode + 1):
        character = chr(point)
        if any_letter.fullmatch(character):
            folded = fold(character)
            assert folded in letters, hex(point)
            assert re.fullmatch(folded, character, re.IGNORECASE), hex(point)


@pytest.mark.parametrize("i", ["\u0130", "\u0131"], ids=["dotted capital I", "dotless i"])
def test_a_keyword_spelled_with_an_i_casefolding_misses_is_still_masked(i: str) -> None:
    text = f"AP{i}_KEY=hunter2hunter2"
    assert "api_key" not in text.casefold()
    assert GATED.mask(text) == f"AP{i}_KEY=[REDACTED]"
