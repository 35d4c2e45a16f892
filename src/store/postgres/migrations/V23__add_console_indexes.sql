-- V23 (QueueBox C++ only): the operator console's reads (docs/console.md). Dead rows newest
-- first by (updated_at, sequence), the console's dead letters page and its counts, without a
-- scan of the table; and the outbox row an inbox row became, by its x-inbox-id header (the
-- inbox lookup). Both are partial: only dead rows and forwarded inbox rows enter them, so the
-- relay's writes of pending and sent rows do not grow.
CREATE INDEX IF NOT EXISTS idx_outbox_dead_updated ON outbox (updated_at, sequence)
    WHERE state = 'dead';
CREATE INDEX IF NOT EXISTS idx_outbox_inbox_id ON outbox ((headers ->> 'x-inbox-id'))
    WHERE headers ? 'x-inbox-id';
