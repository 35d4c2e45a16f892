-- V1: the outbox table (mirrors QueueBox V1 with SQLite types; docs/adr/0001).
-- `sequence` is the rowid here (INTEGER PRIMARY KEY AUTOINCREMENT): SQLite cannot add a key
-- column later, so the column QueueBox adds in V11 exists from V1 on SQLite.
-- Timestamps are ISO-8601 UTC text with milliseconds, so they compare correctly as text.
CREATE TABLE IF NOT EXISTS outbox (
    sequence INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE DEFAULT (lower(
        hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
        substr(hex(randomblob(2)), 2) || '-' ||
        substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' ||
        hex(randomblob(6)))),
    topic TEXT NOT NULL CHECK (length(topic) <= 255),
    key TEXT CHECK (key IS NULL OR length(key) <= 255),
    payload TEXT NOT NULL CHECK (json_valid(payload)),
    headers TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(headers)),
    state TEXT NOT NULL DEFAULT 'pending' CHECK (length(state) <= 50),
    attempt INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    scheduled_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE INDEX IF NOT EXISTS idx_outbox_pending_scheduled ON outbox (state, scheduled_at)
    WHERE state = 'pending';
CREATE INDEX IF NOT EXISTS idx_outbox_topic ON outbox (topic);
