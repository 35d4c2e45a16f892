-- V16 (QueueBox C++ only): PostgreSQL's replica table for key affinity. SQLite has one writer and
-- no key affinity, so this version is recorded and does nothing; it keeps the version numbers of
-- the two dialects meaning the same from here on.
SELECT 1;
