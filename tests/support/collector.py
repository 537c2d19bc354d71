"""Counting the garbage collector's runs: what tells whether the kit leaves it as the caller has
it while a transcript decodes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collections_started() -> Iterator[list[int]]:
    """The generations of the collections that start in the block, with the collector made to
    run at nearly every allocation (so a decode of a few hundred messages makes hundreds); its
    state and thresholds as they were after."""
    started: list[int] = []

    def seen(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.set_threshold(1)
    gc.callbacks.append(seen)
    try:
        yield started
    finally:
        gc.callbacks.remove(seen)
        gc.set_threshold(*thresholds)
        (gc.enable if enabled else gc.disable)()
