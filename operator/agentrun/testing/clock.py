"""A store clock that tests move by hand, so expiry can be tested without waiting."""

from __future__ import annotations


class ManualClock:
    """A clock that stands still until a test moves it (``advance``)."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
