-- QueueBox V2 (PostgreSQL): the inbox; (source, idempotency_key) is the deduplication.
CREATE TABLE IF NOT EXISTS inbox (
    id              UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    source          VARCHAR(255) NOT NULL,
    idempotency_key VARCHAR(255) NOT NULL,
    aggregate_id    VARCHAR(255),
    event_type      VARCHAR(255),
    payload         JSONB NOT NULL,
    state           VARCHAR(50) NOT NULL DEFAULT 'pending',
    created_at      TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT CURRENT_TIMESTAMP,
    processed_at    TIMESTAMP WITH TIME ZONE,
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

CREATE INDEX IF NOT EXISTS idx_inbox_pending ON inbox (state) WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_inbox_source ON inbox (source);
CREATE INDEX IF NOT EXISTS idx_inbox_aggregate_state ON inbox (aggregate_id, state);
