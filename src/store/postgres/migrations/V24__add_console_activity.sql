-- V24 (QueueBox C++ only): the console's sent and dead messages per minute over every replica
-- (docs/console.md "Overview"). Each relay process adds its own counts to its own row of the
-- current minute (database clock) every few seconds, so replicas never write the same row; the
-- overview sums the rows of the last minutes by minute. Rows older than an hour are deleted by
-- the writers. `minute` is minutes since the epoch. Dropping the table only turns the overview's
-- figures back to this replica's own.
CREATE TABLE IF NOT EXISTS queuebox_console_activity (
    outbox_table VARCHAR(128) NOT NULL,
    minute       BIGINT NOT NULL,
    replica_id   VARCHAR(64) NOT NULL,
    sent         BIGINT NOT NULL DEFAULT 0,
    dead         BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (outbox_table, minute, replica_id)
);
