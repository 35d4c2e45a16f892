#!/usr/bin/env bash
# Change capture against polling and the LISTEN/NOTIFY wake-up (issue 19 item 3), on a private
# PostgreSQL 15 cluster (wal_level=logical, synchronous_commit on) started twice: fsync on, then
# fsync off. For each setting and each mode:
#
#   latency     latency_producer inserts RATE rows/s, one row per transaction, for DURATION s; the
#               queuebox binary delivers them to bench_receiver (HTTP 204), which reports p50/p99
#               of receipt time minus the row's clock_timestamp() at the INSERT (commit included)
#   producers   pgbench, single-row INSERT transactions, 4 clients, PGBENCH_SECONDS s, while the
#               relay runs in that mode and delivers (rounds alternate between the modes): first
#               at PRODUCER_RATE/s (each transaction's latency), then saturated (tps, the WAL
#               sender's and the relay's CPU); "none" is no relay, "slot" no relay with
#               pg_recvlogical decoding the publication (the cost of logical decoding alone)
#   idle        the relay running IDLE_SECONDS with no traffic: statements/s (pg_stat_statements
#               calls of the database), transactions/s (pg_stat_database), CPU ms/s of the
#               database's backends (the WAL sender included) and of the relay (/proc)
#
# Modes: poll100 (polling every 100 ms, the default), notify (outbox.notify.enabled, poll 1000),
# capture (outbox.capture postgres-logical, reconciliationIntervalMs 1000).
#
#   BUILD_DIR=build bash bench/capture_bench.sh     # RATE=1000 DURATION=10 PGBENCH_SECONDS=10
#   MODES="poll100 capture" FSYNCS=off REPEAT=3 ROUNDS=0 IDLE_SECONDS=0 ...   # a subset
#
# Needs root (the cluster runs as user postgres, as scripts/services.sh does). Writes
# bench/results/capture.json and prints it. Take /tmp/queuebox-bench.lock around it on a shared
# machine: flock /tmp/queuebox-bench.lock bash bench/capture_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-1000}
DURATION=${DURATION:-10}
PGBENCH_SECONDS=${PGBENCH_SECONDS:-10}
PRODUCER_RATE=${PRODUCER_RATE:-1000}  # the fixed-rate producers' transactions/s
ROUNDS=${ROUNDS:-2}
IDLE_SECONDS=${IDLE_SECONDS:-30}  # 0: no idle cases
MODES=${MODES:-poll100 notify capture}
FSYNCS=${FSYNCS:-on off}
REPEAT=${REPEAT:-1}  # latency runs per mode, alternating the modes
# What the publication carries: QueueBox's documented one by default (every column, every change)
PUBLICATION=${PUBLICATION:-FOR TABLE outbox}
PORT=${PORT:-18381}
PG_PORT=${PG_PORT:-18391}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/capture.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target queuebox bench_receiver latency_producer >/dev/null
QB="$BUILD_DIR/apps/queuebox/queuebox"
WORK=$(mktemp -d)
chown postgres:postgres "$WORK"
PIDS=()
PGDATA="$WORK/pg"
BASE="postgresql://postgres@127.0.0.1:$PG_PORT"
DB=qb_bench_capture
pg_ctl() { runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$PGDATA" "$@"; }
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  pg_ctl -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT
runuser -u postgres -- "$PG_BIN/initdb" -D "$PGDATA" -U postgres -A trust >/dev/null

start_pg() {  # fsync on|off
  pg_ctl -l "$WORK/pg.log" -w -t 60 -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -k $WORK \
    -c fsync=$1 -c wal_level=logical -c max_connections=100 \
    -c shared_preload_libraries=pg_stat_statements" start >/dev/null 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
}
stop_pg() { pg_ctl -m fast -w stop >/dev/null; }

config() {  # mode -> $WORK/qb.yml
  local outbox
  case $1 in
  poll100) outbox="{pollIntervalMs: 100}" ;;
  notify) outbox="{pollIntervalMs: 1000, notify: {enabled: true}}" ;;
  capture)
    outbox="{capture: {mode: postgres-logical, enabled: true, stateDirectory: $WORK/capture, \
reconciliationIntervalMs: 1000}}"
    ;;
  esac
  cat >"$WORK/qb.yml" <<YAML
database: {type: postgresql, url: "$BASE/$DB", poolSize: 4}
server: {httpPort: $((PORT + 1))}
outbox: $outbox
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
}

fresh_db() {  # mode: a migrated database, the publication for capture, no slot, no state
  psql -q "$BASE/postgres" -c "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots" \
    -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB" >/dev/null
  rm -rf "$WORK/capture"
  config "$1"
  "$QB" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
  psql -q "$BASE/$DB" -c "CREATE EXTENSION pg_stat_statements" \
    -c "CREATE PUBLICATION queuebox_outbox $PUBLICATION" >/dev/null
}

wait_for_log() {  # file text timeout_s
  local end=$((SECONDS + $3))
  until grep -q "$2" "$1" 2>/dev/null; do
    if ((SECONDS > end)); then echo "timed out waiting for '$2' in $1" >&2; cat "$1" >&2; exit 1; fi
    sleep 0.05
  done
}

RELAY=
start_relay() {  # mode: starts the relay on $WORK/qb.yml and waits until its wake-up is ready
  : >"$WORK/relay.log"
  "$QB" --config "$WORK/qb.yml" run 2>"$WORK/relay.log" &
  RELAY=$!
  PIDS+=("$RELAY")
  wait_for_log "$WORK/relay.log" "is delivering" 30
  case $1 in
  notify) wait_for_log "$WORK/relay.log" "wake-up is listening" 30 ;;
  capture) wait_for_log "$WORK/relay.log" "Capture is streaming" 60 ;;
  esac
}
stop_relay() {
  kill -TERM "$RELAY" 2>/dev/null || true
  wait "$RELAY" || true
}

latency_case() {  # fsync mode -> one JSON line
  local rows=$((RATE * DURATION))
  echo "== fsync=$1 latency $2: $RATE inserts/s for $DURATION s" >&2
  fresh_db "$2"
  "$BUILD_DIR/bench/bench_receiver" --port "$PORT" --expect "$rows" >"$WORK/recv.json" &
  local recv=$!
  PIDS+=("$recv")
  start_relay "$2"
  local producer
  producer=$("$BUILD_DIR/bench/latency_producer" --url "$BASE/$DB" --rate "$RATE" \
    --seconds "$DURATION")
  local end=$((SECONDS + 30))
  while kill -0 "$recv" 2>/dev/null && ((SECONDS < end)); do sleep 0.1; done
  kill -TERM "$recv" 2>/dev/null || true
  wait "$recv" || true
  stop_relay
  echo "   producer $producer" >&2
  echo "   receiver $(cat "$WORK/recv.json")" >&2
  printf '{"fsync":"%s","mode":"%s","producer":%s,"receiver":%s}\n' "$1" "$2" "$producer" \
    "$(cat "$WORK/recv.json")"
}

cat >"$WORK/insert.sql" <<'SQL'
INSERT INTO outbox (topic, key, payload) VALUES ('bench.pgbench', 'k', '{"ts":0}');
SQL
# Producers in each mode: first PRODUCER_RATE single-row INSERT transactions/s (pgbench -R, each
# transaction's latency logged: what a producer waits for at a realistic rate), then as many as
# 4 clients can (the saturated rate, on a machine whose two cores the relay, the receiver and the
# WAL sender share with PostgreSQL). Mode "none": no relay; "slot": no relay, pg_recvlogical
# streams the publication from a slot (logical decoding alone, nothing delivered).
pgbench_case() {  # fsync mode round -> one JSON line
  fresh_db "$(case $2 in none | slot) echo poll100 ;; *) echo "$2" ;; esac)"
  psql -q "$BASE/$DB" -c "CHECKPOINT" >/dev/null
  "$BUILD_DIR/bench/bench_receiver" --port "$PORT" >/dev/null &
  local recv=$!
  PIDS+=("$recv")
  local relay_pid="" decoder=""
  case $2 in
  none) ;;
  slot)
    pg_recvlogical -d "$BASE/$DB" --slot qb_bench_decode --create-slot -P pgoutput >/dev/null
    pg_recvlogical -d "$BASE/$DB" --slot qb_bench_decode --start -o proto_version=1 \
      -o publication_names=queuebox_outbox -f /dev/null &
    decoder=$!
    PIDS+=("$decoder")
    ;;
  *)
    start_relay "$2"
    relay_pid=$RELAY
    ;;
  esac
  sleep 1  # start-up settles (the capture's first wake, the slot's first status update)
  rm -f "$WORK"/pgb_log*
  pgbench -n -c 4 -j 2 -R "$PRODUCER_RATE" -T "$PGBENCH_SECONDS" -l --log-prefix="$WORK/pgb_log" \
    -f "$WORK/insert.sql" "$BASE/$DB" >/dev/null 2>&1
  local fixed
  fixed=$(cat "$WORK"/pgb_log* | python3 -c '
import sys
lat = sorted(int(l.split()[2]) for l in sys.stdin if l.strip())
pick = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] / 1000.0
print("{\"transactions\":%d,\"p50_ms\":%.3f,\"p99_ms\":%.3f}" % (len(lat), pick(0.5), pick(0.99)))')
  # Saturated: where the CPU goes (the WAL sender, the relay) and what the relay sends.
  local walsender sent0
  walsender=$(psql -Atq "$BASE/postgres" -c "SELECT coalesce(string_agg(pid::text, ' '), '') \
FROM pg_stat_activity WHERE backend_type = 'walsender'")
  psql -Atq "$BASE/$DB" -c "SELECT pg_stat_statements_reset()" >/dev/null
  sent0=$(psql -Atq "$BASE/$DB" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
  local ws0 relay0
  # shellcheck disable=SC2086
  ws0=$(cpu_ticks $walsender)
  relay0=$(cpu_ticks $relay_pid)
  local tps
  tps=$(pgbench -n -c 4 -j 2 -T "$PGBENCH_SECONDS" -f "$WORK/insert.sql" "$BASE/$DB" 2>/dev/null |
    sed -n 's/^tps = \([0-9.]*\) (without initial connection time)/\1/p')
  local ws1 relay1 relay_statements sent1
  # shellcheck disable=SC2086
  ws1=$(cpu_ticks $walsender)
  relay1=$(cpu_ticks $relay_pid)
  sent1=$(psql -Atq "$BASE/$DB" -c "SELECT count(*) FROM outbox WHERE state = 'sent'")
  relay_statements=$(psql -Atq "$BASE/$DB" -c "SELECT coalesce(sum(calls), 0) FROM \
pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
AND query NOT LIKE 'INSERT INTO outbox (topic, key, payload) VALUES%' \
AND query NOT LIKE '%pg_stat_statements%' AND query NOT LIKE 'SELECT count(*) FROM outbox%'")
  if [[ -n $relay_pid ]]; then stop_relay; fi
  if [[ -n $decoder ]]; then
    kill -TERM "$decoder" 2>/dev/null || true
    wait "$decoder" 2>/dev/null || true
  fi
  kill -TERM "$recv" 2>/dev/null || true
  wait "$recv" || true
  local hz
  hz=$(getconf CLK_TCK)
  echo "== fsync=$1 producers $2 round $3: $tps tps; at $PRODUCER_RATE/s $fixed" >&2
  printf '{"fsync":"%s","mode":"%s","round":%s,"tps":%s,"seconds":%s,"hz":%s,"walsender_ticks":%s,"relay_ticks":%s,"relay_statements":%s,"sent":%s,"fixed_rate":%s}\n' \
    "$1" "$2" "$3" "$tps" "$PGBENCH_SECONDS" "$hz" "$((ws1 - ws0))" "$((relay1 - relay0))" \
    "$relay_statements" "$((sent1 - sent0))" "$fixed"
}

source bench/proc_cpu.sh
idle_case() {  # fsync mode -> one JSON line
  echo "== fsync=$1 idle $2: $IDLE_SECONDS s without traffic" >&2
  fresh_db "$2"
  "$BUILD_DIR/bench/bench_receiver" --port "$PORT" >/dev/null &
  local recv=$!
  PIDS+=("$recv")
  start_relay "$2"
  sleep 3  # start-up settles (first cycles, the capture slot's creation)
  local q="SELECT (SELECT coalesce(sum(calls), 0) FROM pg_stat_statements WHERE dbid = \
(SELECT oid FROM pg_database WHERE datname = current_database())), \
(SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database())"
  local backends
  backends=$(psql -Atq "$BASE/postgres" -c "SELECT string_agg(pid::text, ' ') FROM \
pg_stat_activity WHERE datname = '$DB' AND pid <> pg_backend_pid()")
  read -r calls0 xacts0 < <(psql -Atq -F ' ' "$BASE/$DB" -c "$q")
  local cpu0 relay0
  # shellcheck disable=SC2086
  cpu0=$(cpu_ticks $backends)
  relay0=$(cpu_ticks "$RELAY")
  sleep "$IDLE_SECONDS"
  # shellcheck disable=SC2086
  local cpu1 relay1
  cpu1=$(cpu_ticks $backends)
  relay1=$(cpu_ticks "$RELAY")
  read -r calls1 xacts1 < <(psql -Atq -F ' ' "$BASE/$DB" -c "$q")
  stop_relay
  kill -TERM "$recv" 2>/dev/null || true
  wait "$recv" || true
  local hz
  hz=$(getconf CLK_TCK)
  printf '{"fsync":"%s","mode":"%s","seconds":%s,"statements":%s,"transactions":%s,"backend_ticks":%s,"relay_ticks":%s,"hz":%s,"backends":%s}\n' \
    "$1" "$2" "$IDLE_SECONDS" "$((calls1 - calls0 - 1))" "$((xacts1 - xacts0 - 1))" \
    "$((cpu1 - cpu0))" "$((relay1 - relay0))" "$hz" "$(wc -w <<<"$backends")"
}

LAT="$WORK/latency.jsonl" PGB="$WORK/pgbench.jsonl" IDLE="$WORK/idle.jsonl"
: >"$LAT"
: >"$PGB"
: >"$IDLE"
for fsync in $FSYNCS; do
  start_pg "$fsync"
  for _ in $(seq 1 "$REPEAT"); do
    for mode in $MODES; do latency_case "$fsync" "$mode" >>"$LAT"; done
  done
  for round in $(seq 1 "$ROUNDS"); do
    for mode in none slot $MODES; do pgbench_case "$fsync" "$mode" "$round" >>"$PGB"; done
  done
  if ((IDLE_SECONDS > 0)); then
    for mode in $MODES; do idle_case "$fsync" "$mode" >>"$IDLE"; done
  fi
  stop_pg
done

PUBLICATION="$PUBLICATION" PRODUCER_RATE="$PRODUCER_RATE" python3 - "$LAT" "$PGB" "$IDLE" "$RATE" "$DURATION" "$PGBENCH_SECONDS" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
lat = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
pgb = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
idle = [json.loads(l) for l in open(sys.argv[3]) if l.strip()]
rate, duration, pgb_s = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
def mean(xs): return round(sum(xs) / len(xs), 1) if xs else None
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
out = {
  "benchmark": "change capture vs NOTIFY vs polling: latency, producers' insert rate, idle load",
  "insert_rate_per_s": rate, "duration_s": duration,
  "publication": "CREATE PUBLICATION queuebox_outbox " + os.environ["PUBLICATION"],
  "targets_capture": {"p50_ms": 5, "p99_ms": 25, "producer_rate": "no measurable loss"},
  "latency": [{
      "fsync": c["fsync"], "mode": c["mode"],
      "p50_ms": c["receiver"]["insert_to_receipt_p50_ms"],
      "p99_ms": c["receiver"]["insert_to_receipt_p99_ms"],
      "received": c["receiver"]["received"], "duplicates": c["receiver"]["duplicates"],
      "producer_rate_per_s": round(c["producer"]["rate_per_s"], 1),
      "producer_max_schedule_lag_ms": round(c["producer"]["max_schedule_lag_ms"], 1),
  } for c in lat],
  "producers": {
      "tool": f"pgbench -n -c 4 -j 2 -T {pgb_s}, one single-row INSERT per transaction, the relay "
              "running in the mode and delivering (none: no relay; slot: no relay, pg_recvlogical "
              "decoding the publication); first at a fixed rate (-R), then saturated",
      "runs": pgb,
      "mean_tps": {f"{f}/{m}": mean([r["tps"] for r in pgb if r["fsync"] == f and r["mode"] == m])
                   for f in ("on", "off") for m in ("none", "slot", "poll100", "notify", "capture")},
      # saturated, per producer transaction: CPU µs of the WAL sender and of the relay, the
      # relay's statements; and the rows the relay sent in that window
      "saturated": [{
          "fsync": r["fsync"], "mode": r["mode"], "round": r["round"], "tps": r["tps"],
          "walsender_cpu_us": round(1e6 * r["walsender_ticks"] / r["hz"] / (r["tps"] * r["seconds"]), 1),
          "relay_cpu_us_per_sent": round(1e6 * r["relay_ticks"] / r["hz"] / r["sent"], 1) if r["sent"] else None,
          "sent_per_s": round(r["sent"] / r["seconds"], 1),
          "relay_statements_per_insert": round(r["relay_statements"] / (r["tps"] * r["seconds"]), 3),
      } for r in pgb if r.get("tps")],
      "fixed_rate": {
          "rate_per_s": int(os.environ["PRODUCER_RATE"]),
          "runs": [{"fsync": r["fsync"], "mode": r["mode"], "round": r["round"], **r["fixed_rate"]}
                   for r in pgb],
      },
  },
  "idle": [{
      "fsync": i["fsync"], "mode": i["mode"], "seconds": i["seconds"],
      "statements_per_s": round(i["statements"] / i["seconds"], 2),
      "transactions_per_s": round(i["transactions"] / i["seconds"], 2),
      "backend_cpu_ms_per_s": round(1000 * i["backend_ticks"] / i["hz"] / i["seconds"], 2),
      "relay_cpu_ms_per_s": round(1000 * i["relay_ticks"] / i["hz"] / i["seconds"], 2),
      "backends": i["backends"],
  } for i in idle],
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "load_average_at_end": os.getloadavg()[0],
              "postgres": "15, private cluster: wal_level=logical, synchronous_commit on, "
                          "fsync as in each row",
              "note": "shared 2-core machine: compare the modes of one run, not runs"},
}
print(json.dumps(out, indent=2))
PY
cat "$OUT"
