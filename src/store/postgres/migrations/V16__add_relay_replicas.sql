-- V16 (QueueBox C++ only): the relay replicas that share this outbox, for key affinity
-- (outbox.keyAffinity.enabled). Each replica upserts its row with a heartbeat on the database
-- clock and claims only its share of the keys: hash(key) mod (live replicas) = its rank by
-- replica_id, among the replicas of the same outbox table (database.outboxTableName: relays of
-- different outbox tables in one database never count each other). A replica is live while expires_at lies ahead; a graceful stop deletes its row,
-- heartbeats delete rows expired for over a minute. Nothing else reads or writes this table, and
-- dropping it only turns key affinity off (every replica then claims every key). There is no
-- V15 on PostgreSQL: V15 is SQLite's late copy of V14's index (docs/schema.md).
CREATE TABLE IF NOT EXISTS queuebox_relay_replicas (
    replica_id   UUID PRIMARY KEY,
    outbox_table VARCHAR(128) NOT NULL,
    name         VARCHAR(255) NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);
