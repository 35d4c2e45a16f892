-- claim.sql: the pull claim (PostgreSQL). Run it alone in a short transaction and commit before
-- any handler starts. It returns the claimed rows; each carries a new claim_token, the fence of
-- every later write of that row.
--
-- Parameters (bind them by name; never splice values into the text):
--   :source      the configured source name whose pull rows are claimed
--   :batch       rows to claim at most (the worker's free capacity), > 0
--   :lease_ms    the lease in milliseconds, > 0
--   :cand_limit  LEAST(GREATEST(3 * :batch, 50), 500), computed by the caller on every call: it
--                bounds each candidate list, so a long backlog of one aggregate costs a bounded
--                scan. It is derived from :batch, not a setting.
--
-- Rules: only rows of :source with consumption 'pull'; a row is claimable when it is pending and
-- due, or processing under an expired lease (a pull claim takes such a row over with a new token;
-- pull has no separate reclaim step); per aggregate only its first row in (scheduled_at,
-- created_at, id) order, and none while another row of the aggregate (same source) holds a live
-- lease; rows without an aggregate are never grouped. Rows another claimer has locked are skipped
-- (SKIP LOCKED), and every check is repeated on the locked row and again in the UPDATE, so a row
-- that changed after the candidate lists were read is not taken. "Now" is clock_timestamp().
WITH candidates AS (
  (SELECT due.id, due.aggregate_id, due.scheduled_at, due.created_at
     FROM inbox AS due
    WHERE due.source = :source AND due.consumption = 'pull'
      AND due.state = 'pending' AND due.scheduled_at <= clock_timestamp()
    ORDER BY due.scheduled_at, due.created_at, due.id
    LIMIT :cand_limit)
  UNION ALL
  (SELECT lapsed.id, lapsed.aggregate_id, lapsed.scheduled_at, lapsed.created_at
     FROM inbox AS lapsed
    WHERE lapsed.source = :source AND lapsed.consumption = 'pull'
      AND lapsed.state = 'processing' AND lapsed.lease_expires_at <= clock_timestamp()
    ORDER BY lapsed.scheduled_at, lapsed.created_at, lapsed.id
    LIMIT :cand_limit)
),
-- Number the candidates within their aggregate; a row without one is a group of its own.
ready AS (
  SELECT c.id, c.aggregate_id, c.scheduled_at, c.created_at,
         row_number() OVER (PARTITION BY coalesce(c.aggregate_id, '#' || c.id::text)
                            ORDER BY c.scheduled_at, c.created_at, c.id) AS place
    FROM candidates AS c
),
-- The head of each group, unless its aggregate is busy (a row of it in flight under a live lease).
eligible AS (
  SELECT r.id, r.scheduled_at, r.created_at
    FROM ready AS r
   WHERE r.place = 1
     AND (r.aggregate_id IS NULL OR NOT EXISTS (
           SELECT 1 FROM inbox AS busy
            WHERE busy.source = :source AND busy.consumption = 'pull'
              AND busy.aggregate_id = r.aggregate_id
              AND busy.state = 'processing' AND busy.lease_expires_at > clock_timestamp()))
   ORDER BY r.scheduled_at, r.created_at, r.id
   LIMIT :batch
),
-- Lock the chosen rows, skipping those another claimer holds; the checks run again on the row.
locked AS (
  SELECT row_.id
    FROM inbox AS row_
    JOIN eligible AS e ON e.id = row_.id
   WHERE row_.source = :source AND row_.consumption = 'pull'
     AND ((row_.state = 'pending' AND row_.scheduled_at <= clock_timestamp())
       OR (row_.state = 'processing' AND row_.lease_expires_at <= clock_timestamp()))
     AND (row_.aggregate_id IS NULL OR NOT EXISTS (
           SELECT 1 FROM inbox AS busy
            WHERE busy.source = :source AND busy.consumption = 'pull'
              AND busy.aggregate_id = row_.aggregate_id
              AND busy.state = 'processing' AND busy.lease_expires_at > clock_timestamp()))
     FOR UPDATE OF row_ SKIP LOCKED
)
UPDATE inbox AS claimed
   SET state = 'processing',
       claim_token = gen_random_uuid(),
       claimed_at = clock_timestamp(),
       lease_expires_at = clock_timestamp() + :lease_ms * INTERVAL '1 millisecond'
  FROM locked
 WHERE claimed.id = locked.id
   AND claimed.source = :source AND claimed.consumption = 'pull'
   AND ((claimed.state = 'pending' AND claimed.scheduled_at <= clock_timestamp())
     OR (claimed.state = 'processing' AND claimed.lease_expires_at <= clock_timestamp()))
   AND (claimed.aggregate_id IS NULL OR NOT EXISTS (
         SELECT 1 FROM inbox AS busy
          WHERE busy.source = :source AND busy.consumption = 'pull'
            AND busy.aggregate_id = claimed.aggregate_id
            AND busy.state = 'processing' AND busy.lease_expires_at > clock_timestamp()))
RETURNING claimed.id, claimed.source, claimed.idempotency_key, claimed.aggregate_id,
          claimed.event_type, claimed.payload, claimed.headers, claimed.attempt,
          claimed.correlation_id, claimed.scheduled_at, claimed.created_at,
          claimed.claim_token, claimed.lease_expires_at;
