-- V21: placeholder. On PostgreSQL this version makes the outbox id default time-ordered (UUID
-- version 7); SQLite cannot change a column default without rebuilding the table, so this
-- version records its number and changes nothing. It keeps the version numbers aligned.
SELECT 1;
