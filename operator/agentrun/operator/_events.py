"""Events for what a person should notice, posted through kopf against the AgentRun.

An event's message can carry what the run met (an error quoting a provider's answer, a
checkpoint refusal): every one is masked before it is posted, with the ``Masker`` its poster
passes (the backend's, which the run's status and log are masked with too). There is no default
to fall back on: a poster without a masker cannot post.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf

from agentrun._redaction import Masker

# Events of a run's progress; how a run ended posts its ``Outcome``'s event.
LEASE_TAKEN = "LeaseTaken"
RUN_RESUMED = "RunResumed"
CHECKPOINT_REFUSED = "CheckpointRefused"
CLAIMED_ELSEWHERE = "ClaimedElsewhere"


def notice(
    masker: Masker, body: Mapping[str, Any], reason: str, message: str, *, warning: bool = False
) -> None:
    """Post an event on the AgentRun ``body``, its message masked with ``masker``."""
    kopf.event(
        cast(kopf.Body, body),
        type="Warning" if warning else "Normal",
        reason=reason,
        message=masker.text(message)[:1024],
    )
