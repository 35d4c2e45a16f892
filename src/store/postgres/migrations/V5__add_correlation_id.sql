-- V5: the correlation identifier of a received message (QueueBox V5__add_correlation_id.sql):
-- X-Correlation-Id, sanitised, at most 128 characters. Re-runnable; when the inbox exists (a
-- database baselined past V2 without one gets it from V18).
-- This file replaced a placeholder (SELECT 1) that earlier releases applied; the migrator accepts
-- that placeholder's checksum for V5, and V18 completes the inbox on such databases.
DO $$
BEGIN
  IF to_regclass('inbox') IS NOT NULL THEN
    ALTER TABLE inbox ADD COLUMN IF NOT EXISTS correlation_id VARCHAR(128);
  END IF;
END
$$;
