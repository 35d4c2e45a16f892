-- V22 (QueueBox C++ only): the attempt history (outbox.attemptHistory.enabled; docs/schema.md).
-- Every delivery attempt of an outbox row, and every inbox forward that made its row dead, leaves
-- one row here, inserted by the fenced outcome write in the same statement, so it exists exactly
-- when the outcome was written. Append-only; retention deletes a row's attempts with the row.
-- No primary key: nothing updates these rows, and a replayed row starts its attempts at 0 again.
CREATE TABLE IF NOT EXISTS outbox_attempts (
    message_id  UUID NOT NULL,
    attempt     INTEGER NOT NULL,
    row_table   VARCHAR(16) NOT NULL DEFAULT 'outbox',
    destination VARCHAR(255),
    outcome     VARCHAR(16) NOT NULL,
    duration_ms BIGINT,
    answer      VARCHAR(255),
    error       TEXT,
    recorded_at TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT clock_timestamp()
);
-- A message's timeline, and retention's delete by message id.
CREATE INDEX IF NOT EXISTS idx_outbox_attempts_message ON outbox_attempts (message_id, recorded_at);

COMMENT ON TABLE outbox_attempts IS 'Attempt history: one row per delivery attempt (QueueBox C++).';
COMMENT ON COLUMN outbox_attempts.outcome IS 'sent | retry | released | dead';
