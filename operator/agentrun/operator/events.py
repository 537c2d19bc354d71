"""Events for what a person should notice, posted through kopf against the AgentRun.

An event's message can carry what the run met (an error quoting a provider's answer, a
checkpoint refusal): every one is masked before it is posted, with the backend's ``Masker`` once
the operator has started (``mask_with``) and with the built-in patterns before that, so no event
leaves unmasked whoever posts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, cast

import kopf

from agentrun.redaction import Masker

# Events of a run's progress; how a run ended posts its ``Outcome``'s event.
LEASE_TAKEN = "LeaseTaken"
RUN_RESUMED = "RunResumed"
CHECKPOINT_REFUSED = "CheckpointRefused"
CLAIMED_ELSEWHERE = "ClaimedElsewhere"


class _Masking:
    masker: ClassVar[Masker] = Masker.build()


def mask_with(masker: Masker) -> None:
    """Mask every event message from now on with ``masker`` (the operator's backend's)."""
    _Masking.masker = masker


def notice(body: Mapping[str, Any], reason: str, message: str, *, warning: bool = False) -> None:
    kopf.event(
        cast(kopf.Body, body),
        type="Warning" if warning else "Normal",
        reason=reason,
        message=_Masking.masker.text(message)[:1024],
    )
