"""Events for what a person should notice, posted through kopf against the AgentRun."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf

# Events of a run's progress; how a run ended posts its ``Outcome``'s event.
LEASE_TAKEN = "LeaseTaken"
RUN_RESUMED = "RunResumed"
CHECKPOINT_REFUSED = "CheckpointRefused"


def notice(body: Mapping[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
    kopf.event(
        cast(kopf.Body, body),
        type="Warning" if warning else "Normal",
        reason=reason,
        message=message[:1024],
    )
