#!/usr/bin/env bash
# `queuebox verify` on a large outbox (issue 35 item 2: at most 10 s on 1,000,000 rows).
#
#   bash bench/verify_bench.sh QUEUEBOX_BIN POSTGRES_ADMIN_URL [ROWS] [RUNS]
#
# Creates a scratch database (queuebox_verify_bench) beside POSTGRES_ADMIN_URL's and a SQLite
# file, migrates both with `queuebox migrate`, fills each outbox with ROWS rows (default 1000000)
# over 10,000 keys the way a busy relay leaves it: 98 % sent in key order, 1 % pending (the key
# heads and the rows behind them), 0.5 % dead with a reason, 0.5 % processing under a live lease,
# (PostgreSQL) 10,000 forwarded inbox rows with their outbox rows, and one recorded attempt per
# sent or dead row (outbox.attemptHistory on, so the attempt-history check reads them all). Then
# times RUNS runs (default 3) of `queuebox verify` and of `queuebox verify --received FILE` (a
# JSON line per sent row, as `queuebox receive` writes them) on each; every run must exit 0.
# Prints one line per run:
#   <dialect> <plain|received> run <n>: <r> s wall, <u> s user, <s> s sys, exit <code>
# The check is read-only, so fsync makes no difference to it; the figures are wall-clock time of
# the whole command (configuration, connection, every statement, the report).
set -euo pipefail
BIN=$1
ADMIN=$2
ROWS=${3:-1000000}
RUNS=${4:-3}
WORK=$(mktemp -d)
# KEEP=1 keeps the scratch database, the SQLite file and the configurations (for EXPLAIN).
if [ -n "${KEEP:-}" ]; then
  trap 'echo "kept: $WORK (pg.yml, sqlite.yml, outbox.db), database queuebox_verify_bench"' EXIT
else
  trap 'rm -rf "$WORK"; psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS queuebox_verify_bench" \
    >/dev/null 2>&1 || true' EXIT
fi
DB_URL=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); \
print(u.urlunsplit(p._replace(path="/queuebox_verify_bench")))' "$ADMIN")
psql -q "$ADMIN" -c "DROP DATABASE IF EXISTS queuebox_verify_bench" >/dev/null
psql -q "$ADMIN" -c "CREATE DATABASE queuebox_verify_bench" >/dev/null

config() {  # url
  cat <<YAML
database:
  url: $1
outbox:
  claimTimeoutMs: 300000
routes:
  - topicPattern: "**"
    destination: r
destinations:
  r:
    type: http
    baseUrl: http://127.0.0.1:9
YAML
}
config "$DB_URL" >"$WORK/pg.yml"
config "$WORK/outbox.db" >"$WORK/sqlite.yml"
"$BIN" --config "$WORK/pg.yml" migrate >/dev/null 2>&1
"$BIN" --config "$WORK/sqlite.yml" migrate >/dev/null 2>&1

# Row i: key i % 10000; per key the last 1 % of its rows are not sent yet.
psql -q -v ON_ERROR_STOP=1 "$DB_URL" <<SQL
INSERT INTO outbox (topic, key, payload, state, attempt, claimed_at, updated_at, last_error,
                    lease_expires_at)
SELECT 'bench', 'key-' || (i % 10000), jsonb_build_object('i', i),
       CASE WHEN i >= $ROWS * 0.99 THEN (CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'processing' END)
            WHEN i % 200 = 7 THEN 'dead' ELSE 'sent' END,
       0, now(), now(), CASE WHEN i % 200 = 7 THEN 'HTTP 500' END,
       CASE WHEN i >= $ROWS * 0.99 AND i % 2 = 1 THEN now() + interval '5 minutes' END
FROM generate_series(0, $ROWS - 1) AS i ORDER BY i;
WITH forwarded AS (
  INSERT INTO inbox (source, idempotency_key, payload, state, processed_at)
  SELECT 'bench', 'k' || i, '{}', 'processed', now() FROM generate_series(1, 10000) AS i
  RETURNING id)
INSERT INTO outbox (topic, payload, state, headers, claimed_at, updated_at)
SELECT 'bench.inbox', '{}', 'sent', jsonb_build_object('x-inbox-id', id::text), now(), now()
FROM forwarded;
-- The attempt history a relay with outbox.attemptHistory on leaves: one attempt per finished row.
INSERT INTO outbox_attempts (message_id, attempt, destination, outcome, duration_ms, answer)
SELECT id, 1, 'r', state, 3, CASE WHEN state = 'sent' THEN 'HTTP 200' ELSE 'HTTP 500' END
FROM outbox WHERE state IN ('sent', 'dead');
ANALYZE;
SQL
psql -Atq "$DB_URL" -c "COPY (SELECT json_build_object('id', id, 'key', key, 'topic', topic, \
  'attempt', 0, 'time', '') FROM outbox WHERE state = 'sent' ORDER BY sequence) TO STDOUT" \
  >"$WORK/pg.jsonl"

sqlite3 "$WORK/outbox.db" <<SQL
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $ROWS - 1)
INSERT INTO outbox (topic, key, payload, state, claimed_at, last_error, lease_expires_at)
SELECT 'bench', 'key-' || (i % 10000), json_object('i', i),
       CASE WHEN i >= $ROWS * 0.99 THEN (CASE WHEN i % 2 = 0 THEN 'pending' ELSE 'processing' END)
            WHEN i % 200 = 7 THEN 'dead' ELSE 'sent' END,
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), CASE WHEN i % 200 = 7 THEN 'HTTP 500' END,
       CASE WHEN i >= $ROWS * 0.99 AND i % 2 = 1
            THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+5 minutes') END
FROM n;
INSERT INTO outbox_attempts (message_id, attempt, destination, outcome, duration_ms, answer)
SELECT id, 1, 'r', state, 3, CASE WHEN state = 'sent' THEN 'HTTP 200' ELSE 'HTTP 500' END
FROM outbox WHERE state IN ('sent', 'dead');
ANALYZE;
.mode list
.output $WORK/sqlite.jsonl
SELECT json_object('id', id, 'key', key, 'topic', topic, 'attempt', 0, 'time', '')
FROM outbox WHERE state = 'sent' ORDER BY sequence;
SQL

time_run() {  # dialect mode run args...
  local dialect=$1 mode=$2 run=$3 code=0 took
  shift 3
  took=$( { TIMEFORMAT='%R s wall, %U s user, %S s sys'
            time "$BIN" --config "$WORK/$dialect.yml" verify "$@" >"$WORK/out.txt" 2>&1 \
              || echo "exit $?" >"$WORK/code"; } 2>&1)
  [ -f "$WORK/code" ] && code=$(cut -d' ' -f2 "$WORK/code") && rm -f "$WORK/code"
  echo "$dialect $mode run $run: $took, exit $code"
  [ "$code" = 0 ] || cat "$WORK/out.txt" >&2
}
for dialect in pg sqlite; do
  for ((r = 1; r <= RUNS; r++)); do time_run $dialect plain $r; done
  for ((r = 1; r <= RUNS; r++)); do
    time_run $dialect received $r --received "$WORK/$dialect.jsonl"
  done
done
