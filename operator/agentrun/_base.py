"""The one base every persisted model shares: frozen, and refusing fields it does not know.

Frozen because a frontier is a record of a moment; a model mutated after it was checkpointed is
a frontier nobody wrote. Extra fields are forbidden so that a payload from a newer writer is
never half-read (the format check runs before this, see ``frontier.decode``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
