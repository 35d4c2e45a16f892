-- QueueBox V3 (PostgreSQL): claim time on both tables.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;

CREATE INDEX IF NOT EXISTS idx_outbox_processing_claimed ON outbox (claimed_at)
    WHERE state = 'processing';
CREATE INDEX IF NOT EXISTS idx_inbox_processing_claimed ON inbox (claimed_at)
    WHERE state = 'processing';
CREATE INDEX IF NOT EXISTS idx_inbox_state_created ON inbox (state, created_at);
