"""SQLite keeps a run's transcript whole through compactions, merges, lost commits
and takeovers."""

from __future__ import annotations

from tests.support.chain_faults import ChainFaultsConformance


class TestSqliteChainFaults(ChainFaultsConformance):
    pass
