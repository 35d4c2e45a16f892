-- V26 (QueueBox C++ only): retention AGE of sent rows reads the oldest ones in index order.
-- Its statement (`state = 'sent' AND updated_at < cutoff ORDER BY updated_at LIMIT batchSize`)
-- had no index for sent rows, so every batch read and sorted the whole table: on a busy outbox
-- each batch grew slower with the table and retention fell behind the producers (the soak,
-- bench/README.md "Soak"). Partial: only sent rows enter it, as dead rows enter
-- idx_outbox_dead_updated (V23).
CREATE INDEX IF NOT EXISTS idx_outbox_sent_updated ON outbox (updated_at)
    WHERE state = 'sent';
