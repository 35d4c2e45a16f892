-- V12 (QueueBox C++ only): serves the claim's ORDER BY scheduled_at, sequence over pending rows.
CREATE INDEX IF NOT EXISTS idx_outbox_pending_due ON outbox (scheduled_at, sequence)
    WHERE state = 'pending';
