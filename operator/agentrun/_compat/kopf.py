"""kopf's internals the operator relies on (kopf pinned to 1.45 in ``pyproject.toml``;
``tests/compat/test_kopf.py`` fails if an upgrade moves them).

kopf has no public listing of a registry's handlers, nor a decorator argument to register a
daemon or timer without its finalizer: both go through ``OperatorRegistry``'s private
``_spawning`` and ``_changing`` registries, whose handlers are frozen dataclasses of its private
``handlers`` module.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from typing import Any

import kopf
from kopf._core.intents.handlers import ChangingHandler, SpawningHandler


def spawning_handlers(registry: kopf.OperatorRegistry) -> Collection[SpawningHandler]:
    """The daemons' and timers' handlers of ``registry``."""
    return registry._spawning.get_all_handlers()


def changing_handlers(registry: kopf.OperatorRegistry) -> Collection[ChangingHandler]:
    """The on-create, update, resume, delete and field handlers of ``registry``."""
    return registry._changing.get_all_handlers()


def require_no_finalizer(registry: kopf.OperatorRegistry, fn: Callable[..., Any]) -> None:
    """Register the daemon or timer ``fn`` of ``registry`` as requiring no finalizer (the
    decorators always set ``requires_finalizer=True``); raises ``LookupError`` if none is
    registered for ``fn``."""
    handlers = registry._spawning._handlers
    for index, handler in enumerate(handlers):
        if handler.fn is fn:
            handlers[index] = dataclasses.replace(handler, requires_finalizer=False)
            return
    raise LookupError(f"{fn!r} is not a registered kopf daemon or timer")
