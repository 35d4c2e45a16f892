-- V16 (QueueBox C++ only): the relay replicas that share this outbox, for key affinity
-- (outbox.keyAffinity.enabled). Each replica upserts its row with a heartbeat on the database
-- clock and claims only its share of the keys: hash(key) mod (live replicas) = its rank by
-- replica_id. A replica is live while expires_at lies ahead; a graceful stop deletes its row,
-- heartbeats delete rows expired for over a minute. Nothing else reads or writes this table, and
-- dropping it only turns key affinity off (every replica then claims every key). There is no
-- V15 on PostgreSQL: V15 is SQLite's late copy of V14's index (docs/schema.md).
CREATE TABLE IF NOT EXISTS queuebox_relay_replicas (
    replica_id   UUID PRIMARY KEY,
    name         VARCHAR(255) NOT NULL,
    started_at   TIMESTAMPTZ NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL,
    expires_at   TIMESTAMPTZ NOT NULL
);
