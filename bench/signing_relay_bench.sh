#!/usr/bin/env bash
# The cost of signing deliveries, and a rate limit's throughput: PostgreSQL -> HTTP (nginx 204,
# keep-alive), a backlog drained at the relay's defaults (concurrency 8, batchSize 100,
# pollIntervalMs 100), unsigned against signed (signing: standard-webhooks, one secret) in the
# same run (ABBA), on PostgreSQL with fsync off (the shared test cluster) and on (a private
# cluster this script starts and stops). Then, fsync off, a backlog of RL_ROWS drained through
# rateLimit {messagesPerSecond: RL_RATE}: its rate, from the first to the last row sent, should be
# the limit.
#
#   flock /tmp/queuebox-bench.lock bash bench/signing_relay_bench.sh
#   QB_BIN=build/apps/queuebox/queuebox ROWS=20000 REPEAT=2 bash bench/signing_relay_bench.sh
#
# Writes bench/results/signing_relay.json and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-20000}
KEYS=${KEYS:-1000}
PAD=${PAD:-960}
REPEAT=${REPEAT:-2}        # ABBA pairs per setting
RL_ROWS=${RL_ROWS:-3000}
RL_RATE=${RL_RATE:-500}
PORT=${PORT:-18193}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/signing_relay.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
SECRET=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw

source bench/relay_bench_setup.sh  # quiet machine, QB, nginx sink, start_private_pg

# run <base url> <db> <variant: unsigned|signed|ratelimit> <rows> -> JSON line
run() {
  local base=$1 db=$2 variant=$3 rows=$4
  psql -q "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
  local extra=""
  [ "$variant" = signed ] && extra=", signing: {type: standard-webhooks, secret: $SECRET}"
  [ "$variant" = ratelimit ] && extra=", rateLimit: {messagesPerSecond: $RL_RATE}"
  cat >"$WORK/$db.yml" <<YAML
database: {type: postgresql, url: "$base/$db", poolSize: 4}
server: {httpPort: $((PORT + 1))}
outbox: {claimTimeoutMs: 60000}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000$extra}}
logging: {format: json, level: info}
YAML
  "$QB" --config "$WORK/$db.yml" migrate 2>/dev/null
  psql -q "$base/$db" -c "INSERT INTO outbox (topic, key, payload)
    SELECT 'bench.event', 'key-' || (i % $KEYS),
           jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
                              'i', i, 'pad', repeat('x', $PAD))
    FROM generate_series(1, $rows) AS i" -c "ANALYZE outbox"
  local load_before start end sent=0
  load_before=$(cut -d' ' -f1 /proc/loadavg)
  start=$(date +%s.%N)
  if [ "$variant" = ratelimit ]; then
    # --until-idle stops when a cycle finds nothing due, as rows wait for their turn: run until
    # every row is sent instead.
    "$QB" --config "$WORK/$db.yml" run 2>"$WORK/$db.log" &
    local pid=$!
    until [ "$sent" -ge "$rows" ]; do
      sleep 0.5
      sent=$(psql -Atq "$base/$db" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
    done
    kill -TERM "$pid"
    wait "$pid" || true
  else
    "$QB" --config "$WORK/$db.yml" run --until-idle --idle-timeout-ms 900000 2>"$WORK/$db.log"
  fi
  end=$(date +%s.%N)
  local span attempts
  sent=$(psql -Atq "$base/$db" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
  span=$(psql -Atq "$base/$db" -c "SELECT EXTRACT(EPOCH FROM max(updated_at) - min(updated_at))
    FROM outbox WHERE state = 'sent'")
  attempts=$(psql -Atq "$base/$db" -c "SELECT coalesce(sum(attempt), 0) FROM outbox")
  psql -q "$base/postgres" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)"
  python3 -c 'import json,sys; a=sys.argv; w=float(a[3])-float(a[2]); s=float(a[5]);
print(json.dumps({"variant": a[1], "rows_sent": int(a[4]), "wall_s": round(w, 2),
  "msgs_per_s": round(int(a[4]) / w, 1),
  "first_to_last_sent_msgs_per_s": round((int(a[4]) - 1) / s, 1) if s > 0 else None,
  "attempts_spent": int(a[6]), "load_before": float(a[7])}))' \
    "$variant" "$start" "$end" "$sent" "$span" "$attempts" "$load_before"
}

# setting <label> <base url>: REPEAT ABBA pairs, unsigned against signed
setting() {
  local label=$1 base=$2 i
  echo "== $label" >&2
  for i in $(seq 1 "$REPEAT"); do
    for v in unsigned signed signed unsigned; do
      local line
      line=$(run "$base" "qb_signbench" "$v" "$ROWS")
      echo "$line" >&2
      echo "{\"setting\": \"$label\", \"run\": $line}" >>"$WORK/runs.jsonl"
    done
  done
}

: >"$WORK/runs.jsonl"
SHARED=${QB_TEST_PG_URL%/*}
setting "defaults, fsync off" "$SHARED"
echo "== rate limit $RL_RATE/s, fsync off" >&2
line=$(run "$SHARED" "qb_signbench" ratelimit "$RL_ROWS")
echo "$line" >&2
echo "{\"setting\": \"rateLimit $RL_RATE/s, fsync off\", \"run\": $line}" >>"$WORK/runs.jsonl"
start_private_pg
setting "defaults, fsync on" "$PRIVATE_URL"

python3 - "$WORK/runs.jsonl" "$ROWS" "$RL_RATE" >"$OUT" <<'PY'
import json, os, platform, statistics, subprocess, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
settings = []
for label in dict.fromkeys(r["setting"] for r in runs):
    mine = [r["run"] for r in runs if r["setting"] == label]
    if label.startswith("rateLimit"):
        settings.append({"setting": label, "limit_msgs_per_s": int(sys.argv[3]), "runs": mine})
        continue
    def med(variant):
        return statistics.median(r["msgs_per_s"] for r in mine if r["variant"] == variant)
    unsigned, signed = med("unsigned"), med("signed")
    settings.append({
        "setting": label,
        "median_msgs_per_s": {"unsigned": unsigned, "signed": signed},
        "signing_cost": round(1 - signed / unsigned, 3) if unsigned else None,
        "runs": mine,
    })
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(json.dumps({
    "benchmark": "PostgreSQL -> HTTP (nginx 204, keep-alive), backlog drain at the defaults, unsigned against signed (standard-webhooks), and a rate-limited drain",
    "rows_per_run": int(sys.argv[2]), "payload_bytes": 1024,
    "settings": settings,
    "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
                "postgres": "15; fsync off: the shared test cluster; fsync on: a private cluster with fsync, synchronous_commit and full_page_writes on"},
}, indent=2))
PY
cat "$OUT"
