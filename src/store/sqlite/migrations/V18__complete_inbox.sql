-- V18 (QueueBox C++ only): the inbox on databases that applied V2 while it was a placeholder
-- (QueueBox C++ before the inbox): the same table and indexes as V2, each created when missing,
-- so every database ends with the same inbox (docs/schema.md); a no-op where V2 created it.
CREATE TABLE IF NOT EXISTS inbox (
    id TEXT PRIMARY KEY NOT NULL DEFAULT (lower(
        hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
        substr(hex(randomblob(2)), 2) || '-' ||
        substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' ||
        hex(randomblob(6)))),
    source TEXT NOT NULL CHECK (length(source) <= 255),
    idempotency_key TEXT NOT NULL CHECK (length(idempotency_key) <= 255),
    aggregate_id TEXT CHECK (aggregate_id IS NULL OR length(aggregate_id) <= 255),
    event_type TEXT CHECK (event_type IS NULL OR length(event_type) <= 255),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    state TEXT NOT NULL DEFAULT 'pending' CHECK (length(state) <= 50),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    processed_at TEXT,
    claimed_at TEXT,
    correlation_id TEXT CHECK (correlation_id IS NULL OR length(correlation_id) <= 128),
    claim_token TEXT,
    lease_expires_at TEXT,
    consumption TEXT NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
    scheduled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    attempt INTEGER NOT NULL DEFAULT 0,
    last_error TEXT,
    headers TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(headers)),
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

CREATE INDEX IF NOT EXISTS idx_inbox_pending ON inbox (state) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_source ON inbox (source);
CREATE INDEX IF NOT EXISTS idx_inbox_aggregate_state ON inbox (aggregate_id, state);
CREATE INDEX IF NOT EXISTS idx_inbox_processing_claimed ON inbox (claimed_at)
    WHERE state = 'processing';
CREATE INDEX IF NOT EXISTS idx_inbox_state_created ON inbox (state, created_at);
CREATE INDEX IF NOT EXISTS idx_inbox_consumption_pending ON inbox (consumption, state,
    scheduled_at);
CREATE INDEX IF NOT EXISTS idx_inbox_pull_pending ON inbox (source, scheduled_at, created_at, id)
    WHERE consumption = 'pull' AND state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_pull_busy ON inbox (source, aggregate_id, lease_expires_at)
    WHERE consumption = 'pull' AND state = 'processing';
