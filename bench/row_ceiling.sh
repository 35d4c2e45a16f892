#!/usr/bin/env bash
# The row-work ceiling of an outbox drain on this machine's PostgreSQL (issue 6 item 3): the least
# database work any relay on this table must do per message, run as fast as the server goes.
#
#   bash bench/row_ceiling.sh DATABASE_URL [STREAMS] [BATCH]   # prints one JSON object
#
# DATABASE_URL holds a migrated `outbox` table full of pending rows. STREAMS sessions (default 2,
# one per core here) each loop, server-side in one DO block, until a claim finds nothing:
#   claim: UPDATE BATCH pending rows (picked FOR UPDATE SKIP LOCKED in (scheduled_at, sequence)
#          order) to `processing` with a claim token and a lease, as every relay must (the lease is
#          what makes a crash lose nothing); COMMIT;
#   ack:   UPDATE those ids to `sent`; COMMIT.
# Nothing else: no per-key order (no head check), no fence on the acknowledgement, no client round
# trip, no delivery, no relay or receiver process on the cores. Both updates are non-HOT (`state`
# is in the partial indexes' predicates), as they are for the relay, since the schema is QueueBox's.
# So a relay that keeps per-key order, fences its acknowledgements and delivers over HTTP on the
# same machine drains slower than this, whatever its design; a target above it cannot be met here.
#
# Timed on the database clock: from just before the sessions start to max(updated_at) of the sent
# rows. Also the CPU the sessions' backends spent (utime + stime from /proc, read while each backend
# still lives; the server runs on this machine), per message: the database's share of a core that
# any relay on this schema costs. The rows are left `sent`.
set -euo pipefail
URL=$1
STREAMS=${2:-2}
BATCH=${3:-500}
total=$(psql -Atq "$URL" -c "SELECT count(*) FROM outbox WHERE state = 'pending'")
t0=$(psql -Atq "$URL" -c "SELECT extract(epoch FROM clock_timestamp())")
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
pids=()
for ((s = 0; s < STREAMS; s++)); do
  psql -Atq -v ON_ERROR_STOP=1 "$URL" >/dev/null <<SQL &
SELECT pg_backend_pid() \\g $WORK/pid.$s
DO \$\$
DECLARE ids uuid[];
BEGIN
  LOOP
    WITH picked AS (
      SELECT id FROM outbox WHERE state = 'pending' AND scheduled_at <= clock_timestamp()
      ORDER BY scheduled_at, sequence LIMIT $BATCH FOR UPDATE SKIP LOCKED),
    claimed AS (
      UPDATE outbox AS o SET state = 'processing', claim_token = gen_random_uuid(),
        claimed_at = clock_timestamp(), updated_at = clock_timestamp(),
        lease_expires_at = clock_timestamp() + interval '60 seconds'
      FROM picked WHERE o.id = picked.id RETURNING o.id)
    SELECT array_agg(id) INTO ids FROM claimed;
    COMMIT;
    EXIT WHEN ids IS NULL;
    UPDATE outbox SET state = 'sent', updated_at = clock_timestamp(), claim_token = NULL,
      lease_expires_at = NULL WHERE id = ANY (ids);
    COMMIT;
  END LOOP;
END
\$\$;
\\! touch $WORK/done.$s
SELECT pg_sleep(5);
SQL
  pids+=($!)
done
ticks=0
for ((s = 0; s < STREAMS; s++)); do
  while [ ! -e "$WORK/done.$s" ]; do sleep 0.02; done
  ticks=$((ticks + $(awk '{print $14 + $15}' "/proc/$(cat "$WORK/pid.$s")/stat")))
done
cpu_s=$(echo "$ticks $(getconf CLK_TCK)" | awk '{printf "%.3f", $1 / $2}')
for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
psql -Atq "$URL" -c "SELECT json_build_object('rows', count(*), 'pending_before', $total,
    'streams', $STREAMS, 'batch', $BATCH, 'backend_cpu_s', $cpu_s,
    'backend_cpu_us_per_msg', round($cpu_s * 1000000 / greatest(count(*), 1), 1),
    'seconds', round((extract(epoch FROM max(updated_at)) - $t0)::numeric, 3),
    'msg_per_s', round(count(*) / (extract(epoch FROM max(updated_at)) - $t0)::numeric, 1))
  FROM outbox WHERE state = 'sent'"
