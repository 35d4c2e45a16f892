#!/usr/bin/env bash
# Commit-to-receipt latency at a steady insert rate, with and without the LISTEN/NOTIFY wake-up
# (outbox.notify.enabled), and the producers' insert throughput with and without the V13 NOTIFY
# trigger (issue 6 item 4).
#
#   bash bench/latency_bench.sh                     # 1,000 inserts/s for 10 s per case
#   RATE=500 DURATION=20 bash bench/latency_bench.sh
#
# Cases (same database server, same receiver, one after the other):
#   notify_poll1000   wake-up on, pollIntervalMs 1000
#   poll100           polling alone, pollIntervalMs 100 (the default)
#   poll1000          polling alone, pollIntervalMs 1000
# Each case: latency_producer inserts RATE rows/s, one row per transaction, for DURATION s; the
# queuebox binary delivers them to bench_receiver (HTTP 204, keep-alive), which reports p50/p99
# of (receipt time - "ts"), "ts" being clock_timestamp() at the INSERT (same host clock).
# Then pgbench: single-row INSERT transactions, 4 clients, PGBENCH_SECONDS s, with the V13 trigger
# enabled (outbox.notify.enabled) and disabled (V13's default), twice each, alternating; nobody
# LISTENs during pgbench (a NOTIFY's commit cost does not depend on listeners).
#
# Writes bench/results/latency.json (figures + machine description) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-1000}
DURATION=${DURATION:-10}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-10}
PORT=${PORT:-18281}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/latency.json}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target queuebox bench_receiver latency_producer >/dev/null
QB="$BUILD_DIR/apps/queuebox/queuebox"
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
base=${QB_TEST_PG_URL%/*}
DB=qb_bench_latency
ROWS=$((RATE * DURATION))

fresh_db() {  # notify(true|false) poll_ms -> config at $WORK/qb.yml, migrated database $DB
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  cat >"$WORK/qb.yml" <<YAML
database: {type: postgresql, url: "$base/$DB", poolSize: 4}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
outbox: {pollIntervalMs: $2, notify: {enabled: $1}}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
}

wait_for_log() {  # file text timeout_s
  local end=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    if ((SECONDS > end)); then echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1; fi
    sleep 0.05
  done
}

run_case() {  # name notify poll_ms -> one JSON line on stdout
  local name=$1 notify=$2 poll=$3
  echo "== $name: notify=$notify pollIntervalMs=$poll, $RATE inserts/s for $DURATION s" >&2
  fresh_db "$notify" "$poll"
  "$BUILD_DIR/bench/bench_receiver" --port "$PORT" --expect "$ROWS" >"$WORK/recv.json" &
  local recv=$!
  PIDS+=("$recv")
  : >"$WORK/relay.log"
  "$QB" --config "$WORK/qb.yml" run 2>"$WORK/relay.log" &
  local relay=$!
  PIDS+=("$relay")
  wait_for_log "$WORK/relay.log" "is delivering" 30
  if [[ $notify == true ]]; then wait_for_log "$WORK/relay.log" "wake-up is listening" 30; fi
  local producer
  producer=$("$BUILD_DIR/bench/latency_producer" --url "$base/$DB" --rate "$RATE" \
    --seconds "$DURATION")
  # The last rows arrive within one poll interval (plus delivery); then the receiver exits.
  local end=$((SECONDS + poll / 1000 + 30))
  while kill -0 "$recv" 2>/dev/null && ((SECONDS < end)); do sleep 0.1; done
  kill -TERM "$recv" 2>/dev/null || true
  wait "$recv" || true
  kill -TERM "$relay" 2>/dev/null || true
  wait "$relay" || true
  local sent
  sent=$(psql -Atq "$base/$DB" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
  echo "   producer $producer" >&2
  echo "   receiver $(cat "$WORK/recv.json")" >&2
  printf '{"case":"%s","notify":%s,"poll_interval_ms":%s,"producer":%s,"receiver":%s,"sent":%s}\n' \
    "$name" "$notify" "$poll" "$producer" "$(cat "$WORK/recv.json")" "$sent"
}

CASES="$WORK/cases.jsonl"
: >"$CASES"
run_case notify_poll1000 true 1000 >>"$CASES"
run_case poll100 false 100 >>"$CASES"
run_case poll1000 false 1000 >>"$CASES"

echo "== pgbench: single-row INSERT transactions, 4 clients, $PGBENCH_SECONDS s" >&2
fresh_db false 1000
cat >"$WORK/insert.sql" <<'SQL'
INSERT INTO outbox (topic, key, payload) VALUES ('bench.pgbench', 'k', '{"ts":0}');
SQL
PGB="$WORK/pgbench.jsonl"
: >"$PGB"
pgbench_tps() {  # label
  psql -q "$base/$DB" -c "TRUNCATE outbox" -c "CHECKPOINT"
  local tps
  tps=$(pgbench -n -c 4 -j 2 -T "$PGBENCH_SECONDS" -f "$WORK/insert.sql" "$base/$DB" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p')
  echo "   $1: $tps tps" >&2
  printf '{"trigger":%s,"tps":%s}\n' "$1" "$tps" >>"$PGB"
}
set_trigger() {  # ENABLE | DISABLE (V13 leaves it disabled until a listener enables it)
  psql -q "$base/$DB" -c "ALTER TABLE outbox $1 TRIGGER queuebox_outbox_notify"
}
for round in 1 2; do
  set_trigger ENABLE
  pgbench_tps true
  set_trigger DISABLE
  pgbench_tps false
done
psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)"

python3 - "$CASES" "$PGB" "$RATE" "$DURATION" "$PGBENCH_SECONDS" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
cases = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pgb = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
rate, duration, pgb_s = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
def mean(xs): return round(sum(xs) / len(xs), 1) if xs else None
with_t = [r["tps"] for r in pgb if r["trigger"]]
without = [r["tps"] for r in pgb if not r["trigger"]]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
pg = subprocess.run(["psql", "-Atq", os.environ["QB_TEST_PG_URL"], "-c", "SHOW server_version"],
                    capture_output=True, text=True).stdout.strip()
print(json.dumps({
  "benchmark": "commit-to-receipt latency at a steady insert rate, PostgreSQL -> HTTP (204)",
  "insert_rate_per_s": rate, "duration_s": duration,
  "targets_with_wakeup": {"p50_ms": 5, "p99_ms": 25},
  "cases": [{
      "case": c["case"], "notify": c["notify"], "poll_interval_ms": c["poll_interval_ms"],
      "p50_ms": c["receiver"]["insert_to_receipt_p50_ms"],
      "p99_ms": c["receiver"]["insert_to_receipt_p99_ms"],
      "received": c["receiver"]["received"], "duplicates": c["receiver"]["duplicates"],
      "rows_sent": c["sent"], "producer_rate_per_s": round(c["producer"]["rate_per_s"], 1),
      "producer_max_schedule_lag_ms": round(c["producer"]["max_schedule_lag_ms"], 1),
  } for c in cases],
  "producer_throughput": {
      "tool": f"pgbench -n -c 4 -j 2 -T {pgb_s}, one single-row INSERT per transaction",
      "runs": pgb,
      "trigger_enabled_tps_mean": mean(with_t), "trigger_disabled_tps_mean": mean(without),
      "enabled_over_disabled": round(mean(with_t) / mean(without), 3) if with_t and without else None,
  },
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "load_average_at_end": os.getloadavg()[0],
              "postgres": pg + " (fsync off, synchronous_commit off, throw-away cluster)",
              "note": "shared 2-core machine, other builds and benchmarks running: compare ratios"},
}, indent=2))
PY
cat "$OUT"
