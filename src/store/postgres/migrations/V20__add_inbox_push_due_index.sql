-- V20 (QueueBox C++ only): pending push rows in claim order (scheduled_at, created_at, id). The
-- relay's batch claim reads its window (the first 2 x batchSize due rows) here, so a claim reads
-- O(batch) entries at any backlog instead of sorting every pending row (docs/inbox.md, "The
-- claim"). Small: only pending push rows enter it.
CREATE INDEX IF NOT EXISTS idx_inbox_push_due ON inbox (scheduled_at, created_at, id)
    WHERE consumption = 'push' AND state = 'pending';
