#!/usr/bin/env bash
# Claim cost against backlog size (issue 6 item 1) and statements per 10,000 messages (item 8).
# Drains PostgreSQL outboxes with the relay's own claim + fenced MarkSent, no publishing
# (bench/claim_backlog.cc), batch 500, from three backlogs with the minimum payload ('{}'):
#   small:   10,000 rows over 1,000 keys (round-robin)          drained completely
#   uniform: 1,000,000 rows over 1,000 keys (round-robin)       first MAX_ROWS rows drained
#   skewed:  100,000 rows of key 'hot' inserted first, then     first MAX_ROWS rows drained
#            900,000 rows over 999 other keys (1,000,000 in all)
# and reports rows/s, each backlog's rate over the small one's, and from pg_stat_statements the
# statements issued per 10,000 messages (each backlog gets a fresh database, so the counts are
# read per database without resetting the shared view).
#
#   bash bench/claim_backlog_bench.sh                 # writes bench/results/claim_backlog.json
#   MAX_ROWS=100000 BATCH=200 bash bench/claim_backlog_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${BATCH:-500}
MAX_ROWS=${MAX_ROWS:-200000}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/claim_backlog.json}
PREFIX=${PREFIX:-qb_claim_bench}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD_DIR" --target claim_backlog >/dev/null
base=${QB_TEST_PG_URL%/*}
psql -q "$QB_TEST_PG_URL" -c "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"

prepare() {  # db, then INSERT statements
  local db=$1
  shift
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  # The bundled migrations in version order (what `queuebox migrate` applies).
  for f in $(ls src/store/postgres/migrations/V*__*.sql | sort -t V -k2 -n); do
    psql -q -v ON_ERROR_STOP=1 "$base/$db" -f "$f" >/dev/null 2>&1
  done
  for sql in "$@"; do psql -q "$base/$db" -c "$sql"; done
  psql -q "$base/$db" -c "VACUUM ANALYZE outbox"
}

statements() {  # db -> JSON {claims, acks, renewals}: calls of the relay's statements in that db
  # pg_stat_statements normalizes constants ('sent' becomes $3), so match on the shape.
  psql -Atq "$QB_TEST_PG_URL" -c "SELECT json_build_object(
      'claims', coalesce(sum(calls) FILTER (WHERE query LIKE 'WITH RECURSIVE qb_now%'), 0),
      'acks', coalesce(sum(calls) FILTER (WHERE query LIKE 'UPDATE %SET \"state\" = \$%unnest%'
                                          AND query NOT LIKE '%last_error%'), 0),
      'renewals', coalesce(sum(calls) FILTER (WHERE query LIKE
                           'UPDATE %SET \"lease_expires_at\" = clock_timestamp()%'), 0))
    FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = '$1'"
}

run() {  # name, max rows, then INSERT statements
  local name=$1 max=$2
  shift 2
  local db="${PREFIX}_$name"
  echo "== $name: loading" >&2
  prepare "$db" "$@"
  echo "== $name: draining (batch $BATCH, max rows $max)" >&2
  local res
  res=$("$BUILD_DIR/bench/claim_backlog" --url "$base/$db" --batch "$BATCH" --max-rows "$max" \
    --hot-key hot)
  echo "$res" >&2
  echo "{\"name\": \"$name\", \"drain\": $res, \"statements\": $(statements "$db")}"
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
}

ins() {  # rows, key expression over i, first i
  echo "INSERT INTO outbox (topic, key, payload) SELECT 'bench', $2, '{}'
        FROM generate_series(${3:-1}, ${3:-1} + $1 - 1) AS i"
}

SMALL=$(run small 0 "$(ins 10000 "'key-' || (i % 1000)")")
UNIFORM=$(run uniform "$MAX_ROWS" "$(ins 1000000 "'key-' || (i % 1000)")")
SKEWED=$(run skewed "$MAX_ROWS" "$(ins 100000 "'hot'")" "$(ins 900000 "'key-' || (i % 999)")")

python3 - "$SMALL" "$UNIFORM" "$SKEWED" "$BATCH" "$MAX_ROWS" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
small, uniform, skewed = (json.loads(a) for a in sys.argv[1:4])
batch, max_rows = int(sys.argv[4]), int(sys.argv[5])
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
pg = subprocess.run(["psql", "-Atq", os.environ["QB_TEST_PG_URL"], "-c", "SHOW server_version"],
                    capture_output=True, text=True).stdout.strip()
base = small["drain"]["rows_per_s"]
def entry(r):
    d, st = r["drain"], r["statements"]
    per = lambda n: round(10000 * n / d["rows"], 1) if d["rows"] else None
    return {"rows_drained": d["rows"], "hot_key_rows": d["hot_key_rows"], "claims": d["claims"],
            "seconds": round(d["seconds"], 2), "rows_per_s": round(d["rows_per_s"], 1),
            "ms_per_claim": round(d["ms_per_claim"], 2),
            "vs_small": round(d["rows_per_s"] / base, 3) if base else None,
            "statements_per_10k_messages": {"claims": per(st["claims"]), "acks": per(st["acks"]),
                                            "renewals": per(st["renewals"])}}
print(json.dumps({
  "benchmark": "claim + fenced MarkSent drain, no publishing (bench/claim_backlog_bench.sh)",
  "batch_size": batch, "payload": "{}",
  "backlogs": {
    "small": "10,000 rows over 1,000 keys, drained completely",
    "uniform": f"1,000,000 rows over 1,000 keys, first {max_rows} rows drained",
    "skewed": f"100,000 rows of key 'hot' first, then 900,000 over 999 keys; first {max_rows} rows drained",
  },
  "small": entry(small), "uniform": entry(uniform), "skewed": entry(skewed),
  "goal": "uniform.vs_small >= 0.9 and skewed.vs_small >= 0.9 (issue 6 item 1)",
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "postgres": pg + " (throw-away cluster from scripts/services.sh)"},
}, indent=2))
PY
cat "$OUT"
