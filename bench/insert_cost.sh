#!/usr/bin/env bash
# The producers' cost of one more outbox index (issue 18 item 6: idx_outbox_share_key, tried):
# the insert rate with and without the index, alternating, on a private PostgreSQL 15 (fsync off,
# then on; synchronous_commit on). Two producer shapes, rows of ~1 KiB over KEYS keys:
#   bulk:   one INSERT ... SELECT FROM generate_series of ROWS rows (one transaction), timed by the
#           client around psql, on an emptied table, with the backend's CPU per row (/proc);
#   single: pgbench, CLIENTS clients for TX_SECONDS, one single-row INSERT per transaction.
#
#   flock /tmp/queuebox-bench.lock bash bench/insert_cost.sh   # QB_BIN=... REPEATS=5 TX_SECONDS=10
#
# Writes bench/results/insert_cost.json (every measurement and the medians) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
QB_BIN=${QB_BIN:-build/apps/queuebox/queuebox}  # migrates the table (V1-V20 or later)
PG_PORT=${PG_PORT:-18394}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
REPEATS=${REPEATS:-5}
ROWS=${ROWS:-100000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}
CLIENTS=${CLIENTS:-2}
TX_SECONDS=${TX_SECONDS:-10}
FSYNCS=${FSYNCS:-"off on"}
OUT=${OUT:-bench/results/insert_cost.json}
# The index measured (INDEX_NAME, INDEX_SQL): by default the share-key index tried for issue 18
# item 6 (bench/README.md, "Scale-out").
INDEX_NAME=${INDEX_NAME:-idx_outbox_share_key}
INDEX_SQL=${INDEX_SQL:-"CREATE INDEX IF NOT EXISTS idx_outbox_share_key ON outbox
  ((hashtext(key) & 1023), key, sequence) WHERE state IN ('pending', 'processing') AND key <> ''"}
source bench/private_pg.sh  # WORK, BASE, start_pg, stop_pg; cleanup on exit
RESULTS="$WORK/results.jsonl"
: >"$RESULTS"
cat >"$WORK/insert.sql" <<SQL
INSERT INTO outbox (topic, key, payload)
VALUES ('bench.event', 'key-' || (random() * ($KEYS - 1))::int,
        jsonb_build_object('i', 1, 'pad', repeat('x', $PAD)));
SQL
chmod 644 "$WORK/insert.sql"

set_index() {  # with|without
  if [ "$1" = with ]; then
    psql -q "$BASE/qb_ins" -c "SET client_min_messages = warning" -c "$INDEX_SQL"
  else
    psql -q "$BASE/qb_ins" -c "SET client_min_messages = warning" \
    -c "DROP INDEX IF EXISTS $INDEX_NAME"
  fi
  psql -q "$BASE/qb_ins" -c "TRUNCATE outbox" -c "CHECKPOINT"
}

measure() {  # fsync repeat side
  local t0 t1 tps
  set_index "$3"
  # The bulk insert's backend CPU (user + system ticks, /proc) besides the client's wall clock:
  # the CPU figure holds when other work shares the machine.
  local cpu
  t0=$(date +%s.%N)
  cpu=$(psql -X -q -At "$BASE/qb_ins" <<SQL
SELECT pg_backend_pid() AS pid \gset
\setenv QB_PID :pid
\! awk '{print \$14 + \$15}' /proc/\$QB_PID/stat
INSERT INTO outbox (topic, key, payload)
SELECT 'bench.event', 'key-' || (i % $KEYS), jsonb_build_object('i', i, 'pad', repeat('x', $PAD))
FROM generate_series(1, $ROWS) AS i;
\! awk '{print \$14 + \$15}' /proc/\$QB_PID/stat
SQL
)
  t1=$(date +%s.%N)
  cpu=$(echo "$cpu" | awk -v hz="$(getconf CLK_TCK)" 'NR == 1 {a = $1} NR == 2 {printf "%.3f", ($1 - a) / hz}')
  psql -q "$BASE/qb_ins" -c "TRUNCATE outbox" -c "CHECKPOINT"
  tps=$("$PG_BIN/pgbench" -n -c "$CLIENTS" -j "$CLIENTS" -T "$TX_SECONDS" -f "$WORK/insert.sql" \
    "$BASE/qb_ins" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p')
  python3 -c "import json,sys; print(json.dumps({'fsync': sys.argv[1], 'repeat': int(sys.argv[2]),
    'index': sys.argv[3], 'bulk_rows_per_s': round($ROWS / ($t1 - $t0), 1),
    'bulk_backend_cpu_us_per_row': round(float(sys.argv[5]) * 1e6 / $ROWS, 2),
    'single_row_tps': float(sys.argv[4])}))" "$1" "$2" "$3" "$tps" "$cpu" | tee -a "$RESULTS"
}

for fsync in $FSYNCS; do
  start_pg "$fsync"
  psql -q "$BASE/postgres" -c "SET client_min_messages = warning" \
    -c "DROP DATABASE IF EXISTS qb_ins" -c "CREATE DATABASE qb_ins"
  cat >"$WORK/relay.yml" <<YAML
database: {type: postgresql, url: "$BASE/qb_ins"}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:9", path: /events}}
YAML
  "$QB_BIN" --config "$WORK/relay.yml" migrate >/dev/null 2>&1
  for r in $(seq 1 "$REPEATS"); do  # alternate which side goes first
    if [ $((r % 2)) = 1 ]; then sides="without with"; else sides="with without"; fi
    for side in $sides; do measure "$fsync" "$r" "$side"; done
  done
  stop_pg
done

python3 - "$RESULTS" "$OUT" "$ROWS" "$KEYS" "$CLIENTS" "$TX_SECONDS" "$INDEX_SQL" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
summary = {}
for f in sorted({r['fsync'] for r in rows}):
    s = {}
    for side in ('without', 'with'):
        sel = [r for r in rows if r['fsync'] == f and r['index'] == side]
        s[side] = {k: statistics.median(r[k] for r in sel)
                   for k in ('bulk_rows_per_s', 'bulk_backend_cpu_us_per_row', 'single_row_tps')}
    s['with_over_without'] = {k: round(s['with'][k] / s['without'][k], 3) for k in s['with']}
    summary['fsync_' + f] = s
out = {'benchmark': 'insert_cost', 'index': sys.argv[7],
       'rows_bulk': int(sys.argv[3]), 'keys': int(sys.argv[4]), 'pgbench_clients': int(sys.argv[5]),
       'pgbench_seconds': int(sys.argv[6]), 'summary': summary, 'runs': rows}
json.dump(out, open(sys.argv[2], 'w'), indent=1)
print(json.dumps(summary, indent=1))
PY
