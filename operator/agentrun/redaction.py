"""Masking secrets out of everything a frontier persists, before anything is sized or stored.

A run's conversation is the likeliest place in the kit for an API key a user pasted or a bearer
token a tool was handed, and a checkpoint is durable. The ``Checkpointer`` masks before it sizes,
so the redaction happens once and every store inherits it, including one a consumer writes.

What is masked: the text of every message, every string nested anywhere in tool-call arguments
(in the conversation and in the pending calls), and every string in the checkpoint's metadata.
What is not: identities the kit keys on (run id, tenant, agent, call ids), and binary parts —
masking bytes produces a payload that is neither the original nor honestly empty.

Each pattern has one group, ``secret``, which is what gets replaced; the text around it
(``Bearer ``, ``password=``, the scheme of a URL) survives, so the masked transcript still reads
sensibly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import JsonValue

from agentrun.errors import ConfigurationError
from agentrun.messages import Message, TextPart, ToolCall

MASK = "[REDACTED]"

BUILTIN_PATTERNS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    # Each entry: a name, the pattern, and literals one of which every match contains (see
    # ``Rule``). The literals must follow from the pattern: a wrong one hides a secret.
    (
        "pem-private-key",
        r"(?P<secret>-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?"
        r"-----END [A-Z0-9 ]*PRIVATE KEY-----)",
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
    ("twilio", r"\b(?P<secret>SK[0-9a-f]{32})\b", ("SK",)),
    (
        "jwt",
        r"\b(?P<secret>eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,})",
        ("eyJ",),
    ),
    (
        "bearer",
        r"\b[Bb]earer\s+(?P<secret>(?=[A-Za-z._~+/-]*[0-9]|[A-Za-z0-9._~+/-]{20})"
        r"[A-Za-z0-9._~+/-]{8,}=*)",
        ("earer",),
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
    # Case-insensitive, so its literals are looked for in the casefolded text (see ``Rule``).
    (
        "assignment",
        r"(?i)\b(?:[a-z0-9]+[_-]){0,4}"  # a prefix: DB_PASSWORD, aws_secret_access_key
        r"(?:password|passwd|pwd|passphrase|secret|client[_-]?secret|api[_-]?key|apikey"
        r"|access[_-]?key|secret[_-]?key|access[_-]?token|auth[_-]?token|refresh[_-]?token"
        r"|private[_-]?key|x-api-key)\b[\"']?\s*[:=]\s*[\"']?(?P<secret>[^\s\"',;&}]{3,})",
        ("passw", "passphrase", "pwd", "secret", "key", "token"),
    ),
)


@dataclass(frozen=True)
class Rule:
    """A pattern, and literals one of which every match of it contains (none: always searched).

    ``re`` cannot jump ahead to a pattern that starts with ``\\b`` or a character class, so a
    search steps through every character, about 13 ms a MiB per pattern here, and the built-in
    set costs some 0.3 ms a KB. Looking for a literal is more than ten times cheaper and most text
    holds none of a pattern's, so the pattern is only searched in text that holds one. A
    case-insensitive pattern's literals (lower case) are looked for in the casefolded text:
    casefolding maps every character that ``re`` matches to a letter ignoring case onto that
    letter (the long s and the Kelvin sign included), so nothing ``re`` would match is missed.
    """

    pattern: re.Pattern[str]
    literals: tuple[str, ...] = ()

    @property
    def ignores_case(self) -> bool:
        return bool(self.pattern.flags & re.IGNORECASE)


@dataclass(frozen=True)
class Redactor:
    """Masks every match of its rules; ``Redactor.build`` adds ``extra_patterns`` (searched
    everywhere: the kit cannot know their literals)."""

    rules: tuple[Rule, ...]

    @classmethod
    def build(cls, extra_patterns: Iterable[str] = ()) -> Redactor:
        rules = [Rule(re.compile(source), literals) for _, source, literals in BUILTIN_PATTERNS]
        for index, source in enumerate(extra_patterns):
            try:
                rules.append(Rule(re.compile(source)))
            except re.error as exc:
                raise ConfigurationError(
                    f"extra_patterns[{index}] {source!r} is not a regular expression ({exc}); "
                    "fix or remove it"
                ) from exc
        return cls(tuple(rules))

    def mask(self, text: str) -> str:
        folded: str | None = None  # the text casefolded, until a rule changes the text
        for rule in self.rules:
            if rule.literals:
                if rule.ignores_case:
                    folded = text.casefold() if folded is None else folded
                    haystack = folded
                else:
                    haystack = text
                if not any(literal in haystack for literal in rule.literals):
                    continue
            if rule.pattern.search(text) is not None:
                text = rule.pattern.sub(self._replace, text)
                folded = None
        return text

    @staticmethod
    def _replace(match: re.Match[str]) -> str:
        if "secret" not in match.re.groupindex:
            return MASK
        start, end = match.span("secret")
        whole_start, whole_end = match.span()
        return match.string[whole_start:start] + MASK + match.string[end:whole_end]

    def mask_json(self, value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, dict):
            return {key: self.mask_json(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.mask_json(item) for item in value]
        return value

    def mask_call(self, call: ToolCall) -> ToolCall:
        arguments = self.mask_json(dict(call.arguments))
        if arguments == call.arguments:
            return call
        assert isinstance(arguments, dict)
        return call.model_copy(update={"arguments": arguments})

    def mask_message(self, message: Message) -> Message:
        parts = tuple(
            part.model_copy(update={"text": self.mask(part.text)})
            if isinstance(part, TextPart)
            else part
            for part in message.parts
        )
        calls = tuple(self.mask_call(call) for call in message.tool_calls)
        if parts == message.parts and calls == message.tool_calls:
            return message
        return message.model_copy(update={"parts": parts, "tool_calls": calls})

    def mask_messages(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        return tuple(self.mask_message(message) for message in messages)
