"""kopf's internals ``agentrun._compat.kopf`` uses are where it expects them, in the shape it
expects: an upgrade of kopf that moves one fails here, by name."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import kopf
import pytest

from agentrun._compat.kopf import changing_handlers, require_no_finalizer, spawning_handlers


def _registry() -> tuple[kopf.OperatorRegistry, Any, Any]:
    registry = kopf.OperatorRegistry()

    @kopf.daemon("agentrun.dev", "v1alpha1", "agentruns", registry=registry)
    async def spawned(**_: Any) -> None: ...

    @kopf.on.update("agentrun.dev", "v1alpha1", "agentruns", registry=registry)
    def changed(**_: Any) -> None: ...

    return registry, spawned, changed


def test_a_registry_keeps_its_daemons_and_changes_in_private_lists_of_frozen_dataclasses() -> None:
    registry, spawned, changed = _registry()
    assert isinstance(registry._spawning._handlers, list)
    assert isinstance(registry._changing._handlers, list)
    [daemon] = registry._spawning._handlers
    assert daemon.fn is spawned
    assert dataclasses.is_dataclass(daemon)
    assert "requires_finalizer" in {field.name for field in dataclasses.fields(daemon)}
    assert daemon.requires_finalizer is True  # what the decorators set, and what is undone
    assert [h.fn for h in changing_handlers(registry)] == [changed]
    assert [h.fn for h in spawning_handlers(registry)] == [spawned]


def test_a_daemon_can_be_made_to_require_no_finalizer() -> None:
    registry, spawned, _ = _registry()
    require_no_finalizer(registry, spawned)
    [daemon] = spawning_handlers(registry)
    assert daemon.fn is spawned
    assert daemon.requires_finalizer is False
    with pytest.raises(LookupError):
        require_no_finalizer(registry, _registry)


def test_a_timers_handler_says_its_idle() -> None:
    """``_lifecycle.refuse_diff_users`` finds the timers that read the diff base by it."""
    registry = kopf.OperatorRegistry()

    @kopf.timer("agentrun.dev", "v1alpha1", "agents", idle=5, registry=registry)
    def quiet(**_: Any) -> None: ...

    [timer] = spawning_handlers(registry)
    assert timer.fn is quiet
    assert getattr(timer, "idle", None) == 5


def test_kopfs_api_client_decodes_through_its_module_globals() -> None:
    """``decode_with`` replaces ``request`` (whose answers' ``json()`` the other calls await) and
    the module's ``json`` (whose ``loads`` reads each line of a watch): both must still be what
    kopf's client calls, and every other client module must call it through the module."""
    from kopf._cogs.clients import api, errors, fetching, patching, watching

    assert "response = await request(" in inspect.getsource(api.get)
    assert "return await response.json()" in inspect.getsource(api.patch)
    assert "yield json.loads(line.decode('utf-8'))" in inspect.getsource(api.stream)
    for module in (fetching, patching, watching, errors):
        assert "from kopf._cogs.clients.api import" not in inspect.getsource(module)
