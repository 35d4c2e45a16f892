-- QueueBox V4 (PostgreSQL): the reason of the last failed delivery.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS last_error TEXT;
