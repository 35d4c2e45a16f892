-- V25 (QueueBox C++ only): the age of the oldest pending row in one index probe (the console's
-- overview, docs/console.md "Indexes"), instead of reading every pending row through
-- idx_outbox_pending_due: with a backlog that read was the slow part of the overview. Partial:
-- only pending rows enter it, as they enter idx_outbox_pending_due.
CREATE INDEX IF NOT EXISTS idx_outbox_pending_created ON outbox (created_at)
    WHERE state = 'pending';
