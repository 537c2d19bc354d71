"""What PostgreSQL refuses is not retried (``classify.POSTGRES``, by SQLSTATE class): a trigger
that raises, a table the user has no privilege on. The server gives the same answer to the same
call until a person changes something, so neither is ``StoreUnavailableError``.

The tests have a database of their own: a trigger and a role's grants there touch no other test.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import pytest

from agentrun import open_backend
from agentrun._errors import StoreRefusedError
from agentrun.stores._postgres import EXPECTED_CHECKPOINT_SCHEMA
from tests.support.postgres_server import PostgresServer


@pytest.fixture(scope="module")
def refusing(postgres: PostgresServer) -> str:
    """A database whose checkpoints table refuses tenant 'frozen' (a trigger), and a role
    ``reader`` that may read the tables but write none."""
    url = postgres.create_database("refusals")
    postgres.psql(EXPECTED_CHECKPOINT_SCHEMA, "refusals")
    postgres.psql(
        "CREATE FUNCTION frozen() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.tenant = 'frozen' THEN RAISE EXCEPTION 'the tenant is frozen'; END IF; "
        "RETURN NEW; END $$; "
        "CREATE TRIGGER frozen BEFORE INSERT ON adk_checkpoints "
        "FOR EACH ROW EXECUTE FUNCTION frozen(); "
        "CREATE ROLE reader LOGIN; GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader",
        "refusals",
    )
    return url


async def test_a_trigger_that_raises_is_a_refusal(refusing: str) -> None:
    async with await open_backend(refusing) as backend:
        with pytest.raises(StoreRefusedError, match="the tenant is frozen") as refused:
            await backend.checkpoints.put("frozen", "run-1", b"{}", fence=1)
        assert not refused.value.retryable
        await backend.checkpoints.put("acme", "run-1", b"{}", fence=1)


async def test_a_table_without_the_privilege_is_a_refusal(refusing: str) -> None:
    parts = urlsplit(refusing)
    as_reader = urlunsplit(parts._replace(netloc=f"reader@{parts.hostname}:{parts.port}"))
    async with await open_backend(as_reader) as backend:
        assert await backend.checkpoints.latest("acme", "nothing") is None
        with pytest.raises(StoreRefusedError, match="permission denied") as refused:
            await backend.checkpoints.put("acme", "run-2", b"{}", fence=1)
        assert not refused.value.retryable
