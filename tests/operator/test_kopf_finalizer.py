"""kopf keeps no finalizer of its own on runs or Agents (``main.keep_no_kopf_finalizer``): one
left by an uninstalled operator would block their deletion for good."""

from __future__ import annotations

import kopf

from agentrun.operator import main


def _requires_finalizer(fn: object) -> bool | None:
    handlers = kopf.get_default_registry()._spawning.get_all_handlers()
    [handler] = [each for each in handlers if each.fn is fn]
    return handler.requires_finalizer


def test_a_runs_daemon_requires_no_kopf_finalizer() -> None:
    assert _requires_finalizer(main.run_agent) is False


def test_an_agents_probe_timer_requires_none_either() -> None:
    assert _requires_finalizer(main.probe_agent) is False
