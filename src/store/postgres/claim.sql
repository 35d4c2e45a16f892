-- claim.sql: the PostgreSQL claim, one statement (docs/claim.md explains it step by step).
--
-- It claims up to :batch_size due pending rows that head their key (no lower sequence of the key
-- is pending or processing; rows with a NULL or empty key have no order), in claim order
-- (scheduled_at, sequence), locking them FOR UPDATE SKIP LOCKED, and sets the lease on the
-- database clock. O(batch) at any backlog, also behind a hot key.
--
-- A template: {T} is the outbox table and {id}, {state}, ... its columns, as mapped
-- (RenderSql); :name is a parameter (NamedSql; claim_sql.cc binds them):
--   :batch_size            rows to claim at most
--   :lease_ms              lease length
--   :window_rows           rows the window judges (2 x :batch_size)
--   :window_from_at, :window_from_sequence
--                          where the window starts in idx_outbox_pending_due
--   :read_window           false: skip the window (just after a fallback)
--   :walk_after_key        the key walk starts after this key, wrapping around
--   :walk_allowed          false: the key walk rests (after an empty claim)
--   :share_key_count       keys of this replica's share a recent complete walk saw; -1: unknown
--   :replicas, :replica_index
--                          this replica's key share (key affinity); :replicas 1 = every key
--   :strict_bound          only with the flag `strict` (outbox.ordering: strict): a keyed row
--                          with a higher sequence waits, since an open transaction may still
--                          commit a lower sequence of its key (strict_order.h)
-- The window-and-walk inputs come from ClaimWindowState, the share from ReplicaHeartbeat.
--
-- Key affinity: {in_share(<key>)} (defined below, expanded by the template layer,
-- store/sql_template.h) is true when <key> is in this replica's share, wherever a row or key is
-- tested: the row's key, its id when unkeyed. int4eq(a, b) is a = b written as a function call,
-- which the planner estimates to keep a third of the rows instead of 0.5 %; with 0.5 % it read
-- every pending row and sorted them instead of reading the window in index order
-- (docs/claim-plans.md, "Window under key affinity"). The filter comes before any lock, so
-- replicas never lock each other's rows.
--
-- Strict order: with the flag `strict`, {and_strict(<sequence>)} (defined below) adds
-- "AND <sequence> <= :strict_bound" wherever a keyed head is judged ({strict_and(<sequence>)}
-- puts it first, before the head probe); without the flag both add nothing. Unkeyed rows have no
-- order and never wait for it.
--
-- The CTEs are MATERIALIZED so each LIMIT holds once for the statement (a CTE on the inner side
-- of a nested loop would be rescanned, each rescan taking more rows).

{define in_share(share_key)}
  (:replicas::int <= 1
   OR int4eq(mod(hashtext({share_key}) & 2147483647, :replicas::int), :replica_index::int))
{end define}

{define and_strict(seq)}
  {if strict} AND {seq} <= :strict_bound::bigint {end if}
{end define}
{define strict_and(seq)}
  {if strict} {seq} <= :strict_bound::bigint AND {end if}
{end define}

WITH RECURSIVE
-- One database instant per claim: claimed_at, the lease and the re-checks of locked rows.
qb_now AS (SELECT clock_timestamp() AS t),

-- Step 1, the window: this share's due pending rows in claim order, read from
-- idx_outbox_pending_due starting at (:window_from_at, :window_from_sequence), :window_rows of
-- them plus one (the one past tells qb_gate that more lie beyond, without a second scan). The due
-- check uses statement_timestamp(), which the planner can read when it estimates the window (it
-- cannot read qb_now); a row that falls due during the statement waits for the next claim.
qb_win AS MATERIALIZED (
  SELECT w.ctid AS qb_ctid, w.{scheduled_at} AS qb_at, w.{sequence} AS qb_seq, w.{key} AS qb_key
  FROM {T} AS w
  WHERE :read_window::boolean
    AND w.{state} = 'pending' AND w.{scheduled_at} <= statement_timestamp()
    AND (w.{scheduled_at}, w.{sequence}) >= (:window_from_at::timestamptz,
                                              :window_from_sequence::bigint)
    AND {in_share(coalesce(nullif(w.{key}, ''), w.{id}::text))}
  ORDER BY w.{scheduled_at}, w.{sequence}
  LIMIT :window_rows::bigint + 1),

-- The heads among the window's first :window_rows rows, locked SKIP LOCKED, at most
-- :batch_size. Only a key's lowest sequence in the window can head it (the window's rows are
-- pending, so any other row of the key has that one below it): the others are left out before
-- the heap is read, which spares a window full of one hot key a head probe per row. qb_rank
-- orders each key's rows by sequence, keys compared bytewise (COLLATE "C": a grouping, no
-- locale); the window is put back in claim order after it, so the LIMIT below still stops at
-- the first :batch_size heads instead of probing every key. The head check: the locked row is
-- still pending and due (re-evaluated on the newest version when a concurrent update made
-- PostgreSQL re-check it), and no lower row of its key is pending or processing (one probe of
-- idx_outbox_key_sequence).
qb_fast AS MATERIALIZED (
  SELECT head.{id} AS qb_id
  FROM (SELECT w.*, row_number() OVER (PARTITION BY w.qb_key COLLATE "C" ORDER BY w.qb_seq)
                    AS qb_rank
        FROM (SELECT * FROM qb_win ORDER BY qb_at, qb_seq LIMIT :window_rows::bigint) AS w
        ORDER BY w.qb_at, w.qb_seq) AS win
  JOIN {T} AS head ON head.ctid = win.qb_ctid
  WHERE (win.qb_rank = 1 OR win.qb_key IS NULL OR win.qb_key = '')
    AND head.{state} = 'pending' AND head.{scheduled_at} <= (SELECT t FROM qb_now)
    AND (head.{key} IS NULL OR head.{key} = ''
         OR {strict_and(head.{sequence})} (SELECT prior.{sequence} FROM {T} AS prior
             WHERE prior.{key} = head.{key} AND prior.{state} IN ('pending', 'processing')
               AND prior.{sequence} < head.{sequence}
             ORDER BY prior.{key} DESC, prior.{sequence} DESC LIMIT 1) IS NULL)
  ORDER BY win.qb_at, win.qb_seq
  LIMIT :batch_size::int
  FOR UPDATE OF head SKIP LOCKED),

-- The gate to step 2: open when the walk may run, qb_fast found fewer than :batch_size heads,
-- more due rows lie beyond the window (it was full of rows blocked behind their key's head), and
-- the window does not hold a row of every key of the share (:share_key_count keys: then qb_fast
-- already judged every head the walk could find).
qb_gate AS MATERIALIZED (
  SELECT :walk_allowed::boolean
    AND (SELECT count(*) FROM qb_fast) < :batch_size::int
    AND (NOT :read_window::boolean OR (SELECT count(*) FROM qb_win) > :window_rows::bigint)
    AND (NOT :read_window::boolean OR :share_key_count::bigint < 0
         OR (SELECT count(DISTINCT w2.qb_key)
             FROM (SELECT * FROM qb_win ORDER BY qb_at, qb_seq LIMIT :window_rows::bigint) AS w2
             WHERE w2.qb_key <> '') < :share_key_count::bigint)
    AS qb_on),

-- Step 2, the key walk (only when the gate is open): a skip scan over idx_outbox_key_sequence,
-- one probe per key with a pending or processing row, each giving the key's lowest such row (its
-- head). Pass 1 visits the keys after :walk_after_key, pass 2 wraps around from the first key up
-- to it. qb_n counts the candidates so far (pending, due, this share's); the walk stops at
-- :batch_size of them.
qb_keys (qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass, qb_n) AS (
  SELECT f.*,
         CASE WHEN f.qb_state = 'pending' AND f.qb_at <= (SELECT t FROM qb_now)
                   AND {in_share(f.qb_key)} {and_strict(f.qb_seq)}
              THEN 1 ELSE 0 END
  FROM ((SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, 1
         FROM {T} AS k
         WHERE k.{state} IN ('pending', 'processing') AND k.{key} > :walk_after_key::text
           AND (SELECT qb_on FROM qb_gate)
         ORDER BY k.{key}, k.{sequence} LIMIT 1)
        UNION ALL
        (SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, 2
         FROM {T} AS k
         WHERE k.{state} IN ('pending', 'processing') AND k.{key} > ''
           AND k.{key} <= :walk_after_key::text AND (SELECT qb_on FROM qb_gate)
         ORDER BY k.{key}, k.{sequence} LIMIT 1)
        LIMIT 1) AS f(qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass)
  UNION ALL
  -- The next key: three branches, each with its key bounds as index conditions (a bound inside
  -- an OR would be a filter, and the probe would read every entry past :walk_after_key): the
  -- next key in pass 1, the next key up to :walk_after_key in pass 2, and the first key of
  -- pass 2 when pass 1 has run out.
  SELECT nxt.*,
         prev.qb_n
         + CASE WHEN nxt.qb_state = 'pending' AND nxt.qb_at <= (SELECT t FROM qb_now)
                     AND {in_share(nxt.qb_key)} {and_strict(nxt.qb_seq)}
                THEN 1 ELSE 0 END
  FROM qb_keys AS prev
  CROSS JOIN LATERAL (
    (SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, 1
     FROM {T} AS k
     WHERE k.{state} IN ('pending', 'processing') AND k.{key} > prev.qb_key
       AND prev.qb_pass = 1
     ORDER BY k.{key}, k.{sequence} LIMIT 1)
    UNION ALL
    (SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, 2
     FROM {T} AS k
     WHERE k.{state} IN ('pending', 'processing') AND k.{key} > prev.qb_key
       AND prev.qb_pass = 2 AND k.{key} <= :walk_after_key::text
     ORDER BY k.{key}, k.{sequence} LIMIT 1)
    UNION ALL
    (SELECT k.{key}, k.ctid, k.{state}, k.{scheduled_at}, k.{sequence}, 2
     FROM {T} AS k
     WHERE k.{state} IN ('pending', 'processing') AND k.{key} > ''
       AND prev.qb_pass = 1 AND k.{key} <= :walk_after_key::text
     ORDER BY k.{key}, k.{sequence} LIMIT 1)
    LIMIT 1) AS nxt(qb_key, qb_ctid, qb_state, qb_at, qb_seq, qb_pass)
  WHERE prev.qb_n < :batch_size::int),

-- The walk's candidates: the heads it visited that are pending, due and this share's, plus the
-- first :batch_size due unkeyed rows of the share (idx_outbox_pending_unkeyed).
qb_cand AS (
  SELECT qb_ctid, qb_at, qb_seq FROM qb_keys
  WHERE qb_state = 'pending' AND qb_at <= (SELECT t FROM qb_now)
    AND {in_share(qb_key)} {and_strict(qb_seq)}
  UNION ALL
  (SELECT u.ctid, u.{scheduled_at}, u.{sequence}
   FROM {T} AS u
   WHERE u.{state} = 'pending' AND (u.{key} IS NULL OR u.{key} = '')
     AND u.{scheduled_at} <= (SELECT t FROM qb_now) AND (SELECT qb_on FROM qb_gate)
     AND {in_share(u.{id}::text)}
   ORDER BY u.{scheduled_at}, u.{sequence}
   LIMIT :batch_size::int)),

-- The first :batch_size candidates in claim order, locked by ctid SKIP LOCKED (a recursive CTE
-- cannot lock, hence the join), re-checked to be pending and due. No second head probe: the walk
-- read each key's lowest pending or processing row under this statement's snapshot, and the
-- probe would read the same snapshot, so it could only agree.
qb_slow AS MATERIALIZED (
  SELECT head.{id} AS qb_id
  FROM qb_cand AS c
  JOIN {T} AS head ON head.ctid = c.qb_ctid
  WHERE head.{state} = 'pending' AND head.{scheduled_at} <= (SELECT t FROM qb_now)
  ORDER BY c.qb_at, c.qb_seq
  LIMIT :batch_size::int
  FOR UPDATE OF head SKIP LOCKED),

-- The window's heads when the gate stayed closed, else the walk's.
qb_pick AS (
  SELECT qb_id FROM qb_fast WHERE NOT (SELECT qb_on FROM qb_gate)
  UNION ALL
  SELECT qb_id FROM qb_slow)

-- Claim the picked rows: a new claim token, the lease on the database clock.
UPDATE {T} AS o
SET {state} = 'processing', {claim_token} = gen_random_uuid(),
    {claimed_at} = (SELECT t FROM qb_now), {updated_at} = (SELECT t FROM qb_now),
    {lease_expires_at} = (SELECT t FROM qb_now) + :lease_ms::bigint * interval '1 millisecond'
FROM qb_pick
WHERE o.{id} = qb_pick.qb_id
RETURNING
  -- The claimed row (timestamps as ISO-8601 UTC text with microseconds).
  o.{id}::text AS id, o.{topic} AS topic, o.{key} AS key, o.{payload}::text AS payload,
  o.{headers}::text AS headers, o.{aggregate_type} AS aggregate_type, o.{attempt} AS attempt,
  o.{max_attempts} AS max_attempts, o.{sequence} AS sequence,
  o.{claim_token}::text AS claim_token,
  to_char(o.{created_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at,
  to_char(o.{scheduled_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS scheduled_at,
  -- What ClaimWindowState keeps for the next claims (the same on every row).
  -- next_window_from: "<scheduled_at> <sequence>" of this share's first due pending row in the
  -- window (no pending row of the share lies before it); NULL when the window was not read. One
  -- index probe: it reads what qb_win's first row is, without sorting qb_win.
  CASE WHEN :read_window::boolean THEN
    (SELECT to_char(w.{scheduled_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
            || ' ' || w.{sequence}
     FROM {T} AS w
     WHERE :read_window::boolean
       AND w.{state} = 'pending' AND w.{scheduled_at} <= statement_timestamp()
       AND (w.{scheduled_at}, w.{sequence}) >= (:window_from_at::timestamptz,
                                                 :window_from_sequence::bigint)
       AND {in_share(coalesce(nullif(w.{key}, ''), w.{id}::text))}
     ORDER BY w.{scheduled_at}, w.{sequence}
     LIMIT 1)
  END AS next_window_from,
  -- walk_last_key: the key the walk stopped after; NULL when it did not run.
  (SELECT qb_key FROM qb_keys ORDER BY qb_pass DESC, qb_key DESC LIMIT 1) AS walk_last_key,
  -- walk_share_keys: the keys of this share the walk saw, when it went round every key (it
  -- stopped short of :batch_size candidates), saw no head of the share pending but not yet due,
  -- and no due unkeyed row of the share waits; else -1.
  (SELECT CASE WHEN count(*) > 0 AND max(qb_n) < :batch_size::int
                    AND NOT coalesce(bool_or(qb_state = 'pending'
                                             AND qb_at > (SELECT t FROM qb_now)
                                             AND {in_share(qb_key)}),
                                     false)
                    AND NOT EXISTS (
                      SELECT 1 FROM {T} AS u
                      WHERE u.{state} = 'pending' AND (u.{key} IS NULL OR u.{key} = '')
                        AND u.{scheduled_at} <= (SELECT t FROM qb_now)
                        AND {in_share(u.{id}::text)})
               THEN count(*) FILTER (WHERE {in_share(qb_key)})
               ELSE -1 END
   FROM qb_keys) AS walk_share_keys,
  -- window_keys: when the walk ran, the keys among the window's first :window_rows rows.
  CASE WHEN (SELECT qb_on FROM qb_gate) THEN
    (SELECT count(DISTINCT w2.qb_key)
     FROM (SELECT * FROM qb_win ORDER BY qb_at, qb_seq LIMIT :window_rows::bigint) AS w2
     WHERE w2.qb_key <> '')
  END AS window_keys
