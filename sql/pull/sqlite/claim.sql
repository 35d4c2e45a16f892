-- claim.sql: the pull claim (SQLite). The same rules as ../postgresql/claim.sql, in SQLite's
-- terms. Run it alone in a write transaction (BEGIN IMMEDIATE) and commit before any handler
-- starts.
--
-- The difference: SQLite has one writer at a time and no row locks, so there is no SKIP LOCKED.
-- BEGIN IMMEDIATE takes the database's write lock before the statement reads anything; a second
-- claimer waits for it (busy timeout) and then sees the first one's claims, so two claims never
-- return one row. Claims of different sources also wait for each other here; they stay
-- independent in what they return. The checks of the candidate lists are repeated in the UPDATE.
--
-- Parameters, bound by name: :source, :batch, :lease_ms, :cand_limit, as the PostgreSQL claim.
-- Times are ISO-8601 UTC text with milliseconds ('2026-01-02T03:04:05.678Z'), which compares
-- correctly as text; "now" is SQLite's clock, the same for the whole statement.
WITH candidates AS (
  SELECT * FROM (
    SELECT due.id, due.aggregate_id, due.scheduled_at, due.created_at
      FROM inbox AS due
     WHERE due.source = :source AND due.consumption = 'pull'
       AND due.state = 'pending'
       AND due.scheduled_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     ORDER BY due.scheduled_at, due.created_at, due.id
     LIMIT :cand_limit)
  UNION ALL
  SELECT * FROM (
    SELECT lapsed.id, lapsed.aggregate_id, lapsed.scheduled_at, lapsed.created_at
      FROM inbox AS lapsed
     WHERE lapsed.source = :source AND lapsed.consumption = 'pull'
       AND lapsed.state = 'processing'
       AND lapsed.lease_expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
     ORDER BY lapsed.scheduled_at, lapsed.created_at, lapsed.id
     LIMIT :cand_limit)
),
ready AS (
  SELECT c.id, c.aggregate_id, c.scheduled_at, c.created_at,
         row_number() OVER (PARTITION BY coalesce(c.aggregate_id, '#' || c.id)
                            ORDER BY c.scheduled_at, c.created_at, c.id) AS place
    FROM candidates AS c
),
eligible AS (
  SELECT r.id
    FROM ready AS r
   WHERE r.place = 1
     AND (r.aggregate_id IS NULL OR NOT EXISTS (
           SELECT 1 FROM inbox AS busy
            WHERE busy.source = :source AND busy.consumption = 'pull'
              AND busy.aggregate_id = r.aggregate_id
              AND busy.state = 'processing'
              AND busy.lease_expires_at > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
   ORDER BY r.scheduled_at, r.created_at, r.id
   LIMIT :batch
)
UPDATE inbox AS claimed
   SET state = 'processing',
       claim_token = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                           substr(hex(randomblob(2)), 2) || '-' ||
                           substr('89ab', 1 + (abs(random()) % 4), 1) ||
                           substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
       claimed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       lease_expires_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now',
                                   printf('%+.3f seconds', :lease_ms / 1000.0))
 WHERE claimed.id IN (SELECT e.id FROM eligible AS e)
   AND claimed.source = :source AND claimed.consumption = 'pull'
   AND ((claimed.state = 'pending'
         AND claimed.scheduled_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
     OR (claimed.state = 'processing'
         AND claimed.lease_expires_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
RETURNING id, source, idempotency_key, aggregate_id, event_type, payload, headers, attempt,
          correlation_id, scheduled_at, created_at, claim_token, lease_expires_at;
