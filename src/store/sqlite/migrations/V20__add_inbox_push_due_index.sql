-- V20 (QueueBox C++ only): pending push rows in claim order (scheduled_at, created_at, then the
-- rowid every SQLite index ends with). The relay's batch claim reads its window here, so a claim
-- reads O(batch) entries at any backlog (docs/inbox.md, "The claim"). Small: only pending push
-- rows enter it.
CREATE INDEX IF NOT EXISTS idx_inbox_push_due ON inbox (scheduled_at, created_at)
    WHERE consumption = 'push' AND state = 'pending';
