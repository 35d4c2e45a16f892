#!/usr/bin/env bash
# Relay throughput PostgreSQL -> HTTP (nginx 204, keep-alive) with and without a route transform,
# in the same run, at the relay's default concurrency (outbox.concurrency 8, batchSize 100,
# pollIntervalMs 100: the configuration's defaults), on PostgreSQL with fsync off (the shared test
# cluster) and on (a private cluster this script starts and stops). Peak RSS of each run from the
# relay's stop line. Optionally also at the throughput settings of run_relay_bench.sh.
#
#   flock /tmp/queuebox-bench.lock bash bench/transform_relay_bench.sh
#   ROWS=20000 REPEAT=2 HIGH=1 bash bench/transform_relay_bench.sh
#
# The transform is QueueBox's documented envelope (how-to "Transform payloads", there on a
# destination), here on the route:  { "id": $messageId, "type": $topic, "data": $ }
# Runs alternate without / with (ABBA) so drift in the machine's load hits both alike.
# Writes bench/results/transform_relay.json and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-20000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}
REPEAT=${REPEAT:-2}        # ABBA pairs per setting
HIGH=${HIGH:-1}            # also CONCURRENCY=1000 BATCH=500 (run_relay_bench.sh's), fsync off
PORT=${PORT:-18191}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/transform_relay.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
EXPRESSION='{ "id": $messageId, "type": $topic, "data": $ }'

source bench/relay_bench_setup.sh  # quiet machine, QB, nginx sink, start_private_pg

# run <base url> <db> <transform: none|route> <concurrency or ""> <batch or ""> -> JSON line
run() {
  local base=$1 db=$2 variant=$3 conc=$4 batch=$5
  psql -q "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  local outbox="outbox: {claimTimeoutMs: 60000"
  [ -n "$conc" ] && outbox+=", concurrency: $conc"
  [ -n "$batch" ] && outbox+=", batchSize: $batch, pollIntervalMs: 50"
  outbox+="}"
  local route="routes: [{topicPattern: \"**\", destination: sink}]"
  if [ "$variant" = route ]; then
    route="routes: [{topicPattern: \"**\", destination: sink, transform: {expression: '$EXPRESSION'}}]"
  fi
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$base/$db", poolSize: 4}
server: {httpPort: $((PORT + 1))}
$outbox
$route
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                              'i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $ROWS) AS i" -c "ANALYZE outbox"
  local load_before start end
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  "$QB" --config "$WORK/$db.yml" run --until-idle --idle-timeout-ms 900000 2>"$WORK/$db.log"
  end=$(date +%s.%N)
  local rss sent lat
  rss=$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/$db.log" | tail -1 | grep -o '[0-9]*' || echo 0)
  sent=$(psql -Atq "$base/$db" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
  lat=$(psql -Atq "$base/$db" -c "SELECT json_build_object(
      'p50_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY updated_at - created_at)),
      'p99_ms', 1000 * EXTRACT(EPOCH FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY updated_at - created_at)))
    FROM outbox WHERE state = 'sent'")
  psql -q "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
  python3 -c 'import json,sys; a=sys.argv; w=float(a[3])-float(a[2]); l=json.loads(a[6]);
print(json.dumps({"transform": a[1], "rows_sent": int(a[4]), "wall_s": round(w, 2),
  "msgs_per_s": round(int(a[4]) / w, 1), "peak_rss_mb": round(int(a[5]) / 1024, 1),
  "insert_to_sent_p50_ms": round(l["p50_ms"], 1), "insert_to_sent_p99_ms": round(l["p99_ms"], 1),
  "load_before": float(a[7])}))' "$variant" "$start" "$end" "$sent" "$rss" "$lat" "$load_before"
}

# setting <label> <base url> <concurrency> <batch>: REPEAT ABBA pairs
setting() {
  local label=$1 base=$2 conc=$3 batch=$4 i
  echo "== $label" >&2
  for i in $(seq 1 "$REPEAT"); do
    for v in none route route none; do
      local line
      line=$(run "$base" "qb_tfbench" "$v" "$conc" "$batch")
      echo "$line" >&2
      echo "{\"setting\": \"$label\", \"run\": $line}" >>"$WORK/runs.jsonl"
    done
  done
}

: >"$WORK/runs.jsonl"
SHARED=${QB_TEST_PG_URL%/*}
setting "default concurrency, fsync off" "$SHARED" "" ""
start_private_pg
setting "default concurrency, fsync on" "$PRIVATE_URL" "" ""
if [ "$HIGH" = 1 ]; then
  setting "concurrency 1000 batch 500, fsync off" "$SHARED" 1000 500
fi

python3 - "$WORK/runs.jsonl" "$ROWS" "$EXPRESSION" >"$OUT" <<'PY'
import json, os, platform, statistics, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
settings = []
for label in dict.fromkeys(r["setting"] for r in runs):
    mine = [r["run"] for r in runs if r["setting"] == label]
    def med(variant, key):
        return statistics.median(r[key] for r in mine if r["transform"] == variant)
    none, route = med("none", "msgs_per_s"), med("route", "msgs_per_s")
    settings.append({
        "setting": label,
        "median_msgs_per_s": {"none": none, "route": route},
        "route_transform_cost": round(1 - route / none, 3) if none else None,
        "median_peak_rss_mb": {"none": med("none", "peak_rss_mb"), "route": med("route", "peak_rss_mb")},
        "runs": mine,
    })
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "benchmark": "PostgreSQL -> HTTP (nginx 204, keep-alive), backlog drain, with and without a route transform",
    "transform": sys.argv[3], "rows_per_run": int(sys.argv[2]), "payload_bytes": 1024,
    "settings": settings,
    "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                "postgres": "15; fsync off: the shared test cluster (fsync, synchronous_commit, full_page_writes off); fsync on: a private cluster with the three on"},
}, indent=2))
PY
cat "$OUT"
