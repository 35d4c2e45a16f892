-- V12 (QueueBox C++ only): serves the claim's ORDER BY scheduled_at, sequence ... LIMIT over
-- pending rows from an index, so a claim costs O(batch), not O(backlog). docs/schema.md has the
-- EXPLAIN ANALYZE plans.
CREATE INDEX IF NOT EXISTS idx_outbox_pending_due ON outbox (scheduled_at, sequence)
    WHERE state = 'pending';
