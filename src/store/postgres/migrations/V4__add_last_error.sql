-- V4: reason of the last failed delivery (QueueBox V4__add_last_error.sql). Re-runnable.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS last_error TEXT;
