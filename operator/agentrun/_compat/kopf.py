"""kopf's internals the operator relies on (kopf pinned to 1.45 in ``pyproject.toml``;
``tests/compat/test_kopf.py`` fails if an upgrade moves them).

kopf has no public listing of a registry's handlers, nor a decorator argument to register a
daemon or timer without its finalizer: both go through ``OperatorRegistry``'s private
``_spawning`` and ``_changing`` registries, whose handlers are frozen dataclasses of its private
``handlers`` module. Nor has it a setting for how the API server's answers are decoded: its
private ``_cogs.clients.api`` module calls ``json.loads`` on each line of a watch and aiohttp's
``response.json()`` on every other answer.
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable, Collection
from typing import Any

import aiohttp
import kopf
from kopf._cogs.clients import api
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


def decode_with(loads: Callable[[str], Any]) -> None:
    """Make kopf decode every answer of the API server (lists, watch events, patches) with
    ``loads`` instead of ``json.loads``."""
    request = api.request

    async def decoding(*args: Any, **kwargs: Any) -> aiohttp.ClientResponse:
        response = await request(*args, **kwargs)
        response.json = functools.partial(response.json, loads=loads)  # type: ignore[method-assign]
        return response

    api.request = decoding
    setattr(api, "json", types.SimpleNamespace(loads=loads))  # noqa: B010 (not exported)
