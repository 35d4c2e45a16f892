-- V25 (QueueBox C++ only): PostgreSQL's V25, the oldest pending row in one index probe (the
-- console's overview, docs/console.md "Indexes").
CREATE INDEX IF NOT EXISTS idx_outbox_pending_created ON outbox (created_at)
    WHERE state = 'pending';
