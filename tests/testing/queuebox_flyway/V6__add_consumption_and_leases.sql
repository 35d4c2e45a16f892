-- QueueBox V6 (PostgreSQL): claim tokens and leases on both tables; push or pull consumption,
-- due time, attempts and last error on the inbox.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS consumption VARCHAR(4) NOT NULL DEFAULT 'push'
    CHECK (consumption IN ('push', 'pull'));
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS scheduled_at TIMESTAMPTZ NOT NULL
    DEFAULT CURRENT_TIMESTAMP;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS last_error TEXT;

CREATE INDEX IF NOT EXISTS idx_inbox_consumption_pending
    ON inbox (consumption, state, scheduled_at);
