-- V13: placeholder. On PostgreSQL this version adds the LISTEN/NOTIFY trigger of the wake-up
-- (outbox.notify.enabled); SQLite has no LISTEN/NOTIFY, so this version records its number and
-- changes nothing. It keeps the version numbers aligned between the dialects.
SELECT 1;
