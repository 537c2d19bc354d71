"""Conformance suites a store author subclasses to prove a store keeps the kit's guarantees.

Each suite is a pytest base class. A subclass (named ``Test...``) provides a ``backend`` fixture
yielding a ``Backend`` (the suite tests the store it is about), or a ``store`` fixture yielding
one store on its own; where its clock can be moved, it overrides ``pass_time``. By default time
passes for real, so the TTLs the suites use are short. Tests isolate themselves by
tenant, so one database may serve the whole suite. The suites need pytest and pytest-asyncio, which
the ``testing`` extra brings (``pip install 'agentrun[testing]'``).

Checkpoint payloads in the suites are JSON documents (what ``_frontier.encode`` produces) and are
compared as JSON, so a store may keep them as ``jsonb``.

Beside the suites, for tests and demos, imported from their own modules (they need the runner,
and the servers the ``agents`` extra and aiohttp): ``model_server`` (a fake model endpoint on
loopback speaking OpenAI's and Anthropic's wire formats), ``mcp_server`` (a real MCP server with
booking tools), ``settle_services`` (a payment API that honours idempotency keys, for settling
undecidable calls) and ``worker`` (``start_or_resume``: what a worker process a crash test kills and
starts again runs, and how it reports the run's ending).
"""

from agentrun.testing.checkpoints import CheckpointStoreConformance, RunListerConformance
from agentrun.testing.clock import ManualClock
from agentrun.testing.commits import CommitStoreConformance, RunReaderConformance
from agentrun.testing.history import HistoryStoreConformance, SegmentListerConformance
from agentrun.testing.hostile import HOSTILE_IDS
from agentrun.testing.idempotency import IdempotencyStoreConformance
from agentrun.testing.leases import LeaseStoreConformance
from agentrun.testing.ledger import ChargeListerConformance, LedgerConformance
from agentrun.testing.quotas import QuotaStoreConformance

__all__ = [
    "HOSTILE_IDS",
    "ChargeListerConformance",
    "CheckpointStoreConformance",
    "CommitStoreConformance",
    "HistoryStoreConformance",
    "IdempotencyStoreConformance",
    "LeaseStoreConformance",
    "LedgerConformance",
    "ManualClock",
    "QuotaStoreConformance",
    "RunListerConformance",
    "RunReaderConformance",
    "SegmentListerConformance",
]
