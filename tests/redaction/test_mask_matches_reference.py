"""``Redactor.mask`` masks exactly what substituting every pattern everywhere masks.

``mask`` searches a pattern only in text holding one of its literals, finds the literals of all
the rules in one scan per leading character, and looks for them again after a substitution. Any
mistake in that machinery is a difference from the reference here: every rule's pattern
substituted in order, with no prefilter at all. The texts are the kit's redaction corpus, a secret
made for each literal the corpus lacks, and seeded random concatenations and cuts of them; small
hand-made rules cover literals that share a start, overlap, or appear only after a substitution.
Each literal is also dropped from the prefilter in turn, to show the comparison would notice.
"""

from __future__ import annotations

import random
import re

import pytest

from agentrun._redaction import MASK, Redactor, Rule
from tests.kit.secrets_corpus import BENIGN, SECRETS

BUILTIN = Redactor.build()


def reference_mask(rules: tuple[Rule, ...], text: str) -> str:
    for rule in rules:
        text = rule.pattern.sub(_reference_replace, text)
    return text


def _reference_replace(match: re.Match[str]) -> str:
    if "secret" not in match.re.groupindex:
        return MASK
    whole = match.group(0)
    start = match.start()
    return whole[: match.start("secret") - start] + MASK + whole[match.end("secret") - start :]


def _made_for_every_literal() -> dict[str, str]:
    """For each built-in literal, a match of its rule holding it.

    The corpus has no secret for some literals (``ghu_``, ``AROA``, ``passphrase``, ...); one is
    made by swapping another of the rule's literals, in a corpus match, for the missing one.
    """
    corpus = [*(secret.text for secret in SECRETS), *BENIGN]
    made: dict[str, str] = {}
    for rule in BUILTIN.rules:
        found = [match.group(0) for text in corpus for match in rule.pattern.finditer(text)]
        for literal in rule.literals:
            candidates = (
                match.replace(other, literal, 1)
                for match in found
                for other in rule.literals
                if other in match
            )
            for candidate in candidates:
                hit = rule.pattern.search(candidate)
                if hit is not None and literal in hit.group(0):
                    made[literal] = candidate
                    break
    return made


MADE = _made_for_every_literal()
TEXTS = tuple(
    variant
    for text in (*(secret.text for secret in SECRETS), *BENIGN, *MADE.values())
    for variant in (text, text.upper(), text.swapcase())
)
LITERALS = tuple(literal for rule in BUILTIN.rules for literal in rule.literals)


def test_a_secret_holds_each_builtin_literal() -> None:
    assert set(MADE) == set(LITERALS)


def test_mask_is_the_reference_on_the_corpus() -> None:
    for text in TEXTS:
        assert BUILTIN.mask(text) == reference_mask(BUILTIN.rules, text), text


def test_mask_is_the_reference_on_random_mixes_and_cuts() -> None:
    rng = random.Random(20240611)
    pieces = [
        *TEXTS,
        *LITERALS,
        *(literal.upper() for literal in LITERALS),
        *" \n=:@_-.\"'",
        "\u017fecret=hunter22",
        "API_\u212aEY: abcdef",
        "AP\u0130_KEY=abcdef",
        "PR\u0131VATE-KEY: abcdef",
        MASK,
    ]
    for _ in range(3_000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(1, 8)))
        if rng.random() < 0.5:
            start = rng.randrange(len(text) + 1)
            text = text[start : rng.randrange(start, len(text) + 1)]
        assert BUILTIN.mask(text) == reference_mask(BUILTIN.rules, text), text


@pytest.mark.parametrize("literal", LITERALS)
def test_the_comparison_notices_a_literal_dropped_from_the_prefilter(literal: str) -> None:
    def without(literals: tuple[str, ...]) -> tuple[str, ...]:
        return tuple("\1" if other == literal else other for other in literals)

    dropped = Redactor(tuple(Rule(rule.pattern, without(rule.literals)) for rule in BUILTIN.rules))
    assert any(dropped.mask(text) != reference_mask(BUILTIN.rules, text) for text in TEXTS)


# Literals that start alike ("ab" a prefix of "abc", and shared by two rules), that overlap
# ("_t_v1_"), that only casefolding finds ("\u212aey"), that none gate (an empty literal, none
# at all), and one, "act", that only a substitution creates: the mask says "[REDACTED]".
HANDMADE = Redactor(
    (
        Rule(re.compile(r"abc(?P<secret>\d)"), ("abc",)),
        Rule(re.compile(r"(?P<secret>ab)"), ("ab",)),
        Rule(re.compile(r"(?P<secret>b)c"), ("bc", "ab")),
        Rule(re.compile(r"(?i)k(?P<secret>e)y"), ("key",)),
        Rule(re.compile(r"_t_(?P<secret>v)"), ("_t_",)),
        Rule(re.compile(r"_v(?P<secret>1)_"), ("_v1_",)),
        Rule(re.compile(r"(?P<secret>zz)"), ("",)),
        Rule(re.compile(r"q(?P<secret>q)")),
        Rule(re.compile(r"(?i)(?P<secret>act)"), ("act",)),
    )
)


def test_mask_is_the_reference_for_literals_that_start_alike_overlap_or_appear_later() -> None:
    rng = random.Random(7)
    alphabet = [*"abc_tv1kKeyEYzq0 ", "\u212a", "_t_v1_", "abc1", "key", "act"]
    for _ in range(20_000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
        assert HANDMADE.mask(text) == reference_mask(HANDMADE.rules, text), text
    assert HANDMADE.mask("ab") == "[RED[REDACTED]ED]"


WINDOW_EDGES = (
    "db_password=one;DB_PASSWORD=two&x=3",
    "a_b_c_d_e_f_password = 'hunter22' then secret: s3cr3tvalue",
    "passwordpassword=abc passphrase=def password=pwd=ghi",
    "foo-x-api-key: 12345 and api_key=678910, client_secret=abcdef",
    "q" * 300 + "_secret=abcdef and more" + "_" * 50 + "pwd=xyz",
    "\u017fecret=abc SECRET=def Secret = 'ghi' seCret=\"jkl\"",
    "secret secret secret= a secret=bbb",
    '{"password": "x", "api_key":"yyyy", "note": "secretary: no"}',
    "token=abc; a-password-b=cdef; password_hint=ghij",
    "acce\u017f\u017f_token=abc pr\u0131vate_key=def PASSWORD=ghi",
    "\u0130stanbul then password=abc and \u0130 api_key=def",
    "\u212a\u212a_secret=abc stra\u00dfe_pwd=def",
)


@pytest.mark.parametrize("text", WINDOW_EDGES)
def test_the_windowed_assignment_rule_matches_the_reference(text: str) -> None:
    # Where a window could go wrong: a prefix run reaching back, several keywords in one run,
    # one match holding the next keyword, keywords in case forms ``fold`` folds.
    rule = next(rule for rule in BUILTIN.rules if rule.windowed)
    assert rule.subn(_reference_replace, text) == rule.pattern.subn(_reference_replace, text)
    assert BUILTIN.mask(text) == reference_mask(BUILTIN.rules, text)


def test_the_windowed_rule_is_searched_only_near_its_literals() -> None:
    # A pattern that would match anywhere, windowed on a literal: only matches reaching the
    # literal across letters, digits, ``_`` and ``-`` are made; that is what WINDOWED requires.
    rule = Rule(re.compile(r"\b[a-z_]*key=\w+"), ("key",), windowed=True)
    assert rule.subn(lambda _: MASK, "a_key=1 b c_key=2 ok") == (f"{MASK} b {MASK} ok", 2)
    assert rule.subn(lambda _: MASK, "nothing here") == ("nothing here", 0)
