-- V4: reason of the last failed delivery (QueueBox V4).
ALTER TABLE outbox ADD COLUMN last_error TEXT;
