"""Masking secrets out of everything the kit persists, before anything is sized or stored.

A run's conversation is the likeliest place in the kit for an API key a user pasted or a bearer
token a tool was handed, and a checkpoint is durable. The ``Checkpointer`` masks before it sizes,
so the redaction happens once and every store inherits it, including one a consumer writes.

The frontier is not the only thing written. A tool's outcome is recorded in the idempotency
store, a person's answer and an approval's reason too, and the operator writes error texts and
a run's final answer into the AgentRun's status, its events and its log. ``Masker`` is the one
object all of them mask with, built once from the run's settings (``extra_patterns``,
``redact``): the backend wraps its idempotency store with it (``Backend``), the ``Checkpointer``
and the runner take it from there, and the operator's status writer, events and log handlers use
the backend's. A writer added later goes through one of those, not through a call of its own.

What is masked: the text of every message, every string nested anywhere in tool-call arguments
(in the conversation and in the pending calls), and every string in the checkpoint's metadata;
by pattern, and, in a run of a declared agent, by the value of every secret its requests read
(``SecretValues``, ``Masker.with_secrets``): a token of no known shape is recognised only so.
What is not: identities the kit keys on (run id, tenant, agent, call ids), and binary parts —
masking bytes produces a payload that is neither the original nor honestly empty.

Each pattern has one group, ``secret``, which is what gets replaced; the text around it
(``Bearer ``, ``password=``, the scheme of a URL) survives, so the masked transcript still reads
sensibly.
"""

from __future__ import annotations

import copy
import json
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import cast

import ahocorasick_rs
from pydantic import JsonValue

from agentrun._errors import ConfigurationError
from agentrun._messages import Message, TextPart, ToolCall

MASK = "[REDACTED]"

SHORTEST_SECRET = 4
"""The fewest characters a secret's value must have to be masked wherever it appears. Masked
by value, a shorter one would take out ordinary text with it (every ``a`` of a transcript, for
a one-character password); it is left to the patterns, and the documentation says to use longer
secrets (docs/providers.md)."""


class SecretValues:
    """The values of the secrets read for an agent's requests, masked wherever they appear.

    A pattern recognises a key by its shape; a password or a token of no known shape that a
    service or the model repeats is recognised only by its value. This is where the values go
    as they are read (``agentrun.runner._secrets``): each as it is and as JSON writes it inside
    a string (a quote or a backslash escaped, or any character but ASCII), since a tool's or a
    model's JSON carries it that way. A ``Redactor`` masks them before its patterns, so every
    writer that masks with the run's ``Masker`` masks them too (``Masker.with_secrets``).

    Values are only ever added: a value read before a rotation may still be in what is written
    after it.
    """

    def __init__(self) -> None:
        self._values: set[str] = set()

    def __repr__(self) -> str:
        return f"SecretValues({len(self._values)} forms)"

    def __bool__(self) -> bool:
        return bool(self._values)

    def add(self, value: str) -> bool:
        """Mask ``value`` from now on; False when it is too short to be (``SHORTEST_SECRET``)."""
        if len(value) < SHORTEST_SECRET:
            return False
        forms = {value, json.dumps(value)[1:-1], json.dumps(value, ensure_ascii=False)[1:-1]}
        self._values |= forms
        return True

    def within(self, text: str) -> bool:
        """Whether ``text`` holds one of the values: a substring search for each, which an
        agent has a handful of (an alternation of them in ``re`` scanned every character)."""
        return any(value in text for value in self._values)

    def mask(self, text: str) -> str:
        """``text`` with every value masked; ``text`` itself when it holds none. Where two
        values' occurrences overlap, all they cover is one mask: masking one first would leave
        the rest of the other in clear."""
        if not self.within(text):
            return text
        spans: list[tuple[int, int]] = []
        for value in self._values:
            start = text.find(value)
            while start >= 0:
                spans.append((start, start + len(value)))
                start = text.find(value, start + 1)
        merged: list[list[int]] = []
        for start, end in sorted(spans):
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        pieces: list[str] = []
        shown = 0
        for start, end in merged:
            pieces.extend((text[shown:start], MASK))
            shown = end
        pieces.append(text[shown:])
        return "".join(pieces)


BUILTIN_PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # Each entry: a name, the pattern, and literals one of which every match contains (see
    # ``Rule``). The literals must follow from the pattern: a wrong one hides a secret.
    # A key cut short (a tool's output limit, a paste) has no END line: then its body is masked
    # as far as it goes, base64 and the "Proc-Type: 4,ENCRYPTED" style headers included.
    (
        "pem-private-key",
        r"(?P<secret>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?"
        r"-----END [A-Z0-9 ]*PRIVATE KEY-----|[A-Za-z0-9+/=\s:,-]*))",
        ("PRIVATE KEY-----",),
    ),
    # After a known prefix the body is base64url ('-' and '_' anywhere, even first); otherwise
    # a few dash-separated segments before a 20-run, bounded so text full of "sk-" stays linear.
    (
        "openai-or-anthropic",
        r"\b(?P<secret>sk-(?:(?:proj|svcacct|admin|None|ant-[a-z]+\d*)-[A-Za-z0-9_-]{20,}"
        r"|(?:[A-Za-z0-9_]+-){0,6}[A-Za-z0-9_]{20,}[A-Za-z0-9_-]*))",
        ("sk-",),
    ),
    ("google-api-key", r"\b(?P<secret>AIza[0-9A-Za-z_-]{35})", ("AIza",)),
    ("google-oauth", r"\b(?P<secret>ya29\.[0-9A-Za-z_-]{20,})", ("ya29.",)),
    (
        "stripe",
        r"\b(?P<secret>(?:sk|rk|pk)_(?:live|test)_[0-9A-Za-z]{16,})",
        ("_live_", "_test_"),
    ),
    ("stripe-webhook", r"\b(?P<secret>whsec_[0-9A-Za-z]{20,})", ("whsec_",)),
    (
        "github",
        r"\b(?P<secret>(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}))",
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    (
        "gitlab",
        r"\b(?P<secret>gl(?:pat|dt|rt|ptt|cbt)-[A-Za-z0-9_-]{20,})",
        ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-"),
    ),
    ("slack-token", r"\b(?P<secret>xox[abposr]-[A-Za-z0-9-]{10,})", ("xox",)),
    (
        "slack-webhook",
        r"hooks\.slack\.com/services/(?P<secret>[A-Za-z0-9/]{20,})",
        ("hooks.slack.com/services/",),
    ),
    (
        "aws-access-key",
        r"\b(?P<secret>(?:AKIA|ASIA|ABIA|ACCA|AROA|AIDA)[A-Z0-9]{16})\b",
        ("AKIA", "ASIA", "ABIA", "ACCA", "AROA", "AIDA"),
    ),
    ("huggingface", r"\b(?P<secret>hf_[A-Za-z0-9]{30,})", ("hf_",)),
    ("npm", r"\b(?P<secret>npm_[A-Za-z0-9]{36})", ("npm_",)),
    (
        "pypi",
        r"\b(?P<secret>pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{40,})",
        ("pypi-AgEIcHlwaS5vcmc",),
    ),
    ("sendgrid", r"\b(?P<secret>SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})", ("SG.",)),
    ("digitalocean", r"\b(?P<secret>do[por]_v1_[a-f0-9]{64})", ("_v1_",)),
    ("shopify", r"\b(?P<secret>shp(?:at|ss|ca|pa)_[a-fA-F0-9]{32})", ("shp",)),
    # "SK" and a hex digit rather than "SK": looking for two characters with ``in`` costs a scan
    # of the text, and in the automaton they would turn its prefilter off (``SHORTEST_SCANNED``).
    (
        "twilio",
        r"\b(?P<secret>SK[0-9a-f]{32})\b",
        tuple(f"SK{digit}" for digit in "0123456789abcdef"),
    ),
    (
        "jwt",
        r"\b(?P<secret>eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,})",
        ("eyJ",),
    ),
    (
        "bearer",
        r"\b[Bb]earer\s+(?P<secret>(?=[A-Za-z._~+/-]*[0-9]|[A-Za-z0-9._~+/-]{20})"
        r"[A-Za-z0-9._~+/-]{8,}=*)",
        ("Bearer", "bearer"),
    ),
    (
        "basic",
        r"\bBasic\s+(?P<secret>(?=[A-Za-z0-9+/]*[0-9+/=])[A-Za-z0-9+/]{12,}={0,2})",
        ("Basic",),
    ),
    # The scheme is bounded: unbounded, a long run of [A-Za-z0-9+.-] is scanned in quadratic time.
    (
        "url-credentials",
        r"[A-Za-z][A-Za-z0-9+.-]{0,31}://(?P<secret>[^/\s:@]*:[^/\s@]+)@",
        ("@",),
    ),
    # Case-insensitive, so its literals are looked for in the folded text (see ``fold``).
    (
        "assignment",
        r"(?i)\b(?:[a-z0-9]+[_-]){0,4}"  # a prefix: DB_PASSWORD, aws_secret_access_key
        r"(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey"
        r"|access[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token"
        r"|private[_-]?key|x-api-key)\b[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"',;&}]{3,})",
        # Every keyword in full, not "key" and "token": those are in half the JSON a tool
        # returns (idempotency_key, next_page_token, tokens), and each hit costs a search of
        # this pattern, the dearest of all.
        (
            "passw",
            "passphrase",
            "pwd",
            "secret",
            "apikey",
            "api_key",
            "api-key",
            "accesskey",
            "access_key",
            "access-key",
            "accesstoken",
            "access_token",
            "access-token",
            "authtoken",
            "auth_token",
            "auth-token",
            "refreshtoken",
            "refresh_token",
            "refresh-token",
            "privatekey",
            "private_key",
            "private-key",
        ),
    ),
)


WINDOWED = frozenset({"assignment"})
"""The built-in rules searched only in windows around their literals (``Rule.windowed``).

A rule may be listed here only if, in every match, what stands before the literal is letters,
digits, ``_`` and ``-`` (the assignment's ``DB_``, ``aws_secret_``): the window reaches back
across those alone. The reference-equivalence tests (tests/redaction) check each listed rule.
"""


def fold(text: str) -> str:
    """``text`` casefolded, with the two i's that ``re`` matches to ``i`` ignoring case but
    casefolding does not fold onto it written as ``i``: U+0130 (casefolded, ``i`` and a
    combining dot) and U+0131, the dotless i. In the result every character ``re`` would match to
    a lower-case letter ignoring case is that letter (a test walks all of Unicode), so a literal
    of a case-insensitive rule is found here wherever the rule could match. Folding an ``i`` with
    a combining dot that was in the text onto ``i`` only finds more, never less.
    """
    if text.isascii():  # a flag CPython keeps: ``lower`` is ``casefold`` there, and faster
        return text.lower()
    return text.casefold().replace("i\u0307", "i").replace("\u0131", "i")


@dataclass(frozen=True)
class Rule:
    """A pattern, and literals one of which every match of it contains (none: always searched).

    ``re`` cannot jump ahead to a pattern that starts with ``\\b`` or a character class, so a
    search steps through every character, for every pattern of the built-in set. An automaton
    finds every literal of the rules in one pass (``_Literals``, a small fraction of one such
    search; ``bench/README.md``) and most text holds none
    of a pattern's, so the pattern is only searched in text that holds one (see
    ``Redactor._holding_a_literal``). A case-insensitive pattern's literals (lower case) are
    looked for in the text as ``fold`` leaves it, where every character that ``re`` matches to a
    letter ignoring case is that letter (the long s and the Kelvin sign included), so nothing
    ``re`` would match is missed.
    """

    pattern: re.Pattern[str]
    literals: tuple[str, ...] = ()
    windowed: bool = False
    """Searched only where a literal stands (``subn``); see ``WINDOWED`` for when that is sound."""
    # Set once here: ``mask`` asks for it on every rule of every message, and as a property
    # (an enum flag ``&`` per call) it cost about as much as looking for a literal.
    ignores_case: bool = field(init=False, repr=False, compare=False)
    _where: _Literals | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        ignores_case = bool(self.pattern.flags & re.IGNORECASE)
        object.__setattr__(self, "ignores_case", ignores_case)
        where = None
        if self.windowed:
            if not self.literals or not all(self.literals):
                raise ConfigurationError(
                    f"the windowed rule {self.pattern.pattern!r} needs literals that every match "
                    "holds, and has none or an empty one: list them or leave it unwindowed"
                )
            # Where its literals stand, from the automaton ``Redactor`` looks for them with.
            where = _Literals(self.literals)
        object.__setattr__(self, "_where", where)

    def subn(
        self,
        replace: Callable[[re.Match[str]], str],
        text: str,
        near: Sequence[int] | None = None,
    ) -> tuple[str, int]:
        """``pattern.subn(replace, text)``, searched only in windows around the literals.

        ``re`` tries a pattern that starts with ``\\b`` at every character: for the assignment
        pattern that is many times what one scan for its literals costs. A match holds a
        literal, and from the match's start up to that literal there are only letters, digits,
        ``_`` and ``-``; so the leftmost match starts in the run of those just before some
        occurrence of a literal, or at it. Those positions alone are tried, in order, each once,
        and never one inside a match already made: the same matches ``subn`` makes, found where
        the literals are instead of everywhere.

        ``near`` is where the literals stand, when the caller looked for them in ``text`` (or,
        for a rule that ignores case, in ``fold(text)``) already (``Redactor._holding_a_literal``):
        used where those are the positions in ``text``, as in ASCII text, and not looked for
        again.
        """
        if self._where is None:
            return self.pattern.subn(replace, text)
        if self.ignores_case and "\u0130" in text:  # lower-cases to two characters
            return self.pattern.subn(replace, text)
        if near is not None and (not self.ignores_case or text.isascii()):
            found = sorted(set(near))
        else:
            haystack = text
            if self.ignores_case:
                # Lower-cased, and the two letters ``re`` matches to ``s`` and ``i`` ignoring
                # case that ``lower`` leaves alone written as those: each character keeps its
                # position, and stands as the literal's letter wherever ``re`` could match it.
                haystack = text.lower().replace("\u017f", "s").replace("\u0131", "i")
            found = sorted({at for _, at in self._where.found(haystack)})
        pieces: list[str] = []
        copied = 0  # text[:copied] is in pieces
        tried = 0  # no match starts before it that is not made already
        for at in found:
            if at < tried:
                continue
            start = at
            while start > tried and (text[start - 1].isalnum() or text[start - 1] in "_-"):
                start -= 1
            match = None
            for position in range(start, at + 1):
                match = self.pattern.match(text, position)
                if match is not None:
                    break
            if match is None:
                tried = at + 1
                continue
            pieces += (text[copied : match.start()], replace(match))
            copied = tried = match.end()
        if not pieces:
            return text, 0
        pieces.append(text[copied:])
        return "".join(pieces), len(pieces) // 2


class _Literals:
    """Every occurrence of some literals in a text, overlapping ones included.

    Aho-Corasick automata in Rust (``ahocorasick_rs``): every literal at once, in one pass
    whatever their number. Before them the kit scanned with ``re`` once per literal's rarest
    character (18 scans of a tool result); ``pyahocorasick`` walks its trie a character at a
    time, no faster than those scans (``bench/README.md``).

    A search for overlapping matches has no prefilter; a leftmost search has a SIMD one (Teddy)
    when there are at most 64 literals of ``SHORTEST_SCANNED`` bytes or more, and without it
    costs several times more. So the leftmost search goes
    over the text, and the overlapping one only where it found a literal that may hide another
    (``_may_hide``): an occurrence it skipped starts inside one it reported (it reports the
    leftmost start, then resumes at that match's end), so searching from each reported start to
    its end plus the longest literal finds every one (``passphrase`` running into ``secret``).
    Most text holds none, and costs the one leftmost pass. The automata search bytes (their
    ``str`` API maps byte offsets to characters, a cost a text even when nothing is found, and
    refuses a lone surrogate): an ASCII text's byte offsets are its character offsets, and in
    other text the few matches are counted back to characters.
    """

    def __init__(self, literals: Sequence[str]) -> None:
        self._short = tuple(
            (index, literal)
            for index, literal in enumerate(literals)
            if len(literal) < SHORTEST_SCANNED
        )
        long = [
            (index, literal)
            for index, literal in enumerate(literals)
            if len(literal) >= SHORTEST_SCANNED
        ]
        self._long = tuple(index for index, _ in long)
        encoded = [_utf8(literal) for _, literal in long]
        self._longest = max(map(len, encoded), default=0)  # in bytes, as the windows are
        self._leftmost = ahocorasick_rs.BytesAhoCorasick(
            encoded, matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
        )
        self._overlapping = ahocorasick_rs.BytesAhoCorasick(encoded)
        # Whether an occurrence of each may hide another: the only windows searched.
        self._hides = tuple(_may_hide(literal, encoded) for literal in encoded)

    def found(self, haystack: str) -> Iterator[tuple[int, int]]:
        """Which literal (its index) stands where (the index of its first character); an
        occurrence may be given more than once."""
        for index, short in self._short:  # ``in`` first: one ``memchr`` where it is absent
            if short in haystack:
                at = haystack.find(short)
                while at >= 0:
                    yield index, at
                    at = haystack.find(short, at + 1)
        if not self._long:
            return
        ascii = haystack.isascii()
        data = haystack.encode("ascii") if ascii else _utf8(haystack)
        long = self._long
        hides = self._hides
        for literal, start, end in self._leftmost.find_matches_as_indexes(data):
            yield long[literal], start if ascii else _characters(data, start)
            if not hides[literal]:
                continue
            window = data[start : end + self._longest - 1]
            for hidden, offset, _ in self._overlapping.find_matches_as_indexes(
                window, overlapping=True
            ):
                if offset < end - start:
                    at = start + offset
                    yield long[hidden], at if ascii else _characters(data, at)


def _utf8(text: str) -> bytes:
    """``text`` in UTF-8, a lone surrogate (JSON's ``\\ud800`` decodes to one) encoded as any
    other character is: the automaton takes bytes, and plain UTF-8 refuses a surrogate."""
    return text.encode("utf-8", "surrogatepass")


def _characters(data: bytes, offset: int) -> int:
    """How many characters ``data`` (``_utf8`` of a text) holds before ``offset``, a character's
    first byte: a literal's UTF-8 can only match there. Only for text that is not ASCII."""
    return len(data[:offset].decode("utf-8", "surrogatepass"))


def _may_hide(literal: bytes, literals: Sequence[bytes]) -> bool:
    """Whether another occurrence of ``literals`` (or of ``literal`` itself, later) can start
    inside an occurrence of ``literal``: what the leftmost search would skip after reporting it.
    ``api_key`` cannot (no literal starts with ``pi_key``, ``i_key``, ... or a prefix of them),
    so a leftmost match of it needs no window; ``passphrase`` can (``secret``)."""
    return any(
        (offset, other) != (0, literal)
        and (literal[offset:].startswith(other) or other.startswith(literal[offset:]))
        for offset in range(len(literal))
        for other in literals
    )


SHORTEST_SCANNED = 3
"""Literals shorter than this (``@``) are looked for with ``str.find`` rather than by the
leftmost search: one of one or two characters turns its prefilter off, and the pass costs
several times more. One character is a ``memchr``, next to free; two, a search about as dear as
the automaton's, so a built-in rule lists longer ones."""


@dataclass(frozen=True)
class Redactor:
    """Masks every match of its rules; ``Redactor.build`` adds ``extra_patterns`` (searched
    everywhere: the kit cannot know their literals)."""

    rules: tuple[Rule, ...]
    secrets: SecretValues = field(default_factory=SecretValues, repr=False, compare=False)
    """Values masked wherever they appear, before the rules (``SecretValues``)."""
    # Derived from ``rules``: the literals looked for in the text as it is and in the text
    # folded (``fold``), each with the rules it gates (``_Gate``), and the rules searched
    # whatever the text (no literals, as an extra pattern has, or an empty one).
    _gates: tuple[_Gate, ...] = field(init=False, repr=False, compare=False)
    _unconditional: frozenset[int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        plain: dict[str, set[int]] = {}
        folded: dict[str, set[int]] = {}
        unconditional = set()
        for index, rule in enumerate(self.rules):
            if not rule.literals:
                unconditional.add(index)
            for literal in rule.literals:
                if _JOIN in literal:
                    raise ConfigurationError(
                        f"the rule {rule.pattern.pattern!r} lists a literal with a NUL in it, "
                        "which the joined scan (Redactor._held) relies on no literal "
                        "holding: drop that character from the literal"
                    )
                if not literal:
                    unconditional.add(index)
                else:
                    owners = folded if rule.ignores_case else plain
                    owners.setdefault(literal, set()).add(index)
        gates = tuple(
            _Gate(
                _Literals(list(owners)),
                tuple(frozenset(rules) for rules in owners.values()),
                folds,
            )
            for owners, folds in ((plain, False), (folded, True))
            if owners
        )
        object.__setattr__(self, "_gates", gates)
        object.__setattr__(self, "_unconditional", frozenset(unconditional))

    @classmethod
    def build(cls, extra_patterns: Iterable[str] = ()) -> Redactor:
        rules = [
            Rule(re.compile(source), literals, windowed=name in WINDOWED)
            for name, source, literals in BUILTIN_PATTERNS
        ]
        for index, source in enumerate(extra_patterns):
            try:
                rules.append(Rule(re.compile(source)))
            except re.error as exc:
                raise ConfigurationError(
                    f"extra_patterns[{index}] {source!r} is not a regular expression ({exc}); "
                    "fix or remove it"
                ) from exc
        return cls(tuple(rules))

    def with_secrets(self, secrets: SecretValues) -> Redactor:
        """This redactor masking ``secrets`` as well, its rules and their automata shared with
        this one: built again for each run (``dataclasses.replace``), they cost more than a
        short run's masking."""
        twin = copy.copy(self)
        object.__setattr__(twin, "secrets", secrets)
        return twin

    def mask(self, text: str) -> str:
        return self._masked(text, self._holding_a_literal(text))

    def _masked(self, text: str, gated: dict[int, list[int]] | None) -> str:
        """``text`` masked, given the rules it holds a literal of and where (the scan of this
        very text, ``_holding_a_literal``)."""
        if self.secrets:
            unveiled = self.secrets.mask(text)
            if unveiled is not text:
                text, gated = unveiled, self._holding_a_literal(unveiled)
        if not gated:
            return text
        # The rules one of whose literals the text holds, until a rule changes the text: a
        # substitution can change what a later rule sees, so they are looked for again.
        for index, rule in enumerate(self.rules):
            if rule.literals:
                if gated is None:
                    gated = self._holding_a_literal(text)
                if index not in gated:
                    continue
            # One scan: ``search`` then ``sub`` went over the text twice where a rule matched.
            masked, count = rule.subn(self._replace, text, None if gated is None else gated[index])
            if count:
                text = masked
                gated = None
        return text

    def _held(self, strings: Sequence[str]) -> dict[int, list[int]]:
        """The rules one of ``strings`` holds a literal of, or that are searched whatever the
        text, from one scan (a superset of them: see below).

        A message, a tool call's arguments or a frontier's metadata is a handful of strings
        (a call's arguments: a query, two carriers, a date), and looking for the literals in
        each on its own paid the scan's fixed cost per string, about as much as the scan of a
        few KB. Joined by a NUL, which no literal holds (``__post_init__`` checks), they are
        looked for in one scan: a literal in any one string is in the joined text, and none
        the joined text holds can span a NUL. So when it is empty no rule can match in any of
        them; when it is not, each string is masked on its own (with this set when it is the
        only one).
        """
        text = strings[0] if len(strings) == 1 else _JOIN.join(strings)
        held = self._holding_a_literal(text)
        if self.secrets.within(text):
            held.setdefault(_SECRETS, [])
        return held

    def _holding_a_literal(self, text: str) -> dict[int, list[int]]:
        """The indices of the rules one of whose literals ``text`` holds, each with where they
        stand (in ``fold(text)`` for a rule that ignores case), for ``Rule.subn``.

        Two searches (``_Literals``): the literals looked for as they are in the text, those of
        case-insensitive rules in the text folded (``fold``). Before, ``re`` scanned once per
        literal's rarest character; one ``in`` per literal, or one alternation of them all, cost
        more still (``re`` has no fast path for it).
        """
        held: dict[int, list[int]] = {index: [] for index in self._unconditional}
        for gate in self._gates:
            for literal, at in gate.literals.found(fold(text) if gate.folds else text):
                for rule in gate.owners[literal]:
                    held.setdefault(rule, []).append(at)
        return held

    @staticmethod
    def _replace(match: re.Match[str]) -> str:
        if "secret" not in match.re.groupindex:
            return MASK
        start, end = match.span("secret")
        whole_start, whole_end = match.span()
        return match.string[whole_start:start] + MASK + match.string[end:whole_end]

    def mask_json(self, value: JsonValue) -> JsonValue:
        """``value`` with every string in it masked (keys are names, and left alone); ``value``
        itself when masking changes none of them."""
        if not self._held(list(_strings(value))):
            return value
        return self._masked_json(value)

    def _masked_json(self, value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {key: self._masked_json(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._masked_json(item) for item in value]
        return value

    def mask_call(self, call: ToolCall) -> ToolCall:
        if not self._held(list(_strings(call.arguments))):
            return call
        arguments = self._masked_json(dict(call.arguments))
        if arguments == call.arguments:
            return call
        assert isinstance(arguments, dict)
        return call.model_copy(update={"arguments": arguments})

    def mask_message(self, message: Message) -> Message:
        texts = [part.text for part in message.parts if isinstance(part, TextPart)]
        strings = texts + [text for call in message.tool_calls for text in _strings(call.arguments)]
        held = self._held(strings)
        if not held:
            return message
        # With the scan of its one string, or each string scanned on its own.
        one = held if len(strings) == 1 else None
        parts = tuple(
            self._masked_part(part, one) if isinstance(part, TextPart) else part
            for part in message.parts
        )
        calls = tuple(self.mask_call(call) for call in message.tool_calls)
        if parts == message.parts and calls == message.tool_calls:
            return message
        return message.model_copy(update={"parts": parts, "tool_calls": calls})

    def _masked_part(self, part: TextPart, held: dict[int, list[int]] | None) -> TextPart:
        """``part`` itself when masking leaves its text alone: a copy of a model and comparing
        it cost a fifth of a tool result's masking where a keyword sent it through the rules."""
        text = self._masked(part.text, held) if held is not None else self.mask(part.text)
        return part if text is part.text else part.model_copy(update={"text": text})

    def mask_messages(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        return tuple(self.mask_message(message) for message in messages)


@dataclass(frozen=True)
class _Gate:
    """Literals, the rules each gates (``owners``, by the literal's index), and whether they are
    looked for in the text folded (a case-insensitive rule's) or as it is."""

    literals: _Literals
    owners: tuple[frozenset[int], ...]
    folds: bool


_SECRETS = -1
"""Where ``Redactor._held`` says the strings hold a secret's value: no rule's index."""

_JOIN = "\x00"
"""What ``Redactor._held`` joins strings with: a character no literal holds."""


def _strings(value: JsonValue) -> Iterator[str]:
    """Every string among ``value``'s values, however deep (keys are not values)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass(frozen=True)
class Masker:
    """The run's redaction, as every writer of the kit applies it; ``redactor`` is None when
    the settings say not to mask (``redact=False``, for a store that is already trusted)."""

    redactor: Redactor | None

    @classmethod
    def build(cls, extra_patterns: Iterable[str] = (), *, redact: bool = True) -> Masker:
        return cls(Redactor.build(extra_patterns) if redact else None)

    def with_secrets(self, secrets: SecretValues) -> Masker:
        """This masking, and ``secrets`` masked by value: a run's, over the backend's (which
        many runs share, and which should not mask one agent's secrets in another's text).
        Without redaction (``redact=False``) nothing is masked, secrets neither."""
        if self.redactor is None:
            return self
        return Masker(self.redactor.with_secrets(secrets))

    def text(self, text: str) -> str:
        """``text`` as the frontier keeps a message's text."""
        return text if self.redactor is None else self.redactor.mask(text)

    def json(self, value: JsonValue) -> JsonValue:
        """Every string in ``value`` (keys too: an object is a mapping someone wrote) masked."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(key): self.json(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.json(item) for item in value]
        return value

    def outcome(self, text: str) -> str:
        """``text`` masked as the frontier masks the tool message that carries it, so a replayed
        outcome reads as the conversation does; and a JSON document stays the same document,
        with each of its strings masked on its own as well (an approval's decision is parsed
        back, and a tool's JSON may be).

        Masking the document's text finds what only shows with the key beside its value
        (``"password": "..."``); masking each string finds what JSON escaping hides from the
        text (a quoted password, escaped). Where masking the text changed the document's shape
        (a pattern that ran across a quote and ate a field), its strings alone are masked.
        """
        if self.redactor is None:
            return text
        masked = self.redactor.mask(text)
        original = _document(text)
        if original is _NOT_JSON:
            return masked
        document = _document(masked)
        if document is not _NOT_JSON and _shape(document) == _shape(original):
            deeper = self.json(cast(JsonValue, document))
            return masked if deeper == document else json.dumps(deeper, ensure_ascii=False)
        return json.dumps(self.json(cast(JsonValue, original)), ensure_ascii=False)


_NOT_JSON = object()


def _document(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return _NOT_JSON


def _shape(value: object) -> object:
    """What masking a document's strings leaves alone: its keys, lengths and kinds of value."""
    if isinstance(value, dict):
        return {key: _shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_shape(item) for item in value]
    return type(value)


class MaskingFilter(logging.Filter):
    """Masks every log record that passes through it, its message and any traceback, before a
    handler formats it: a log line can quote what a tool returned or what a provider answered.
    Installed on a logger it sees that logger's records; on a handler, every record it writes."""

    def __init__(self, masker: Masker) -> None:
        super().__init__()
        self.masker = masker

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.masker.text(record.getMessage())
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.masker.text(record.exc_text)
        return True
