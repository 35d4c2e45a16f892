#!/usr/bin/env bash
# What the outbox id default costs the producers: two databases with the bundled migrations,
# `rand` with the id default set back to gen_random_uuid() (before V21) and `v7` with V21's
# queuebox_uuid_v7(), each first filled with PREFILL rows (a deep outbox), then ROUNDS rounds
# that alternate which database goes first:
#   bulk:   one INSERT ... SELECT of BULK rows (what a batch producer does), wall ms;
#   single: pgbench, CLIENTS clients, one-row INSERT transactions for SECONDS_PER s (a web
#           application's producers), transactions/s, on the simple protocol (every insert
#           planned) and with prepared statements (single_prepared_tps);
# plus the function alone: ms for 1,000,000 calls of each default in one SELECT.
#
#   QB_SVC_DIR=/tmp/mine PG_PORT=54349 bash bench/id_default_insert_bench.sh
#   # writes bench/results/id_default_insert.json
set -euo pipefail
cd "$(dirname "$0")/.."
PREFILL=${PREFILL:-1000000}
ROUNDS=${ROUNDS:-4}
BULK=${BULK:-100000}
CLIENTS=${CLIENTS:-2}
SECONDS_PER=${SECONDS_PER:-10}
OUT=${OUT:-bench/results/id_default_insert.json}
PREFIX=${PREFIX:-qb_id_insert}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
base=${QB_TEST_PG_URL%/*}

for v in rand v7; do
  db=${PREFIX}_$v
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  for f in $(ls src/store/postgres/migrations/V*__*.sql | sort -t V -k2 -n); do
    psql -q -v ON_ERROR_STOP=1 "$base/$db" -f "$f" >/dev/null 2>&1
  done
  if [ "$v" = rand ]; then
    psql -q "$base/$db" -c "ALTER TABLE outbox ALTER COLUMN id SET DEFAULT gen_random_uuid()"
  fi
  echo "== $v: $PREFILL rows" >&2
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload) SELECT 'bench',
    'key-' || (i % 1000), '{}' FROM generate_series(1, $PREFILL) AS i" -c "VACUUM ANALYZE outbox"
done

PGB=$(mktemp)
echo "\\set k random(1, 1000)
INSERT INTO outbox (topic, key, payload) VALUES ('bench', 'key-' || :k, '{}');" >"$PGB"

ms_of() {  # db, sql -> wall ms of the statement (psql \timing)
  psql -q "$base/$1" -c '\timing on' -c "$2" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
RES=""
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then order="rand v7"; else order="v7 rand"; fi
  for v in $order; do
    db=${PREFIX}_$v
    bulk=$(ms_of "$db" "INSERT INTO outbox (topic, key, payload) SELECT 'bench',
      'key-' || (i % 1000), '{}' FROM generate_series(1, $BULK) AS i")
    tps=$(pgbench -n -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER" -f "$PGB" "$base/$db" 2>/dev/null |
      sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    ptps=$(pgbench -n -M prepared -c "$CLIENTS" -j "$CLIENTS" -T "$SECONDS_PER" -f "$PGB" \
      "$base/$db" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
    echo "round $r $v: bulk $bulk ms, single $tps tps, prepared $ptps tps" >&2
    RES="$RES{\"round\": $r, \"variant\": \"$v\", \"bulk_ms\": $bulk, \"single_tps\": $tps,"
    RES="$RES \"single_prepared_tps\": $ptps},"
  done
done
fn_rand=$(ms_of "${PREFIX}_v7" "SELECT count(gen_random_uuid()) FROM generate_series(1, 1000000)")
fn_v7=$(ms_of "${PREFIX}_v7" "SELECT count(queuebox_uuid_v7()) FROM generate_series(1, 1000000)")
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
rm -f "$PGB"
for v in rand v7; do
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS ${PREFIX}_$v WITH (FORCE)"
done

python3 - "[${RES%,}]" "$fn_rand" "$fn_v7" "$PREFILL" "$BULK" "$CLIENTS" "$SECONDS_PER" \
  "$LOAD_START" "$LOAD_END" >"$OUT" <<'PY'
import json, os, statistics, subprocess, sys
runs = json.loads(sys.argv[1])
def med(v, k):
    return statistics.median(r[k] for r in runs if r["variant"] == v)
fsync = subprocess.run(["psql", "-Atq", os.environ["QB_TEST_PG_URL"], "-c", "SHOW fsync"],
                       capture_output=True, text=True).stdout.strip()
print(json.dumps({
  "benchmark": "outbox id default: producers' insert cost (bench/id_default_insert_bench.sh)",
  "prefill_rows": int(sys.argv[4]), "bulk_rows": int(sys.argv[5]),
  "single_row_clients": int(sys.argv[6]), "single_row_seconds": int(sys.argv[7]),
  "fsync": fsync,
  "median": {v: {k: med(v, k) for k in ("bulk_ms", "single_tps", "single_prepared_tps")}
             for v in ("rand", "v7")},
  "v7_over_rand": {k: round(med("v7", k) / med("rand", k), 3)
                   for k in ("bulk_ms", "single_tps", "single_prepared_tps")},
  "function_ms_per_million_calls": {"gen_random_uuid": float(sys.argv[2]),
                                    "queuebox_uuid_v7": float(sys.argv[3])},
  "runs": runs,
  "load_average": {"before": sys.argv[8], "after": sys.argv[9]},
}, indent=2))
PY
cat "$OUT"
