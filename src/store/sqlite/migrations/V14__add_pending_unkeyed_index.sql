-- V14: placeholder. On PostgreSQL this version adds idx_outbox_pending_unkeyed for the claim's
-- fallback behind a hot key (docs/claim-plans.md); the SQLite claim does not use it yet, so this
-- version records its number and changes nothing. It keeps the version numbers aligned.
SELECT 1;
