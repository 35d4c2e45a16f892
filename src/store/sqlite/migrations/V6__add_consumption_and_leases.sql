-- V6: claim fence and lease (QueueBox V6, outbox part). claim_token is a lowercase UUID text.
ALTER TABLE outbox ADD COLUMN claim_token TEXT;
ALTER TABLE outbox ADD COLUMN lease_expires_at TEXT;
