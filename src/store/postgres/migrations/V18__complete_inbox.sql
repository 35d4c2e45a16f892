-- V18 (QueueBox C++ only): the inbox on databases that applied V2, V5, V8 and V10 while they were
-- placeholders and V3 and V6 without their inbox part (QueueBox C++ before the inbox). Creates
-- the table, each column and each index when missing, so every database ends with QueueBox's
-- final inbox (docs/schema.md): a no-op where V2-V10 created it, or where QueueBox did.
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
    claimed_at TIMESTAMP WITH TIME ZONE,
    correlation_id VARCHAR(128),
    claim_token UUID,
    lease_expires_at TIMESTAMPTZ,
    consumption VARCHAR(4) NOT NULL DEFAULT 'push' CHECK (consumption IN ('push', 'pull')),
    scheduled_at TIMESTAMPTZ NOT NULL DEFAULT CURRENT_TIMESTAMP,
    attempt INT NOT NULL DEFAULT 0,
    last_error TEXT,
    headers JSONB NOT NULL DEFAULT '{}',
    CONSTRAINT uq_inbox_source_idempotency UNIQUE (source, idempotency_key)
);

ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS correlation_id VARCHAR(128);
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS consumption VARCHAR(4) NOT NULL DEFAULT 'push'
    CHECK (consumption IN ('push', 'pull'));
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS scheduled_at TIMESTAMPTZ NOT NULL
    DEFAULT CURRENT_TIMESTAMP;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS last_error TEXT;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS headers JSONB NOT NULL DEFAULT '{}';

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

COMMENT ON TABLE inbox IS 'Idempotent inbox: messages received from sources, stored once per (source, idempotency_key).';
COMMENT ON COLUMN inbox.state IS 'pending | processing | processed | dead';
