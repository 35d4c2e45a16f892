-- V3: claim time (QueueBox V3__add_claimed_at.sql). Re-runnable.
ALTER TABLE outbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
CREATE INDEX IF NOT EXISTS idx_outbox_processing_claimed ON outbox (claimed_at)
    WHERE state = 'processing';

-- The inbox part, when the inbox exists (a database baselined past V2 without one gets it from
-- V18). Earlier releases applied the outbox part alone; the migrator accepts that file's checksum
-- for V3, and V18 completes the inbox on such databases.
DO $$
BEGIN
  IF to_regclass('inbox') IS NOT NULL THEN
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS claimed_at TIMESTAMP WITH TIME ZONE;
    CREATE INDEX IF NOT EXISTS idx_inbox_processing_claimed ON inbox (claimed_at)
        WHERE state = 'processing';
    CREATE INDEX IF NOT EXISTS idx_inbox_state_created ON inbox (state, created_at);
  END IF;
END
$$;
