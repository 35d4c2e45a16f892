-- V2: the inbox (QueueBox V2__create_inbox.sql): one row per received message. The unique
-- (source, idempotency_key) is the dedup. Re-runnable: a database that QueueBox migrated already
-- has the table.
-- This file replaced a placeholder (SELECT 1) that earlier releases applied; the migrator accepts
-- that placeholder's checksum for V2, and V18 creates the inbox on such databases.
CREATE TABLE IF NOT EXISTS inbox (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    source VARCHAR(255) NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL,
    aggregate_id VARCHAR(255),
    event_type VARCHAR(255),
    payload JSONB NOT NULL,
    state VARCHAR(50) NOT NULL DEFAULT 'pending',
    created_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    processed_at TIMESTAMP WITH TIME ZONE,
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

CREATE INDEX IF NOT EXISTS idx_inbox_pending ON inbox (state) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_source ON inbox (source);
CREATE INDEX IF NOT EXISTS idx_inbox_aggregate_state ON inbox (aggregate_id, state);

COMMENT ON TABLE inbox IS 'Idempotent inbox: messages received from sources, stored once per (source, idempotency_key).';
COMMENT ON COLUMN inbox.state IS 'pending | processing | processed | dead';
