"""Fixtures for the PostgreSQL store tests: one real server per session, schema applied by psql.

The schema is applied the way a person would: the published DDL handed to ``psql``. Tests
isolate themselves by tenant (the conformance suites) or by table names of their own, so one
database serves the session. Each test opens its own pool, because a pool belongs to the event
loop it was made on and pytest-asyncio gives every test a fresh loop.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from agentrun import Backend
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA, open_backend
from tests.support.postgres_server import PostgresServer, postgres_server


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    with postgres_server() as server:
        yield server


@pytest.fixture(scope="session")
def postgres_url(postgres: PostgresServer) -> str:
    url = postgres.create_database("agentrun")
    postgres.psql(EXPECTED_CHECKPOINT_SCHEMA, "agentrun")
    return url


@pytest.fixture
async def backend(postgres_url: str) -> AsyncIterator[Backend]:
    async with await open_backend(postgres_url) as opened:
        yield opened
