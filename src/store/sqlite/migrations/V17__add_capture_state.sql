-- V17: no-op on SQLite. PostgreSQL's V17 adds queuebox_capture_state for change capture
-- (outbox.capture.*), which runs on PostgreSQL only. Recorded so that version numbers mean the
-- same on both dialects.
SELECT 1;
