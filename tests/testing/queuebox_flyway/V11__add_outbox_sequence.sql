-- QueueBox V11 (PostgreSQL): insert order of outbox rows. Rows already there are numbered after
-- a base value in (created_at, id) order; new rows draw from outbox_sequence_seq.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS sequence BIGINT;

WITH base AS (
    SELECT COALESCE(MAX(sequence), 0) AS value FROM outbox
), numbered AS (
    SELECT id, row_number() OVER (ORDER BY created_at, id) AS n
    FROM outbox
    WHERE sequence IS NULL
)
UPDATE outbox
SET sequence = base.value + numbered.n
FROM base, numbered
WHERE outbox.id = numbered.id;

CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT OWNED BY outbox.sequence;
SELECT setval('outbox_sequence_seq', COALESCE((SELECT MAX(sequence) FROM outbox), 0) + 1, false);

ALTER TABLE outbox ALTER COLUMN sequence SET DEFAULT nextval('outbox_sequence_seq');
ALTER TABLE outbox ALTER COLUMN sequence SET NOT NULL;

CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing');
