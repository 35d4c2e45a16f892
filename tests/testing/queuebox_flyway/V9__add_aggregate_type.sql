-- QueueBox V9 (PostgreSQL): the kind of business entity of an outbox row.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS aggregate_type VARCHAR(255);
