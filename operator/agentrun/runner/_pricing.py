"""What a model call costs, in micros (millionths of a currency unit), from a price table."""

from __future__ import annotations

import math

from pydantic import Field

from agentrun._base import FrozenModel, SpecModel
from agentrun._errors import ConfigurationError
from agentrun._messages import Usage


class ModelPrice(SpecModel):
    """What a model charges, in micros per million input and output tokens."""

    input_micros_per_million: int = Field(ge=0)
    output_micros_per_million: int = Field(ge=0)


class PriceTable(FrozenModel):
    """Prices by model name; what a run's spend is computed from."""

    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    def cost(self, model: str, usage: Usage) -> int:
        price = self.prices.get(model)
        if price is None:
            raise ConfigurationError(
                f"no price for model {model!r}; add it to the runner's PriceTable "
                f"(known: {sorted(self.prices) or 'none'})"
            )
        return math.ceil(
            (
                usage.input_tokens * price.input_micros_per_million
                + usage.output_tokens * price.output_micros_per_million
            )
            / 1_000_000
        )


DEFAULT_PRICES = PriceTable(
    prices={
        "scripted": ModelPrice(
            input_micros_per_million=2_000_000, output_micros_per_million=8_000_000
        ),
    }
)
