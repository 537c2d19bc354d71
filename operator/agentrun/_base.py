"""The bases every model shares: frozen, and refusing fields it does not know.

Frozen because a frontier is a record of a moment; a model mutated after it was checkpointed is
a frontier nobody wrote. Extra fields are forbidden so that a payload from a newer writer is
never half-read (the format check runs before this, see ``_frontier.decode``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class FrozenModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SpecModel(FrozenModel):
    """A declaration a person writes (an agent's spec): camelCase on the wire, as Kubernetes
    resources are, and snake_case in Python; either spelling is read."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
    )
