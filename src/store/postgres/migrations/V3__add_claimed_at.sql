-- V3: claim time (QueueBox V3__add_claimed_at.sql, outbox part). Re-runnable.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
CREATE INDEX IF NOT EXISTS idx_outbox_processing_claimed ON outbox (claimed_at)
    WHERE state = 'processing';
