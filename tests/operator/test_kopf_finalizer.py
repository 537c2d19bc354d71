"""kopf keeps no finalizer of its own on runs (``main.keep_no_kopf_finalizer``), and still one
on Agents, whose probe timer it stops before they go."""

from __future__ import annotations

import kopf

from agentrun.operator import main


def _requires_finalizer(fn: object) -> bool | None:
    handlers = kopf.get_default_registry()._spawning.get_all_handlers()
    [handler] = [each for each in handlers if each.fn is fn]
    return handler.requires_finalizer


def test_a_runs_daemon_requires_no_kopf_finalizer() -> None:
    assert _requires_finalizer(main.run_agent) is False


def test_an_agents_probe_timer_still_does() -> None:
    assert _requires_finalizer(main.probe_agent) is True
