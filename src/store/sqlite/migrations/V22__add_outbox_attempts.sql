-- V22 (QueueBox C++ only): the attempt history (outbox.attemptHistory.enabled; docs/schema.md),
-- PostgreSQL's V22 with SQLite types. One row per delivery attempt of an outbox row, and per inbox
-- forward that made its row dead, inserted in the outcome write's transaction; retention deletes
-- a row's attempts with the row.
CREATE TABLE IF NOT EXISTS outbox_attempts (
    message_id  TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    row_table   TEXT NOT NULL DEFAULT 'outbox',
    destination TEXT,
    outcome     TEXT NOT NULL,
    duration_ms INTEGER,
    answer      TEXT,
    error       TEXT,
    recorded_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX IF NOT EXISTS idx_outbox_attempts_message ON outbox_attempts (message_id, recorded_at);
