-- V26 (QueueBox C++ only): PostgreSQL's V26, retention AGE of sent rows in index order.
CREATE INDEX IF NOT EXISTS idx_outbox_sent_updated ON outbox (updated_at)
    WHERE state = 'sent';
