-- V10: the received headers of a message (QueueBox V10__add_inbox_headers.sql): a JSON object of
-- strings, copied into the outbox row by the relay. Re-runnable; when the inbox exists (a database
-- baselined past V2 without one gets it from V18).
-- This file replaced a placeholder (SELECT 1) that earlier releases applied; the migrator accepts
-- that placeholder's checksum for V10, and V18 completes the inbox on such databases.
DO $$
BEGIN
  IF to_regclass('inbox') IS NOT NULL THEN
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS headers JSONB NOT NULL DEFAULT '{}';
  END IF;
END
$$;
