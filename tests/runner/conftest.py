"""Fixtures for the runner tests: memory stores (the reference semantics) and an SQLite file.

The booking demo's stand-in airline and SMS gateway keep their books in a file under
``AGENTRUN_DEMO_DIR``; every test gets its own, so a second seat shows up as exactly that.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentrun import Backend, open_backend
from agentrun.stores._memory import MemoryBackend
from agentrun.testing.mcp_server import McpBooks
from agentrun.testing.mcp_server import serving as mcp_serving
from tests.runner.models import Kind


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


@pytest.fixture(params=["openai", "anthropic"])
def kind(request: pytest.FixtureRequest) -> Kind:
    """Each test that takes ``kind`` runs once per provider, against the same fake server."""
    kind: Kind = request.param
    return kind


@pytest.fixture
def airline() -> Iterator[McpBooks]:
    """The booking MCP server (``agentrun.testing.mcp_server``) on a loopback port."""
    with mcp_serving() as books:
        yield books
