-- inbox_claim.sql: the PostgreSQL inbox claim, one statement (docs/inbox.md, "The claim").
--
-- It picks up to :batch_size due pending push rows in claim order (scheduled_at, created_at, id),
-- one head per aggregate, none whose aggregate has a push row in `processing`; rows without an
-- aggregate are their own group.
--
-- A template: {T} is the inbox table and {id}, {state}, ... its columns, as mapped
-- (RenderInboxSql); :name is a parameter (NamedSql; postgres_inbox_store.cc binds them):
--   :batch_size    rows to claim at most
--   :lease_ms      lease length (the two-step claim); unused by the forward-due variant but kept,
--                  so every variant takes the same parameters in the same positions
--   :window_rows   rows the window reads (2 x :batch_size)
--   :lane          the lane whose rows the claim takes (only with the flag `lane`)
-- Its variants, by flag (store/sql_template.h):
--   (none)         ClaimPush: the picked rows are claimed under a lease (UPDATE ... RETURNING)
--   forward_due    ForwardDue: they are locked and returned unchanged, for the forward in the
--                  same transaction
--   lane           ForwardDueInLane: as forward_due, restricted to the rows of lane :lane
-- {lane_of(aggregate, id)} is the lane of a row (the caller defines it: kInboxLanes).
--
-- Claimers that could take rows of one aggregate run this one at a time (the advisory locks:
-- the table's key, or its key shared plus the aggregate's lane): each sees the claims committed
-- before it, so two claimers never take two rows of one aggregate.

-- An aggregate none of whose push rows is in `processing` (idx_inbox_aggregate_state).
{define not_busy(agg)}
  NOT EXISTS (SELECT 1 FROM {T} AS b
              WHERE b.{aggregate_id} = {agg} AND b.{state} = 'processing'
                AND b.{consumption} = 'push')
{end define}

WITH RECURSIVE
-- The first :window_rows due pending push rows in claim order (idx_inbox_consumption_pending,
-- then an incremental sort on created_at, id). int4eq(), not `=`, for the lane: the planner gives
-- a function call 1/3 of the rows, but an `=` on an expression without statistics 1/200; with
-- 1/200 it judged the window's ordered read of idx_inbox_push_due too long and sorted every
-- pending row instead (20,000 rows: 17.8 ms against 2.5 ms).
qb_window AS MATERIALIZED (
  SELECT {id} AS qb_id, {aggregate_id} AS qb_agg, {scheduled_at} AS qb_at,
         {created_at} AS qb_created
  FROM {T}
  WHERE {consumption} = 'push' AND {state} = 'pending' AND {scheduled_at} <= clock_timestamp()
    {if lane} AND int4eq({lane_of({aggregate_id}, {id})}, :lane::int) {end if}
  ORDER BY {scheduled_at}, {created_at}, {id} LIMIT :window_rows),

-- The first row of each aggregate in the window (the window is a prefix of the claim order, so
-- that row is the aggregate's head), unless the aggregate is busy.
qb_fast AS MATERIALIZED (
  SELECT qb_id, qb_at, qb_created
  FROM (SELECT w.*, row_number() OVER (PARTITION BY coalesce(w.qb_agg, '#' || w.qb_id::text)
                                       ORDER BY qb_at, qb_created, qb_id) AS qb_n
        FROM qb_window AS w) AS w
  WHERE qb_n = 1 AND (qb_agg IS NULL OR {not_busy(w.qb_agg)})
  ORDER BY qb_at, qb_created, qb_id LIMIT :batch_size),

-- Open when qb_fast found fewer than :batch_size rows and the window was full: the window holds
-- long runs of a few aggregates, and heads of others may lie beyond it.
qb_gate AS MATERIALIZED (
  SELECT (SELECT count(*) FROM qb_fast) < :batch_size
         AND (SELECT count(*) FROM qb_window) >= :window_rows AS qb_on),

-- Only when the gate is open: a skip scan over idx_inbox_push_head, one seek per aggregate with
-- a pending push row. It visits every aggregate even in a lane: a lane filter here would read
-- past the index entries of the other lanes' aggregates.
qb_aggs (qb_agg) AS (
  (SELECT {aggregate_id} FROM {T}
   WHERE (SELECT qb_on FROM qb_gate) AND {consumption} = 'push' AND {state} = 'pending'
     AND {aggregate_id} IS NOT NULL
   ORDER BY {aggregate_id} LIMIT 1)
  UNION ALL
  SELECT (SELECT n.{aggregate_id} FROM {T} AS n
          WHERE n.{consumption} = 'push' AND n.{state} = 'pending' AND n.{aggregate_id} > a.qb_agg
          ORDER BY n.{aggregate_id} LIMIT 1)
  FROM qb_aggs AS a WHERE a.qb_agg IS NOT NULL),

-- Each aggregate's first entry (its head) when due and not busy, plus the first :batch_size due
-- rows without an aggregate; the first :batch_size of those in claim order.
qb_slow AS (
  SELECT qb_id
  FROM (SELECT h.*
        FROM qb_aggs AS a
        CROSS JOIN LATERAL (SELECT {id} AS qb_id, {scheduled_at} AS qb_at,
                                   {created_at} AS qb_created
                            FROM {T}
                            WHERE {consumption} = 'push' AND {state} = 'pending'
                              AND {aggregate_id} = a.qb_agg
                            ORDER BY {scheduled_at}, {created_at}, {id} LIMIT 1) AS h
        WHERE a.qb_agg IS NOT NULL
          {if lane} AND int4eq({lane_of(a.qb_agg, NULL::uuid)}, :lane::int) {end if}
          AND h.qb_at <= clock_timestamp() AND {not_busy(a.qb_agg)}
        UNION ALL
        SELECT * FROM (SELECT {id}, {scheduled_at}, {created_at} FROM {T}
                       WHERE (SELECT qb_on FROM qb_gate) AND {consumption} = 'push'
                         AND {state} = 'pending' AND {aggregate_id} IS NULL
                         AND {scheduled_at} <= clock_timestamp()
                         {if lane} AND int4eq({lane_of({aggregate_id}, {id})}, :lane::int) {end if}
                       ORDER BY {scheduled_at}, {created_at}, {id} LIMIT :batch_size) AS u) AS s
  ORDER BY qb_at, qb_created, qb_id LIMIT :batch_size),

qb_pick AS (
  SELECT qb_id FROM qb_fast WHERE NOT (SELECT qb_on FROM qb_gate)
  UNION ALL
  SELECT qb_id FROM qb_slow)

-- The picked rows (primary-key lookups) that are still pending push rows. The ids come as an
-- array and the state test is wrapped in IS TRUE so that the only index that can serve it is
-- the primary key: on a table without statistics (a fresh inbox that just took a burst) the
-- planner otherwise scanned idx_inbox_push_due's every pending row once per picked row (4 s for
-- 100 picks over 20,000 rows, 10 ms this way).
{define still_pending(l)}
  {l}.{id} = ANY (ARRAY(SELECT qb_id FROM qb_pick))
  AND ({l}.{consumption} = 'push' AND {l}.{state} = 'pending') IS TRUE
{end define}

{if forward_due}
-- ForwardDue: locked until the transaction ends (SKIP LOCKED), unchanged; :lease_ms stands in
-- for the claim token.
SELECT l.{id}::text, l.{source}, l.{idempotency_key}, l.{aggregate_id}, l.{event_type},
       l.{correlation_id}, l.{headers}::text, l.{attempt}, :lease_ms::bigint::text,
       to_char(l.{created_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
       to_char(l.{scheduled_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
FROM {T} AS l
WHERE {still_pending(l)}
FOR UPDATE OF l SKIP LOCKED
{else}
-- ClaimPush: locked (SKIP LOCKED) and claimed under a lease of :lease_ms.
, qb_locked AS (
  SELECT l.{id} AS qb_id FROM {T} AS l
  WHERE {still_pending(l)}
  FOR UPDATE OF l SKIP LOCKED)
UPDATE {T} AS u
SET {state} = 'processing', {claimed_at} = clock_timestamp(), {claim_token} = gen_random_uuid(),
    {lease_expires_at} = clock_timestamp() + :lease_ms::bigint * interval '1 millisecond'
FROM qb_locked
WHERE u.{id} = qb_locked.qb_id
RETURNING u.{id}::text, u.{source}, u.{idempotency_key}, u.{aggregate_id}, u.{event_type},
  u.{correlation_id}, u.{headers}::text, u.{attempt}, u.{claim_token}::text,
  to_char(u.{created_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
  to_char(u.{scheduled_at} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
{end if}
