-- V23 (QueueBox C++ only): PostgreSQL's V23 (the operator console's reads, docs/console.md):
-- dead rows newest first, and the outbox row an inbox row became by its x-inbox-id header.
-- json_valid first: json_extract fails on text that is not JSON, and a row whose CHECK was
-- bypassed (or a table adopted without it) must neither fail this migration nor its insert.
CREATE INDEX IF NOT EXISTS idx_outbox_dead_updated ON outbox (updated_at, sequence)
    WHERE state = 'dead';
CREATE INDEX IF NOT EXISTS idx_outbox_inbox_id ON outbox (json_extract(headers, '$."x-inbox-id"'))
    WHERE json_valid(headers) AND json_extract(headers, '$."x-inbox-id"') IS NOT NULL;
