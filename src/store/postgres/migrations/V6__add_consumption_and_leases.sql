-- V6: claim fence and lease (QueueBox V6__add_consumption_and_leases.sql, outbox part).
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
