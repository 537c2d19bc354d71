-- agentrun PostgreSQL schema, version 3. Printed by `agentrun schema postgres`; the kit never
-- applies it: schema changes belong to whatever owns this database's migrations.
-- Apply it with: agentrun schema postgres | psql -v ON_ERROR_STOP=1 "$DATABASE_URL"
-- Every statement is idempotent, and the whole file is one transaction. Applied to a database of
-- version 1 or 2 it migrates it to version 3 (version 3 only adds the quota tables; see
-- "From version 1" below for what version 2 changed); stop the workers of the older kit first,
-- since they would go on writing as their version did.

BEGIN;

-- The version the kit reads at start-up (verify()); one row.
CREATE TABLE IF NOT EXISTS adk_schema_version (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    version    integer     NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
INSERT INTO adk_schema_version (version) VALUES (3)
    ON CONFLICT (singleton) DO UPDATE
    SET version = EXCLUDED.version, applied_at = clock_timestamp()
    WHERE adk_schema_version.version < EXCLUDED.version;

-- The highest fence seen per run, shared by every store: a lease acquisition raises it, and
-- every fenced write checks and raises it in the same statement. Never lowered, never deleted.
CREATE TABLE IF NOT EXISTS adk_run_fences (
    tenant text   NOT NULL,
    run_id text   NOT NULL,
    fence  bigint NOT NULL CHECK (fence >= 0),
    PRIMARY KEY (tenant, run_id)
);

-- One frontier per run: its JSON as UTF-8 bytes, byte for byte what the kit wrote (bytea, not
-- jsonb: jsonb cannot hold a NUL character, which a frontier may carry). Query it in place with
-- convert_from(payload, 'UTF8')::jsonb. Compressed with lz4 where the server has it; see the end.
CREATE TABLE IF NOT EXISTS adk_checkpoints (
    tenant     text        NOT NULL,
    run_id     text        NOT NULL,
    fence      bigint      NOT NULL,
    payload    bytea       NOT NULL,
    written_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (tenant, run_id)
);

-- One lease row per run, kept after release (expired) so the fences it issued stay on record.
CREATE TABLE IF NOT EXISTS adk_run_leases (
    tenant     text        NOT NULL,
    run_id     text        NOT NULL,
    holder     text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence >= 1),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant, run_id)
);

-- Tool-call claims and outcomes; expires_at is NULL for a claim that never expires.
-- claim identifies one successful begin(), so a caller can tell its own claim from another's.
-- outcome is UTF-8 bytes (text cannot hold a NUL character); call_id and tool name the call
-- that made the claim (NULL for records that are no call's: approvals, the resume claim, a
-- person's answer).
CREATE TABLE IF NOT EXISTS adk_idempotency (
    tenant     text        NOT NULL,
    run_id     text        NOT NULL,
    key        text        NOT NULL,
    state      text        NOT NULL CHECK (state IN ('in_flight', 'completed')),
    holder     text        NOT NULL,
    fence      bigint      NOT NULL CHECK (fence >= 0),
    outcome    bytea,
    expires_at timestamptz,
    claim      uuid        NOT NULL,
    call_id    text,
    tool       text,
    PRIMARY KEY (tenant, run_id, key)
);

-- Content-addressed transcript segments (handle = sha256 of the bytes); lz4 as for payload.
CREATE TABLE IF NOT EXISTS adk_history_segments (
    tenant  text  NOT NULL,
    run_id  text  NOT NULL,
    handle  text  NOT NULL,
    segment bytea NOT NULL,
    PRIMARY KEY (tenant, run_id, handle)
);

-- Charges per run, each counted once by its id.
CREATE TABLE IF NOT EXISTS adk_ledger (
    tenant    text   NOT NULL,
    run_id    text   NOT NULL,
    charge_id text   NOT NULL,
    micros    bigint NOT NULL,
    PRIMARY KEY (tenant, run_id, charge_id)
);

-- The running total of adk_ledger per run, written in the transaction of each charge, so a
-- charge never re-reads the run's earlier ones. A run charged under version 1 has no row until
-- its next charge, which sums its charges once.
CREATE TABLE IF NOT EXISTS adk_ledger_totals (
    tenant text   NOT NULL,
    run_id text   NOT NULL,
    spent  bigint NOT NULL,
    PRIMARY KEY (tenant, run_id)
);

-- Quotas (version 3). One row per scope that admissions lock (SELECT ... FOR UPDATE through an
-- upsert) before they count, so concurrent admissions into a scope are taken one at a time.
CREATE TABLE IF NOT EXISTS adk_quota_scopes (
    tenant text NOT NULL,
    scope  text NOT NULL,
    PRIMARY KEY (tenant, scope)
);

-- The runs admitted into each scope, with the fence each was admitted under.
CREATE TABLE IF NOT EXISTS adk_quota_admissions (
    tenant text   NOT NULL,
    scope  text   NOT NULL,
    run_id text   NOT NULL,
    fence  bigint NOT NULL,
    PRIMARY KEY (tenant, scope, run_id)
);

-- A scope's budget per window: settled spend and open reservations. The row counts as absent
-- once expires_at has passed on the server's clock (every write pushes it ttl ahead): the next
-- write of the window starts it from zero, and the scope's writes delete its other expired rows.
CREATE TABLE IF NOT EXISTS adk_quota_windows (
    tenant          text        NOT NULL,
    scope           text        NOT NULL,
    window_key      text        NOT NULL,
    spent_micros    bigint      NOT NULL CHECK (spent_micros >= 0),
    spent_tokens    bigint      NOT NULL CHECK (spent_tokens >= 0),
    reserved_micros bigint      NOT NULL CHECK (reserved_micros >= 0),
    reserved_tokens bigint      NOT NULL CHECK (reserved_tokens >= 0),
    expires_at      timestamptz NOT NULL,
    PRIMARY KEY (tenant, scope, window_key)
);

-- From version 1: the columns version 2 changed or added in tables version 1 created. Each step
-- runs only while it is still to do, so applying this file again changes nothing; a type change
-- rewrites its table under an ACCESS EXCLUSIVE lock, once.
ALTER TABLE adk_idempotency ADD COLUMN IF NOT EXISTS call_id text;
ALTER TABLE adk_idempotency ADD COLUMN IF NOT EXISTS tool text;
DO $$
BEGIN
    IF (SELECT atttypid FROM pg_attribute
        WHERE attrelid = 'adk_checkpoints'::regclass AND attname = 'payload') = 'jsonb'::regtype
    THEN
        EXECUTE 'ALTER TABLE adk_checkpoints ALTER COLUMN payload TYPE bytea '
            'USING convert_to(payload::text, ''UTF8'')';
    END IF;
    IF (SELECT atttypid FROM pg_attribute
        WHERE attrelid = 'adk_idempotency'::regclass AND attname = 'outcome') = 'text'::regtype
    THEN
        EXECUTE 'ALTER TABLE adk_idempotency ALTER COLUMN outcome TYPE bytea '
            'USING convert_to(outcome, ''UTF8'')';
    END IF;
END
$$;

-- Frontiers and transcript segments are compressed with lz4 instead of the default pglz: at
-- 100 KB and more pglz is most of what a write costs, and lz4 is several times faster at it.
-- Compression is a storage attribute, not part of the tables' shape, and re-applying this file
-- adopts lz4 on an existing database: values written from then on
-- are compressed with lz4, values already stored stay as they are and read as before. The ALTER
-- locks its table (ACCESS EXCLUSIVE), so it runs only while the column is not lz4 yet; applying
-- the file again after that locks neither table. A server built without lz4 refuses it with
-- feature_not_supported (0A000): the block then keeps the default and says so in a NOTICE, and
-- the rest of this file applies as usual. So does a server older than PostgreSQL 14, which has
-- no per-column compression; the ALTERs are EXECUTEd so that the block compiles there too.
DO $$
BEGIN
    IF current_setting('server_version_num')::integer < 140000 THEN
        RAISE NOTICE 'agentrun: PostgreSQL % has no per-column compression; '
            'adk_checkpoints.payload and adk_history_segments.segment keep the default',
            current_setting('server_version');
        RETURN;
    END IF;
    IF (SELECT attcompression FROM pg_attribute
        WHERE attrelid = 'adk_checkpoints'::regclass AND attname = 'payload') <> 'l' THEN
        EXECUTE 'ALTER TABLE adk_checkpoints ALTER COLUMN payload SET COMPRESSION lz4';
    END IF;
    IF (SELECT attcompression FROM pg_attribute
        WHERE attrelid = 'adk_history_segments'::regclass AND attname = 'segment') <> 'l' THEN
        EXECUTE 'ALTER TABLE adk_history_segments ALTER COLUMN segment SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'agentrun: this PostgreSQL server was built without lz4; '
        'adk_checkpoints.payload and adk_history_segments.segment keep the default (%)',
        current_setting('default_toast_compression');
END
$$;

COMMIT;
