-- V9: kind of business entity (QueueBox V9__add_aggregate_type.sql). Re-runnable.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS aggregate_type VARCHAR(255);
