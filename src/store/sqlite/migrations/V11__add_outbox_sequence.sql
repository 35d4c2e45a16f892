-- V11: QueueBox adds the `sequence` column here. On SQLite the column is the rowid since V1
-- (docs/adr/0001), so this version adds only the per-key head index of QueueBox V11.
CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing');
