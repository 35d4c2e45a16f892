-- V3: claim time (QueueBox V3, outbox part).
ALTER TABLE outbox ADD COLUMN claimed_at TEXT;
CREATE INDEX IF NOT EXISTS idx_outbox_processing_claimed ON outbox (claimed_at)
    WHERE state = 'processing';
