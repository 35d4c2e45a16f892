#!/usr/bin/env bash
# SQLite, the embedded default (issue 6 item 7, with items 1, 2, 4, 5 and 8 on SQLite):
#   1. claim drains (bench/claim_backlog.cc: the store's own Claim + fenced MarkSent, no
#      publishing, batch BATCH) from three backlogs with payload '{}':
#        small:   10,000 rows over 1,000 keys                  drained completely
#        uniform: 1,000,000 rows over 1,000 keys               first MAX_ROWS rows drained
#        skewed:  100,000 rows of key 'hot' first, then         first MAX_ROWS rows drained
#                 900,000 over 999 other keys
#      rows/s and each backlog's rate over the small one's;
#   2. EXPLAIN QUERY PLAN and timing of the claim and ack statements at 1,000,000 rows
#      (bench/sqlite_claim_plans.cc) on a copy of each 1M file as loaded (printed to stderr);
#   3. the floor (bench/bench_floor.cc: claim + ack back to back) and the relay (`queuebox run
#      --until-idle`) to nginx answering 204 with keep-alive, on identical backlogs of ROWS rows of
#      ~1 KiB over KEYS keys: msg/s, relay/floor, insert-to-sent p50/p99, peak RSS;
#   4. start-up: process start to the first claim (STARTS runs on a migrated, empty outbox);
#   5. statements per 10,000 messages (claims, acks, renewals), counted in the processes by the
#      LD_PRELOAD shim bench/sqlite_stmt_count.c.
# Each SQLite file is fresh. Every file is loaded first; then the measured parts run in one go
# holding flock $LOCK (loading does not hold it).
# Writes bench/results/sqlite_bench.json and prints it.
#
#   BUILD_DIR=build-sqlite bash bench/sqlite_bench.sh
#   MAX_ROWS=100000 ROWS=30000 bash bench/sqlite_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BATCH=${BATCH:-500}
MAX_ROWS=${MAX_ROWS:-200000}
BIG=${BIG:-1000000}  # rows of the uniform and skewed backlogs
HOT=${HOT:-100000}   # rows of the hot key at the head of the skewed one
ROWS=${ROWS:-100000}
KEYS=${KEYS:-1000}
CONCURRENCY=${CONCURRENCY:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
STARTS=${STARTS:-5}
PORT=${PORT:-18561}  # the sink; the relay admin port is PORT + 1
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/sqlite_bench.json}
WORK=${WORK:-$(mktemp -d)}
LOCK=${LOCK:-/tmp/queuebox-bench.lock}  # one measured benchmark at a time on the shared machine
exec 9>"$LOCK"
lock() { flock 9; }
unlock() { flock -u 9; }

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
cmake --build "$BUILD_DIR" --target queuebox bench_floor claim_backlog sqlite_claim_plans >/dev/null
QB="$BUILD_DIR/apps/queuebox/queuebox"
SHIM="$WORK/libqbcount.so"
cc -O2 -shared -fPIC -o "$SHIM" bench/sqlite_stmt_count.c -ldl -lpthread
source bench/nginx_sink.sh
cleanup() {
  nginx_sink_stop "$WORK/ngx"
  [ -n "${KEEP_WORK:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

config() {  # name -> $WORK/name.yml for $WORK/name.db
  cat >"$WORK/$1.yml" <<YAML
database: {type: sqlite, url: "$WORK/$1.db"}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
outbox: {pollIntervalMs: 50, batchSize: $BATCH, concurrency: $CONCURRENCY, claimTimeoutMs: 60000}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /events, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
}

prepare() {  # name, then SQL run in one transaction (a fresh file, migrated by `queuebox migrate`)
  local name=$1
  shift
  rm -f "$WORK/$name.db"*
  config "$name"
  "$QB" --config "$WORK/$name.yml" migrate >/dev/null 2>&1
  # A large page cache only for the load: the random ids' unique index fits in memory.
  local IFS=';'  # "$*" joins the statements with ';'
  sqlite3 "$WORK/$name.db" "PRAGMA cache_size = -400000; PRAGMA synchronous = OFF;" \
    "BEGIN; $*; COMMIT;" >/dev/null
}

ins() {  # rows, key expression over i -> INSERT of rows with payload '{}'
  echo "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $1)
        INSERT INTO outbox (topic, key, payload) SELECT 'bench', $2, '{}' FROM g"
}

counted() {  # counts file, then command: runs it with the statement-counting shim
  local counts=$1
  shift
  QB_STMT_COUNT_OUT="$counts" LD_PRELOAD="$SHIM" "$@"
}

drain() {  # name, max rows: drains the loaded file with the counting shim, prints JSON
  local name=$1 max=$2
  echo "== drain $name (batch $BATCH, max rows $max)" >&2
  local res
  res=$(counted "$WORK/$name.counts.json" "$BUILD_DIR/bench/claim_backlog" --type sqlite \
    --url "$WORK/$name.db" --batch "$BATCH" --max-rows "$max" --hot-key hot)
  echo "$res" >&2
  echo "{\"name\": \"$name\", \"drain\": $res, \"counts\": $(cat "$WORK/$name.counts.json")}"
  rm -f "$WORK/$name.db"*
}

plans() {  # name: EXPLAIN QUERY PLAN and timing on the copy of the file as loaded
  local name=$1
  echo "== plans $name" >&2
  "$BUILD_DIR/bench/sqlite_claim_plans" --db "$WORK/plans_$name.db" --batch "$BATCH" --runs 5 \
    >"$WORK/plans_$name.txt"
  cat "$WORK/plans_$name.txt" >&2
  tail -1 "$WORK/plans_$name.txt"
  rm -f "$WORK/plans_$name.db"*
}

relay_rows() {
  echo "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < $ROWS)
        INSERT INTO outbox (topic, key, payload) SELECT 'bench.event', 'key-' || (i % $KEYS),
        json_object('i', i, 'pad', replace(hex(zeroblob($PAD / 2)), '0', 'x')) FROM g"
}

# Phase 1, not measured: every file loaded (the 1M ones take minutes on shared cores).
echo "== loading" >&2
prepare small "$(ins 10000 "'key-' || (i % 1000)")"
prepare uniform "$(ins "$BIG" "'key-' || (i % 1000)")"
prepare skewed "$(ins "$HOT" "'hot'")" "$(ins $((BIG - HOT)) "'key-' || (i % 999)")"
for name in uniform skewed; do cp "$WORK/$name.db" "$WORK/plans_$name.db"; done
prepare floor "$(relay_rows)"
prepare relay "$(relay_rows)"
prepare startup "SELECT 1"
nginx_sink_start "$WORK/ngx" "$PORT"

# Phase 2, measured, under the lock.
lock
SMALL=$(drain small 0)
UNIFORM=$(drain uniform "$MAX_ROWS")
SKEWED=$(drain skewed "$MAX_ROWS")
PLAN_UNIFORM=$(plans uniform)
PLAN_SKEWED=$(plans skewed)

echo "== floor: claim + ack, no publishing ($ROWS rows, batch $BATCH)" >&2
FLOOR=$("$BUILD_DIR/bench/bench_floor" --config "$WORK/floor.yml")
echo "$FLOOR" >&2

echo "== relay: SQLite -> HTTP sink (nginx, return 204, keep-alive)" >&2
# Latency is insert to sent: the backlog counts as inserted now, not when it was loaded.
sqlite3 "$WORK/relay.db" "UPDATE outbox SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
  scheduled_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
start=$(date +%s%N)
counted "$WORK/relay.counts.json" "$QB" --config "$WORK/relay.yml" run --until-idle \
  --idle-timeout-ms 600000 2>"$WORK/relay.log"
end=$(date +%s%N)
RSS_KB=$(grep -o '"max_rss_kb":"[0-9]*"' "$WORK/relay.log" | tail -1 | grep -o '[0-9]*' || echo 0)

echo "== start-up: process start to first claim ($STARTS runs, migrated empty outbox)" >&2
STARTUPS="["
for n in $(seq 1 "$STARTS"); do
  t0=$(date +%s%N)
  counted "$WORK/startup.counts.json" "$QB" --config "$WORK/startup.yml" run --until-idle \
    2>"$WORK/startup.log"
  STARTUPS+="{\"t0_ns\": $t0, \"counts\": $(cat "$WORK/startup.counts.json"), \"max_rss_kb\": $(
    grep -o '"max_rss_kb":"[0-9]*"' "$WORK/startup.log" | tail -1 | grep -o '[0-9]*' || echo 0)}"
  [ "$n" -lt "$STARTS" ] && STARTUPS+=", "
done
unlock
STARTUPS+="]"

python3 - "$SMALL" "$UNIFORM" "$SKEWED" "$PLAN_UNIFORM" "$PLAN_SKEWED" "$FLOOR" \
  "$WORK/relay.db" "$WORK/relay.counts.json" "$start" "$end" "$RSS_KB" "$STARTUPS" \
  "$BATCH" "$MAX_ROWS" "$ROWS" "$KEYS" "$CONCURRENCY" "$BIG" "$HOT" >"$OUT" <<'PY'
import json, os, platform, sqlite3, subprocess, sys
small, uniform, skewed, plan_u, plan_s, floor = (json.loads(a) for a in sys.argv[1:7])
relay_db, relay_counts = sys.argv[7], json.load(open(sys.argv[8]))
start, end, rss = int(sys.argv[9]), int(sys.argv[10]), int(sys.argv[11])
startups = json.loads(sys.argv[12])
batch, max_rows, rows, keys, conc, big, hot = (int(a) for a in sys.argv[13:20])

def kinds(counts):  # statement executions by kind, from the shim's SQL heads
    out = {"claims": 0, "acks": 0, "renewals": 0, "other": 0}
    for s in counts["statements"]:
        sql = s["sql"]
        if s["claim"]:
            out["claims"] += s["executions"]
        elif "SET \"state\" = 'sent'" in sql:
            out["acks"] += s["executions"]
        elif "SET \"lease_expires_at\" = strftime" in sql:
            out["renewals"] += s["executions"]
        else:
            out["other"] += s["executions"]
    return out

def per10k(k, n):
    return {name: round(10000 * v / n, 1) for name, v in k.items()} if n else None

base = small["drain"]["rows_per_s"]
def entry(r):
    d = r["drain"]
    return {"rows_drained": d["rows"], "hot_key_rows": d["hot_key_rows"], "claims": d["claims"],
            "seconds": round(d["seconds"], 2), "rows_per_s": round(d["rows_per_s"], 1),
            "ms_per_claim": round(d["ms_per_claim"], 2),
            "vs_small": round(d["rows_per_s"] / base, 3) if base else None,
            "statements_per_10k_messages": per10k(kinds(r["counts"]), d["rows"])}

db = sqlite3.connect(relay_db)
lat = [r[0] for r in db.execute(
    "SELECT (julianday(updated_at) - julianday(created_at)) * 86400000.0 FROM outbox "
    "WHERE state = 'sent' ORDER BY 1")]
# Receive rate: sent rows over first claim to last acknowledgement (the PostgreSQL run's figure).
span_s = db.execute(
    "SELECT (julianday(max(updated_at)) - julianday(min(claimed_at))) * 86400.0 FROM outbox "
    "WHERE state = 'sent'").fetchone()[0]
sent = len(lat)
pct = lambda p: round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None
recv_rate = sent / span_s if span_s else 0
wall = (end - start) / 1e9
relay_kinds = kinds(relay_counts)
starts_ms = [round((s["counts"]["first_claim_unix_ns"] - s["t0_ns"]) / 1e6, 1) for s in startups]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(json.dumps({
  "benchmark": "SQLite, the embedded default (bench/sqlite_bench.sh)",
  "claim_drains": {
    "method": "claim + fenced MarkSent, no publishing (bench/claim_backlog.cc)",
    "batch_size": batch, "payload": "{}",
    "backlogs": {
      "small": "10,000 rows over 1,000 keys, drained completely",
      "uniform": f"{big:,} rows over 1,000 keys, first {max_rows} rows drained",
      "skewed": f"{hot:,} rows of key 'hot' first, then {big - hot:,} over 999 keys; first {max_rows} rows drained"},
    "small": entry(small), "uniform": entry(uniform), "skewed": entry(skewed),
    "goal": "uniform.vs_small >= 0.9 and skewed.vs_small >= 0.9 (issue 6 item 1)"},
  "statement_timing_on_the_big_backlogs": {
    "method": "bench/sqlite_claim_plans.cc: the claim 5 times in BEGIN IMMEDIATE ... ROLLBACK, then one kept claim acknowledged",
    "uniform_window_path": plan_u, "skewed_fallback_path": plan_s},
  "relay_http": {
    "method": "floor = bench_floor (claim + ack, no publish); relay = queuebox run --until-idle -> nginx 204 keep-alive; same backlog",
    "rows": rows, "keys": keys, "payload_bytes": 1024, "batch_size": batch, "concurrency": conc,
    "floor_rows_per_s": round(floor["rows_per_s"], 1),
    "relay_receive_rate_per_s": round(recv_rate, 1),
    "relay_rows_per_s_wall": round(sent / wall, 1) if wall else None,
    "relay_vs_floor": round(recv_rate / floor["rows_per_s"], 3) if floor["rows_per_s"] else None,
    "insert_to_sent_p50_ms": pct(0.5), "insert_to_sent_p99_ms": pct(0.99),
    "rows_sent": sent, "peak_rss_mb": round(rss / 1024, 1),
    "statements": relay_kinds, "statements_per_10k_messages": per10k(relay_kinds, sent)},
  "startup": {
    "method": "queuebox run --until-idle on a migrated, empty outbox: shell timestamp before exec to the first claim statement (shim)",
    "start_to_first_claim_ms": starts_ms,
    "peak_rss_mb": [round(s["max_rss_kb"] / 1024, 1) for s in startups]},
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "sqlite": sqlite3.sqlite_version, "load_average": os.getloadavg()},
}, indent=2))
PY
cat "$OUT"
