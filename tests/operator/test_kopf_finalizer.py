"""kopf keeps no finalizer of its own on Agents (``_main.keep_no_kopf_finalizer``), nor on runs,
for which it runs no daemon or timer at all: one left by an uninstalled operator would block
their deletion for good."""

from __future__ import annotations

import kopf

from agentrun._compat.kopf import spawning_handlers
from agentrun.operator import _main as main


def _requires_finalizer(fn: object) -> bool | None:
    [handler] = [h for h in spawning_handlers(kopf.get_default_registry()) if h.fn is fn]
    return handler.requires_finalizer


def test_kopf_spawns_nothing_per_run() -> None:
    spawned = {h.fn for h in spawning_handlers(kopf.get_default_registry())}
    assert spawned == {main.probe_agent}


def test_an_agents_probe_timer_requires_none_either() -> None:
    assert _requires_finalizer(main.probe_agent) is False
