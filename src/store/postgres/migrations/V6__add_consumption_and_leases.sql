-- V6: claim fence and lease (QueueBox V6__add_consumption_and_leases.sql). Re-runnable.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claim_token UUID;
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;

-- The inbox part: the same fence and lease, who consumes a row (push: the relay forwards it to
-- the outbox; pull: application workers claim it), when it is due, and its failed attempts; when
-- the inbox exists (a database baselined past V2 without one gets it from V18). Earlier releases
-- applied the outbox part alone; the migrator accepts that file's checksum for V6, and V18
-- completes the inbox on such databases.
DO $$
BEGIN
  IF to_regclass('inbox') IS NOT NULL THEN
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claim_token UUID;
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS lease_expires_at TIMESTAMPTZ;
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS consumption VARCHAR(4) NOT NULL DEFAULT 'push'
        CHECK (consumption IN ('push', 'pull'));
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS scheduled_at TIMESTAMPTZ NOT NULL
        DEFAULT CURRENT_TIMESTAMP;
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS attempt INT NOT NULL DEFAULT 0;
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS last_error TEXT;
    CREATE INDEX IF NOT EXISTS idx_inbox_consumption_pending ON inbox (consumption, state,
        scheduled_at);
  END IF;
END
$$;
