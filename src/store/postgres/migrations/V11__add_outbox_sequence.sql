-- V11: insert order (QueueBox V11__add_outbox_sequence.sql). Existing rows are numbered in
-- (created_at, id) order after the highest number already given; new rows take nextval.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS sequence BIGINT;

CREATE SEQUENCE IF NOT EXISTS outbox_sequence_seq AS BIGINT OWNED BY outbox.sequence;

WITH base AS (
    SELECT COALESCE(MAX(sequence), 0) AS value FROM outbox
), numbered AS (
    SELECT id, row_number() OVER (ORDER BY created_at, id) AS n
    FROM outbox
    WHERE sequence IS NULL
)
UPDATE outbox o
SET sequence = base.value + numbered.n
FROM numbered, base
WHERE o.id = numbered.id;

SELECT setval('outbox_sequence_seq', COALESCE((SELECT MAX(sequence) FROM outbox), 0) + 1, false);

ALTER TABLE outbox ALTER COLUMN sequence SET DEFAULT nextval('outbox_sequence_seq');
ALTER TABLE outbox ALTER COLUMN sequence SET NOT NULL;

CREATE INDEX IF NOT EXISTS idx_outbox_key_sequence ON outbox (key, sequence)
    WHERE state IN ('pending', 'processing');
