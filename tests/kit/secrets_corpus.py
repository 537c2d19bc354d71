"""Secrets that every checkpoint must mask, and benign strings that must survive it unchanged.

The secret values are generated here from a seeded random source in the real shapes of each
provider's credentials (prefix, alphabet, length), so the corpus is realistic without holding a
single real credential and without literal secret-shaped text that scanners would flag. Each
secret entry names the exact text that must not survive masking; the text around it (a header
name, ``password=``, a URL's host) is context the masked output may keep.

The benign strings are the kind of text a conversation is full of and a careless pattern eats:
ids, digests, dates, versions, URLs without credentials, prose that happens to contain "basic" or
"bearer". A redactor that masks one of them is corrupting the transcript a resume continues from.
"""

from __future__ import annotations

import base64
import random
import string
import uuid
from typing import NamedTuple

_rng = random.Random(20240315)

ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
LOWER_HEX = "0123456789abcdef"
URLSAFE = ALNUM + "-_"
B64 = ALNUM + "+/"


def rand(alphabet: str, length: int) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(length))


def with_digit(alphabet: str, length: int) -> str:
    """A random string that contains at least one digit, as generated tokens almost always do."""
    value = rand(alphabet, length - 1)
    cut = _rng.randrange(len(value) + 1)
    return value[:cut] + _rng.choice(string.digits) + value[cut:]


def b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


class Secret(NamedTuple):
    kind: str
    text: str
    """The whole string as it would appear in a conversation or a tool argument."""
    secret: str
    """The part that must not appear anywhere in the masked output."""


def _jwt() -> str:
    header = b64url(b'{"alg":"HS256","typ":"JWT"}')
    claims = b64url(b'{"sub":"1234567890","name":"Jo Doe","iat":1716239022}')
    return f"{header}.{claims}.{b64url(_rng.randbytes(32))}"


def _pem(label: str) -> str:
    body = "\n".join(base64.b64encode(_rng.randbytes(48)).decode() for _ in range(6))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _secrets() -> list[Secret]:
    entries: list[tuple[str, str, str]] = []

    def add(kind: str, template: str, secret: str) -> None:
        entries.append((kind, template.format(s=secret), secret))

    add("openai-legacy", "export OPENAI_API_KEY={s}", "sk-" + rand(ALNUM, 48))
    add("openai-project", "use {s} for the eval", "sk-proj-" + rand(URLSAFE, 156))
    # A project key whose body has '-' and '_' early, as base64url often does.
    add(
        "openai-project-dashes",
        "key: {s}",
        "sk-proj-a_" + rand(ALNUM, 3) + "-" + rand(URLSAFE, 120),
    )
    add("openai-svcacct", "{s}", "sk-svcacct-" + rand(URLSAFE, 80))
    add("anthropic", "ANTHROPIC_API_KEY={s}", "sk-ant-api03-" + rand(URLSAFE, 93) + "AA")
    add(
        "anthropic-dashes",
        "try {s} now",
        "sk-ant-api03-Q_" + rand(ALNUM, 4) + "-" + rand(URLSAFE, 86) + "AA",
    )
    add("anthropic-admin", "admin key {s}", "sk-ant-admin01-" + rand(URLSAFE, 93) + "AA")
    add(
        "google",
        "https://maps.googleapis.com/maps/api/geocode/json?key={s}",
        "AIza" + rand(URLSAFE, 35),
    )
    add("google-oauth", "access token {s}", "ya29." + rand(URLSAFE, 120))
    add("stripe-secret", "stripe.api_key = '{s}'", "sk_live_" + rand(ALNUM, 99))
    add("stripe-restricted", "{s}", "rk_live_" + rand(ALNUM, 24))
    add("stripe-test", "the test key is {s}.", "sk_test_" + rand(ALNUM, 24))
    add("stripe-webhook", "STRIPE_WEBHOOK_SECRET={s}", "whsec_" + rand(ALNUM, 32))
    add("github-classic", "git clone https://x:{s}@github.com/o/r", "ghp_" + rand(ALNUM, 36))
    add("github-oauth", "token {s}", "gho_" + rand(ALNUM, 36))
    add("github-app", "installation token {s}", "ghs_" + rand(ALNUM, 36))
    add(
        "github-fine-grained",
        "GH_TOKEN={s}",
        "github_pat_" + rand(ALNUM, 22) + "_" + rand(ALNUM, 59),
    )
    add("gitlab", "PRIVATE-TOKEN: {s}", "glpat-" + rand(URLSAFE, 20))
    add(
        "slack-bot",
        "SLACK_BOT_TOKEN={s}",
        f"xoxb-{rand(string.digits, 12)}-{rand(string.digits, 13)}-{rand(ALNUM, 24)}",
    )
    add(
        "slack-user",
        "{s}",
        f"xoxp-{rand(string.digits, 12)}-{rand(string.digits, 12)}-"
        f"{rand(string.digits, 13)}-{rand(LOWER_HEX, 32)}",
    )
    add(
        "slack-webhook",
        "post to https://hooks.slack.com/services/{s} please",
        f"T{rand(UPPER_ALNUM, 8)}/B{rand(UPPER_ALNUM, 10)}/{rand(ALNUM, 24)}",
    )
    add("aws-access-key", "aws_access_key_id = {s}", "AKIA" + rand(UPPER_ALNUM, 16))
    add("aws-session-key", "{s} (temporary)", "ASIA" + rand(UPPER_ALNUM, 16))
    add("aws-secret", "aws_secret_access_key={s}", rand(B64, 40))
    add("aws-secret-env", "AWS_SECRET_ACCESS_KEY: {s}", rand(B64, 40))
    add("jwt", "id_token={s}", _jwt())
    add("jwt-bare", "the session was {s}", _jwt())
    add("bearer", "Authorization: Bearer {s}", with_digit(URLSAFE + ".~", 40))
    add("bearer-lower", "curl -H 'authorization: bearer {s}'", with_digit(ALNUM, 32))
    add(
        "basic",
        "Authorization: Basic {s}",
        base64.b64encode(b"svc-billing:" + rand(ALNUM, 16).encode()).decode(),
    )
    add("postgres-url", "DATABASE_URL=postgres://app:{s}@db.internal:5432/app", rand(ALNUM, 20))
    add("postgres-url-user", "postgresql://{s}@10.0.0.5/prod", "admin:" + rand(ALNUM, 16))
    add("redis-url-no-user", "REDIS_URL=redis://:{s}@cache:6379/0", rand(ALNUM, 24))
    add("mongodb-srv", "mongodb+srv://svc:{s}@cluster0.ab1cd.mongodb.net/db", rand(ALNUM, 18))
    add("amqp-url", "amqps://worker:{s}@mq.example.net/vhost", rand(ALNUM, 20))
    add("pem-rsa", "here is the key\n{s}\nthanks", _pem("RSA PRIVATE KEY"))
    add("pem-ec", "{s}", _pem("EC PRIVATE KEY"))
    add("pem-openssh", "id_ed25519:\n{s}", _pem("OPENSSH PRIVATE KEY"))
    add("pem-pkcs8", "{s}", _pem("PRIVATE KEY"))
    # Cut short by a tool's output limit: no END line.
    cut_short = _pem("RSA PRIVATE KEY")[:300]
    add("pem-cut-short", "id_rsa (first 300 bytes):\n{s}... [truncated]", cut_short)
    add("password-assign", "login with password={s} and go", rand(ALNUM + "!#%", 14))
    add("password-env", "DB_PASSWORD={s}", rand(ALNUM, 18))
    add("password-yaml", "  password: {s}", rand(ALNUM, 12))
    add("api-key-colon", "api_key: {s}", rand(LOWER_HEX, 32))
    add("apikey-query", "https://api.example.com/v1/data?apikey={s}&q=x", rand(ALNUM, 32))
    add("x-api-key", "x-api-key: {s}", rand(ALNUM, 40))
    add("client-secret-json", '{{"client_id": "web", "client_secret": "{s}"}}', rand(URLSAFE, 40))
    add("access-token-json", '{{"access_token":"{s}","expires_in":3600}}', rand(URLSAFE, 48))
    add("huggingface", "HF_TOKEN={s}", "hf_" + rand(ALNUM, 34))
    add("npm", "//registry.npmjs.org/:_authToken={s}", "npm_" + rand(ALNUM, 36))
    add("sendgrid", "{s}", f"SG.{rand(URLSAFE, 22)}.{rand(URLSAFE, 43)}")
    add("pypi", "password = {s}", "pypi-AgEIcHlwaS5vcmc" + rand(URLSAFE, 60))
    add("digitalocean", "DO token {s}", "dop_v1_" + rand(LOWER_HEX, 64))
    add("shopify", "{s}", "shpat_" + rand(LOWER_HEX, 32))
    add("twilio", "twilio key {s}", "SK" + rand(LOWER_HEX, 32))
    return [Secret(*entry) for entry in entries]


SECRETS: tuple[Secret, ...] = tuple(_secrets())


def _benign() -> list[str]:
    return [
        str(uuid.UUID(int=_rng.getrandbits(128), version=4)),
        "550e8400-e29b-41d4-a716-446655440000",
        rand(LOWER_HEX, 40),
        f"commit {rand(LOWER_HEX, 40)} fixed the build",
        f"image digest sha256:{rand(LOWER_HEX, 64)}",
        "https://example.com/docs/getting-started?lang=en#install",
        "https://api.github.com/repos/octo/agentrun/pulls/1234",
        "postgres://db.internal:5432/app",
        "https://user@example.com/repo.git",
        "git@github.com:octo/agentrun.git",
        "see http://localhost:8080/healthz for status",
        "The flight leaves at 10:45 and costs 349.99 EUR for 2 adults.",
        "We processed 1,204,337 events in 42 minutes (about 478 per second).",
        "Order #A-10293 shipped 3 items; tracking 1Z999AA10123456784.",
        "invoice INV-2024-000781 is due on 2024-07-01",
        "2024-03-15T10:22:33.120Z",
        "cus_NffrFeUfNV2Hib and pi_3MtwBwLkdIwHu7ix28a3tqPa",
        "ticket PROJ-4821 blocks PROJ-4830",
        "aGVsbG8=",
        "d29ybGQ= is base64 for world",
        "/var/lib/agentrun/state.db",
        r"C:\Users\mara\Documents\report-2023.xlsx",
        "alice.smith+orders@example.co.uk",
        "mailto:support@example.com",
        "This course assumes a basic understanding of Python 3 and SQL.",
        "Basic Authentication is deprecated for the admin console.",
        "The bearer instrument was signed in 2019 by both parties.",
        "Bearer tokens expire after 3600 seconds.",
        "v1.24.3",
        "2.0.0-rc.1+build.5",
        "Python 3.11.9 with pydantic 2.7.4",
        "+1 (415) 555-0132",
        "call 030 1234 5678 after 9",
        "SELECT id, name FROM users WHERE created_at > '2024-01-01' LIMIT 50;",
        "UPDATE orders SET status = 'shipped' WHERE id = 88123;",
        "The password must be at least 12 characters long.",
        "Set api_key in the environment before running the script.",
        "client_secret is described in RFC 6749 section 2.3.1",
        "arn:aws:iam::123456789012:role/agentrun-worker",
        "agentrun-operator-7d9f8b6c5d-x2x7q",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIGbn3fT9xqJY0c9kR1m2Vd8eXo4q0l8zK3bQ7hF2 mara@laptop",
        "-----BEGIN PUBLIC KEY-----\nMFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcD\n-----END PUBLIC KEY-----",
        "eyJhbGciOiJIUzI1NiJ9 is only a JWT header",
        "ratio 16:9 at 1920x1080, 60 fps",
        "10.0.0.12:8080 and [::1]:5432",
        "colour #1a2b3c, margin 12px",
        "task-2024-03-15-report-generation-step-7",
        "we use the sk-learn compatible API",
        "meet at 14:00 @ room 4.12",
        "the AKIA prefix marks an AWS access key id",
    ]


BENIGN: tuple[str, ...] = tuple(_benign())
