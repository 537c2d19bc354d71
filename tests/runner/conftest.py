"""Fixtures for the runner tests: memory stores (the reference semantics) and an SQLite file.

The booking demo's stand-in airline and SMS gateway keep their books in a file under
``AGENTRUN_DEMO_DIR``; every test gets its own, so a second seat shows up as exactly that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from agentrun.stores.memory import MemoryBackend


@pytest.fixture(autouse=True)
def demo_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "demo"
    monkeypatch.setenv("AGENTRUN_DEMO_DIR", str(folder))
    monkeypatch.delenv("AGENTRUN_DEMO_LINGER", raising=False)
    return folder


@pytest.fixture
def memory() -> MemoryBackend:
    return MemoryBackend()


@pytest.fixture
async def sqlite(tmp_path: Path) -> AsyncIterator[Backend]:
    backend = await open_backend(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        yield backend
    finally:
        await backend.close()


@pytest.fixture(params=["memory", "sqlite"])
async def stores(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Each test that takes ``stores`` runs once on memory and once on an SQLite file."""
    if request.param == "memory":
        yield MemoryBackend()
        return
    backend = await open_backend(f"sqlite:///{tmp_path / 'stores.db'}")
    try:
        yield backend
    finally:
        await backend.close()
