"""What the operator's loops try again, and how long they wait before they do.

A worker or the forgetting of a deleted run meets errors of two kinds. Some pass: a store or the
API server briefly away (``AgentRunError.retryable``, an API answer a retry can change, a
connection that failed), a patch the object's own changes refused (``Rejected``). Those are tried
again, waiting twice as long each time up to a cap, with jitter, so that a store that comes back
is not met by every run of every replica at once. Everything else (a 403, a bug) would fail the
same way every time: retrying it turned a programming error into a warning a second and hid it.
Those are surfaced on the run instead (``RunReporter.fault``: the ``OperatorFault`` condition and
event) and the loop stops.
"""

from __future__ import annotations

import random

from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from agentrun._errors import AgentRunError
from agentrun.operator._kubeapi import Rejected, status_message

RETRYABLE_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
"""API server answers that a retry can change: a timeout, throttling, the server unable to
answer now (an etcd leader election, a restart)."""


def recoverable(error: BaseException) -> bool:
    """Whether trying again, unchanged, can succeed."""
    if isinstance(error, AgentRunError):
        return error.retryable
    if isinstance(error, ApiException):
        return error.status in RETRYABLE_STATUSES
    # The API server could not be reached, or the connection broke (urllib3's errors, which the
    # Kubernetes client raises as they are), or the object changed under a patch.
    return isinstance(error, HTTPError | ConnectionError | TimeoutError | Rejected)


BACKOFF_CAP = 60.0
"""Seconds at most between two tries while a store or the API server stays away: it is noticed
within a minute of its return, and a replica's many runs ask it a few times a minute at most."""


class Backoff:
    """Waits that double from ``first`` to ``cap``, each drawn from its upper half (jitter)."""

    def __init__(self, first: float, cap: float = BACKOFF_CAP) -> None:
        self.first = first
        self.cap = cap
        self._failures = 0

    def next(self) -> float:
        """How long to wait after one more failure in a row."""
        ceiling = min(self.cap, self.first * 2.0 ** min(self._failures, 32))
        self._failures += 1
        return random.uniform(ceiling / 2, ceiling)

    def reset(self) -> None:
        """A success: the next failure waits ``first`` again."""
        self._failures = 0


def described(error: Exception) -> str:
    """What a person reads of ``error`` on the run: for an API server's refusal its status and
    its own message (what the client's text adds is response headers)."""
    if isinstance(error, ApiException):
        return f"the API server answered {error.status} {error.reason}: {status_message(error)}"
    return f"{type(error).__name__}: {error}"
