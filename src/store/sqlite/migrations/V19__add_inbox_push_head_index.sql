-- V19 (QueueBox C++ only): pending push rows by aggregate, each aggregate's rows in claim order
-- (scheduled_at, created_at, then the rowid every SQLite index ends with). The relay's batch
-- claim reads one entry per aggregate here (its head) when the first rows in claim order belong
-- to a few aggregates with long runs, so a hot aggregate never starves the others
-- (docs/inbox.md, "The claim"). Small: only pending push rows enter it.
CREATE INDEX IF NOT EXISTS idx_inbox_push_head ON inbox (aggregate_id, scheduled_at, created_at)
    WHERE consumption = 'push' AND state = 'pending';
