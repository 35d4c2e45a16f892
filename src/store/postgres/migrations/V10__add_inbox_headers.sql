-- V10: placeholder. In QueueBox this version changes the inbox (or capture) tables only.
-- QueueBox C++ has no inbox yet, so this version records its number and changes nothing; it keeps
-- the version numbers aligned with QueueBox's (reference §3.1). See docs/schema.md.
SELECT 1;
