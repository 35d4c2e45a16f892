#!/usr/bin/env bash
# PostgreSQL -> local HTTP sink (nginx answering 204, keep-alive): throughput, insert-to-receipt latency and
# peak RSS of the queuebox binary, next to the database's floor (the relay's own claim and
# fenced-ack statements run back to back with no publishing) in the same run.
#
#   bash bench/run_relay_bench.sh            # 100,000 rows of ~1 KiB over 1,000 keys
#   ROWS=10000 BATCH=200 CONCURRENCY=400 MAX_IN_FLIGHT=64 bash bench/run_relay_bench.sh
#
# Writes bench/results/relay_pg_http.json (figures + machine description) and prints it.
# The rows are inserted before the relay starts (a backlog drain), so insert-to-receipt latency
# is queueing delay, as in QueueBox's published figures.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-100000}
KEYS=${KEYS:-1000}
BATCH=${BATCH:-500}
CONCURRENCY=${CONCURRENCY:-1000}
MAX_IN_FLIGHT=${MAX_IN_FLIGHT:-256}  # the http destination's maxInFlight (its default)
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
PORT=${PORT:-18181}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/relay_pg_http.json}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target queuebox bench_floor >/dev/null
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"  # QB_BIN: compare another build
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
base=${QB_TEST_PG_URL%/*}

prepare() {  # db name -> config path
  local db=$1
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$base/$db", poolSize: 4}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
outbox: {pollIntervalMs: 50, batchSize: $BATCH, concurrency: $CONCURRENCY, claimTimeoutMs: 60000}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000,
                      maxInFlight: $MAX_IN_FLIGHT}}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                              'i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox"
}

echo "== floor: claim + ack, no publishing ($ROWS rows, batch $BATCH)" >&2
prepare qb_bench_floor
FLOOR=$("$BUILD_DIR/bench/bench_floor" --config "$WORK/qb_bench_floor.yml")
echo "$FLOOR" >&2

echo "== relay: PostgreSQL -> HTTP sink (nginx, return 204, keep-alive)" >&2
prepare qb_bench_relay
source bench/nginx_sink.sh
nginx_sink_start "$WORK/ngx" "$PORT"
trap 'nginx_sink_stop "$WORK/ngx"; rm -rf "$WORK"' EXIT
start=$(date +%s.%N)
"$QB" --config "$WORK/qb_bench_relay.yml" run --until-idle --idle-timeout-ms 600000 2>"$WORK/relay.log"
end=$(date +%s.%N)
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)  # 1, 5 and 15 minutes, as the relay run ends
# Insert-to-acknowledgement latency on the database clock: updated_at (sent) - created_at.
RECEIVER=$(psql -Atq "$base/qb_bench_relay" -c "SELECT json_build_object(
    'received', count(*), 'duplicates', 0,
    'receive_rate_per_s', count(*) / GREATEST(EXTRACT(EPOCH FROM max(updated_at) - min(claimed_at)), 0.001),
    'insert_to_receipt_p50_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY updated_at - created_at)),
    'insert_to_receipt_p99_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY updated_at - created_at)))
  FROM outbox WHERE state = 'sent'")
echo "$RECEIVER" >&2
MAX_RSS_KB=$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/relay.log" | tail -1 | grep -o '[0-9]*' || echo 0)
SENT=$(psql -Atq "$base/qb_bench_relay" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")

python3 - "$FLOOR" "$RECEIVER" "$start" "$end" "$MAX_RSS_KB" "$SENT" "$ROWS" "$KEYS" "$BATCH" \
  "$CONCURRENCY" "$LOAD" "$MAX_IN_FLIGHT" >"$OUT" <<'PY'
import json, platform, subprocess, sys, os
floor, recv = json.loads(sys.argv[1]), json.loads(sys.argv[2])
start, end, rss, sent, rows, keys, batch, conc, load, max_in_flight = sys.argv[3:13]
wall = float(end) - float(start)
relay_rate = int(sent) / wall if wall > 0 else 0
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(json.dumps({
  "benchmark": "PostgreSQL -> HTTP (nginx 204, keep-alive), backlog drain; latency = insert to sent (database clock)",
  "rows": int(rows), "keys": int(keys), "payload_bytes": 1024, "batch_size": int(batch),
  "concurrency": int(conc), "http_max_in_flight": int(max_in_flight),
  "floor_rows_per_s": round(floor["rows_per_s"], 1),
  "relay_rows_per_s_wall": round(relay_rate, 1),
  "relay_receive_rate_per_s": round(recv["receive_rate_per_s"], 1),
  "relay_vs_floor": round(recv["receive_rate_per_s"] / floor["rows_per_s"], 3) if floor["rows_per_s"] else None,
  "insert_to_receipt_p50_ms": recv["insert_to_receipt_p50_ms"],
  "insert_to_receipt_p99_ms": recv["insert_to_receipt_p99_ms"],
  "duplicates": recv["duplicates"], "rows_sent": int(sent),
  "peak_rss_mb": round(int(rss) / 1024, 1),
  "load_average_1_5_15m": [float(x) for x in load.split()],
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "postgres": "15 (fsync off, throw-away cluster)"},
}, indent=2))
PY
cat "$OUT"
