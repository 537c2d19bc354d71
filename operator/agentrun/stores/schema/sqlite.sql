-- The agentrun SQLite schema, version 3 (the version is recorded in agentrun_schema).
--
-- The embedded default is a file the kit owns, so the kit applies this script itself when it
-- opens a new file: every statement is idempotent and all of them run in one transaction. A file
-- of an older version is migrated forward by the kit (see stores/_sqlite/schema.py).
--
-- Keys are the (tenant, run_id) text columns themselves, so no two runs can share a key.
-- Times are integer microseconds since the Unix epoch on the database's own clock
-- (julianday('now'), millisecond resolution); a caller's clock never reaches these columns.
-- Tables are STRICT, so every value read back has the type written here.

CREATE TABLE IF NOT EXISTS agentrun_schema (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    version INTEGER NOT NULL
) STRICT;

-- One fence high-water mark per run, shared by every table below. A lease acquisition raises
-- it; every fenced write checks fence >= highest and raises it in the same transaction. It is
-- never lowered: releasing a lease and forgetting a run leave it where it is.
CREATE TABLE IF NOT EXISTS agentrun_fences (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    highest INTEGER NOT NULL,
    PRIMARY KEY (tenant, run_id)
) STRICT;

-- The run's latest frontier (one per run) and the fence it was written under.
CREATE TABLE IF NOT EXISTS agentrun_checkpoints (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    fence INTEGER NOT NULL,
    payload BLOB NOT NULL,
    PRIMARY KEY (tenant, run_id)
) STRICT;

-- The run's lease; it is live while expires_us is ahead of the database's clock.
CREATE TABLE IF NOT EXISTS agentrun_leases (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    holder TEXT NOT NULL,
    fence INTEGER NOT NULL CHECK (fence >= 1),
    expires_us INTEGER NOT NULL,
    PRIMARY KEY (tenant, run_id)
) STRICT;

-- Tool-call intents and outcomes. A claim without expires_us never expires. call_id and tool
-- name the call that made the claim (NULL for records that are no call's: approvals, the
-- resume claim, a person's answer).
CREATE TABLE IF NOT EXISTS agentrun_idempotency (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('in_flight', 'completed')),
    holder TEXT NOT NULL,
    fence INTEGER NOT NULL,
    outcome TEXT,
    expires_us INTEGER,
    call_id TEXT,
    tool TEXT,
    PRIMARY KEY (tenant, run_id, key)
) STRICT;

-- Transcript segments, content-addressed: handle is 'sha256:' and the digest of segment.
CREATE TABLE IF NOT EXISTS agentrun_history (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    handle TEXT NOT NULL,
    segment BLOB NOT NULL,
    PRIMARY KEY (tenant, run_id, handle)
) STRICT;

-- What each run has spent, one row per charge so a retried charge is counted once.
CREATE TABLE IF NOT EXISTS agentrun_charges (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    charge_id TEXT NOT NULL,
    micros INTEGER NOT NULL,
    PRIMARY KEY (tenant, run_id, charge_id)
) STRICT;

-- The running total of agentrun_charges per run, written in the transaction of each charge, so
-- a charge never re-reads the run's earlier ones. A run charged before version 2 has no row
-- until its next charge, which sums its charges once.
CREATE TABLE IF NOT EXISTS agentrun_spent (
    tenant TEXT NOT NULL,
    run_id TEXT NOT NULL,
    micros INTEGER NOT NULL,
    PRIMARY KEY (tenant, run_id)
) STRICT;

-- Quotas (version 3): the runs admitted into each scope, with the fence each was admitted under.
-- A scope's count is the number of its rows, read and written in one transaction.
CREATE TABLE IF NOT EXISTS agentrun_quota_admissions (
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    fence INTEGER NOT NULL,
    PRIMARY KEY (tenant, scope, run_id)
) STRICT;

-- A scope's budget per window: settled spend and open reservations, in micros and tokens. The
-- row counts as absent once expires_us has passed on the database's clock (every write pushes
-- it ttl ahead); the writes of a scope delete its expired rows.
CREATE TABLE IF NOT EXISTS agentrun_quota_windows (
    tenant TEXT NOT NULL,
    scope TEXT NOT NULL,
    window_key TEXT NOT NULL,
    spent_micros INTEGER NOT NULL CHECK (spent_micros >= 0),
    spent_tokens INTEGER NOT NULL CHECK (spent_tokens >= 0),
    reserved_micros INTEGER NOT NULL CHECK (reserved_micros >= 0),
    reserved_tokens INTEGER NOT NULL CHECK (reserved_tokens >= 0),
    expires_us INTEGER NOT NULL,
    PRIMARY KEY (tenant, scope, window_key)
) STRICT;
