"""Store adapters: memory (tests), SQLite (embedded default), Redis and PostgreSQL.

Each backend module imports its driver lazily, so ``import agentrun`` works with none installed.
"""
