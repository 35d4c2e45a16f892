-- V15 (QueueBox C++, SQLite only): due pending rows without a key, in claim order; the same index
-- PostgreSQL adds in V14 (V14 is a placeholder here and stays as it was applied). When the claim's
-- window over idx_outbox_pending_due holds too few heads (one key with a long run of rows ahead of
-- the others), the claim finds keyed heads by a skip scan over idx_outbox_key_sequence and
-- unkeyed rows here, without reading the blocked rows behind the heads. Small: keyed rows never
-- enter it. docs/schema.md and docs/claim-plans.md (SQLite) have the plans.
CREATE INDEX IF NOT EXISTS idx_outbox_pending_unkeyed ON outbox (scheduled_at, sequence)
    WHERE state = 'pending' AND (key IS NULL OR key = '');
