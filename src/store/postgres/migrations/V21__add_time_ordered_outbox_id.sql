-- V21 (QueueBox C++ only): new outbox rows take a time-ordered id by default, a UUID version 7
-- (RFC 9562: 48 bits of Unix milliseconds, then the version, then random bits), instead of
-- gen_random_uuid(). The column stays UUID and an application that writes its own id keeps
-- doing so. Every claim and every acknowledgement is a non-HOT update that adds a primary-key
-- entry; with random ids each lands on a random leaf of an index that outgrows the CPU caches at
-- a deep backlog, with time-ordered ids on the few rightmost leaves (docs/schema.md, "The id
-- default"; bench/README.md, "Claim cost against the backlog"). PostgreSQL 15 has no uuidv7(),
-- hence the function. PL/pgSQL, not SQL: the planner would inline a SQL body and parse it
-- again for every planned insert, which cost one-row inserts on the simple protocol a quarter of
-- their rate; PL/pgSQL keeps the parsed body for the session.
CREATE OR REPLACE FUNCTION queuebox_uuid_v7() RETURNS uuid
LANGUAGE plpgsql VOLATILE PARALLEL SAFE AS $$
BEGIN
  -- gen_random_uuid()'s 16 random bytes (version 4, RFC 4122 variant), the first 6 replaced by
  -- the Unix milliseconds, the version nibble turned from 4 (0100) into 7 (0111).
  RETURN encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           PLACING substring(int8send(floor(date_part('epoch', clock_timestamp()) * 1000)::bigint)
                             FROM 3)
           FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid;
END
$$;
-- The application's role calls it on every insert without an id: EXECUTE for PUBLIC, as
-- gen_random_uuid() has, also where the DBA revoked it from new functions by default.
GRANT EXECUTE ON FUNCTION queuebox_uuid_v7() TO PUBLIC;
ALTER TABLE outbox ALTER COLUMN id SET DEFAULT queuebox_uuid_v7();
