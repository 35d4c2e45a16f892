-- V24 (QueueBox C++ only): PostgreSQL's V24 with SQLite types: the console's sent and dead
-- messages per minute, one row per outbox table, minute (database clock, minutes since the
-- epoch) and relay process, summed by the overview (docs/console.md "Overview").
CREATE TABLE IF NOT EXISTS queuebox_console_activity (
    outbox_table TEXT NOT NULL,
    minute       INTEGER NOT NULL,
    replica_id   TEXT NOT NULL,
    sent         INTEGER NOT NULL DEFAULT 0,
    dead         INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (outbox_table, minute, replica_id)
);
