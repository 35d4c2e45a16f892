-- V9: kind of business entity (QueueBox V9).
ALTER TABLE outbox ADD COLUMN aggregate_type TEXT CHECK (aggregate_type IS NULL OR length(aggregate_type) <= 255);
