-- V8: the indexes of the pull claim (QueueBox V8__add_pull_claim_indexes.sql): due pending pull
-- rows of a source in claim order, and the busy aggregates of a source. Re-runnable; when the
-- inbox exists (a database baselined past V2 without one gets it from V18).
-- This file replaced a placeholder (SELECT 1) that earlier releases applied; the migrator accepts
-- that placeholder's checksum for V8, and V18 completes the inbox on such databases.
DO $$
BEGIN
  IF to_regclass('inbox') IS NOT NULL THEN
    CREATE INDEX IF NOT EXISTS idx_inbox_pull_pending ON inbox (source, scheduled_at,
        created_at, id) WHERE consumption = 'pull' AND state = 'pending';
    CREATE INDEX IF NOT EXISTS idx_inbox_pull_busy ON inbox (source, aggregate_id,
        lease_expires_at) WHERE consumption = 'pull' AND state = 'processing';
  END IF;
END
$$;
