#!/usr/bin/env bash
# A peer side by side (issue 6 item 3): the same backlog drained into the same receiver by
#   1. ours: the queuebox binary (run --until-idle, PostgreSQL store, http destination);
#   2. the npm package pg-transactional-outbox, its polling listener;
#   3. the same package, its logical-replication listener (pgoutput, wal_level=logical);
# the peer's message handler POSTs each message over a keep-alive agent (bench/peer/drain.mjs).
#
#   BUILD_DIR=build bash bench/peer_bench.sh   # ROWS=50000 KEYS=1000 BATCH=500 CONCURRENCY=1000
#   QB_SVC_DIR=/tmp/qb-durable PG_DURABLE=1 PG_PORT=54339 bash bench/peer_bench.sh   # fsync on
#
# Receiver: one local nginx answering 204 with keep-alive, one path per run; its access log
# (path + X-Message-Id) is how delivery is counted. Backlog: ROWS rows of ~1 KiB over KEYS keys,
# committed in transactions of CHUNK rows before the consumer starts. Timed for each run: from
# the database clock read just before the consumer starts to the last acknowledgement written
# (ours: max(updated_at) of the sent rows; the peer: max(processed_at), clock_timestamp() of
# its completion UPDATE). A run counts only if the database shows every row done and nginx
# logged every message id. Writes bench/results/peer_pg_transactional_outbox.json.
#
# The package and its pg driver are installed with the machine's npm into a mktemp folder (never
# into the repository), at the versions pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-50000}
KEYS=${KEYS:-1000}
CHUNK=${CHUNK:-1000}
BATCH=${BATCH:-500}
CONCURRENCY=${CONCURRENCY:-1000}
PAD=${PAD:-960}  # payload ~1 KiB with the other fields
PORT=${PORT:-18381}  # the sink; the relay admin port is PORT + 1 (not latency_bench.sh's 18281)
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/peer_pg_transactional_outbox.json}
PEER_VERSION=0.5.7  # pg-transactional-outbox
PG_VERSION=8.23.1   # pg (the package's dependency, also imported by the harness)
# The peer's knobs, tuned by a sweep on this machine (bench/README.md): polling batch = messages
# in flight, handler pool = pg connections, each carrying one message's transaction (the HTTP call
# included); polling wants batch = pool, as large as the server's connections allow.
PEER_BATCH=${PEER_BATCH:-200}
PEER_POLL_MS=${PEER_POLL_MS:-10}
PEER_LOCK_MS=${PEER_LOCK_MS:-5000}
PEER_POLL_POOL=${PEER_POLL_POOL:-200}
PEER_REPL_POOL=${PEER_REPL_POOL:-20}
PEER_TIMEOUT_S=${PEER_TIMEOUT_S:-300}

bash scripts/services.sh start pg >/dev/null
eval "$(bash scripts/services.sh env)"
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$BUILD_DIR" --target queuebox >/dev/null
QB="$BUILD_DIR/apps/queuebox/queuebox"
base=${QB_TEST_PG_URL%/*}
SLOT=qb_peer_slot_$$  # replication slot names are server-wide
WORK=$(mktemp -d)
cleanup() {
  nginx_sink_stop "$WORK/ngx"
  psql -q "$QB_TEST_PG_URL" -c "SELECT pg_drop_replication_slot(slot_name)
    FROM pg_replication_slots WHERE slot_name = '$SLOT' AND NOT active" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "== installing pg-transactional-outbox@$PEER_VERSION pg@$PG_VERSION into a scratch folder" >&2
mkdir -p "$WORK/peer"
cp bench/peer/drain.mjs "$WORK/peer/"
(cd "$WORK/peer" && npm init -y >/dev/null &&
  npm install --no-audit --no-fund --loglevel=error \
    "pg-transactional-outbox@$PEER_VERSION" "pg@$PG_VERSION" >/dev/null)

source bench/nginx_sink.sh
nginx_sink_start "$WORK/ngx" "$PORT" "log_format ids '\$uri \$http_x_message_id';
  access_log $WORK/ngx/access.log ids buffer=256k flush=1s;"

fresh_db() {  # name
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE IF EXISTS $1 WITH (FORCE)" -c "CREATE DATABASE $1"
}
fill() {  # db, INSERT prefix, SELECT list over i -> ROWS rows, one transaction per CHUNK rows
  local lo
  for ((lo = 1; lo <= ROWS; lo += CHUNK)); do
    echo "$2 SELECT $3 FROM generate_series($lo, $((lo + CHUNK - 1 < ROWS ? lo + CHUNK - 1 : ROWS))) AS i;"
  done | psql -q -v ON_ERROR_STOP=1 "$base/$1"
  psql -q "$base/$1" -c "ANALYZE outbox"
}
PAYLOAD="jsonb_build_object('ts', (extract(epoch FROM clock_timestamp()) * 1000000)::bigint,
  'i', i, 'pad', repeat('x', $PAD))"
KEY="'key-' || (i % $KEYS)"
db_now() { psql -Atq "$1" -c "SELECT extract(epoch FROM clock_timestamp())"; }
delivered() {  # path -> "requests distinct-ids" in nginx's log; reopen flushes its buffer
  local deadline=$((SECONDS + 10)) lines distinct
  nginx -c "$WORK/ngx/nginx.conf" -s reopen 2>/dev/null
  while :; do
    grep "^/$1 " "$WORK/ngx/access.log" >"$WORK/ngx/$1.ids" || true
    lines=$(wc -l <"$WORK/ngx/$1.ids")
    distinct=$(sort -u "$WORK/ngx/$1.ids" | wc -l)
    if [ "$distinct" -ge "$ROWS" ] || [ $SECONDS -ge $deadline ]; then break; fi
    sleep 0.2
  done
  echo "$lines $distinct"
}
load() { cut -d' ' -f1-3 /proc/loadavg; }
proc_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # pid -> user + system clock ticks

echo "== ours: queuebox run --until-idle ($ROWS rows, batch $BATCH, concurrency $CONCURRENCY)" >&2
fresh_db qb_peer_ours
cat >"$WORK/ours.yml" <<YAML
database: {type: postgresql, url: "$base/qb_peer_ours", poolSize: 4}
server: {address: 127.0.0.1, httpPort: $((PORT + 1))}
outbox: {pollIntervalMs: 50, batchSize: $BATCH, concurrency: $CONCURRENCY, claimTimeoutMs: 60000}
routes: [{topicPattern: "**", destination: sink}]
destinations: {sink: {type: http, baseUrl: "http://127.0.0.1:$PORT", path: /ours, timeoutMs: 30000}}
logging: {format: json, level: info}
YAML
"$QB" --config "$WORK/ours.yml" migrate 2>/dev/null
fill qb_peer_ours "INSERT INTO outbox (topic, key, payload)" "'bench.event', $KEY, $PAYLOAD"
OURS_LOAD=$(load)
exec 9>/tmp/queuebox-bench.lock  # measured runs: one benchmark measures at a time
flock 9
NGX_WORKER=$(pgrep -P "$(cat "$WORK/ngx/nginx.pid")")
ngx0=$(proc_ticks "$NGX_WORKER")
t0=$(db_now "$base/qb_peer_ours")
w0=$(date +%s.%N)
# The relay's own CPU seconds (user + system, the kernel's accounting of the child process).
OURS_CPU=$(python3 - "$WORK/ours.log" "$QB" --config "$WORK/ours.yml" run --until-idle \
  --idle-timeout-ms 600000 <<'PY'
import resource, subprocess, sys
with open(sys.argv[1], "w") as log:
    subprocess.run(sys.argv[2:], stdout=subprocess.DEVNULL, stderr=log, check=True)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(round(u.ru_utime + u.ru_stime, 3))
PY
)
w1=$(date +%s.%N)
ngx1=$(proc_ticks "$NGX_WORKER")
flock -u 9
OURS_LOAD="$OURS_LOAD / $(load)"
OURS=$(psql -Atq "$base/qb_peer_ours" -c "SELECT json_build_object('done', count(*),
    'seconds', extract(epoch FROM max(updated_at)) - $t0, 'wall_s', $w1 - $w0)
  FROM outbox WHERE state = 'sent'")
OURS_NGX=$(delivered ours)
echo "$OURS $OURS_NGX load $OURS_LOAD" >&2

peer_measure() {  # mode, handler pool, NAME -> NAME (drain.mjs's JSON), NAME_LOAD, NAME_NGX
  local before result ngx
  before=$(load)
  flock 9
  result=$(cd "$WORK/peer" && PG_URL="$base/qb_peer_$1" ROWS=$ROWS \
    SINK_URL="http://127.0.0.1:$PORT/$1" BATCH=$PEER_BATCH POLL_MS=$PEER_POLL_MS \
    LOCK_MS=$PEER_LOCK_MS HANDLER_POOL=$2 SOCKETS=$CONCURRENCY PUBLICATION=qb_peer_pub \
    SLOT=$SLOT TIMEOUT_S=$PEER_TIMEOUT_S node drain.mjs "$1" 2>"$WORK/$1.log") || true
  flock -u 9
  printf -v "$3" '%s' "$result"
  printf -v "$3_LOAD" '%s' "$before / $(load)"
  ngx=$(delivered "$1")
  printf -v "$3_NGX" '%s' "$ngx"
  echo "$result at nginx (requests, distinct ids): $ngx" >&2
}
PEER_COLUMNS="gen_random_uuid(), 'bench', $KEY, 'bench.event', $KEY, $PAYLOAD"
PEER_INSERT="INSERT INTO outbox (id, aggregate_type, aggregate_id, message_type, segment, payload)"

echo "== peer: polling listener (batch $PEER_BATCH, handler pool $PEER_POLL_POOL)" >&2
fresh_db qb_peer_polling
(cd "$WORK/peer" && node drain.mjs sql polling) | psql -q "$base/qb_peer_polling" 2>/dev/null
fill qb_peer_polling "$PEER_INSERT" "$PEER_COLUMNS"
peer_measure polling "$PEER_POLL_POOL" POLL

echo "== peer: logical-replication listener (segment mutex, handler pool $PEER_REPL_POOL)" >&2
# The slot exists before the backlog is inserted, so every backlog row is in its stream; the
# listener starts after the last insert committed, like the other two consumers.
fresh_db qb_peer_replication
(cd "$WORK/peer" && node drain.mjs sql replication) | psql -q "$base/qb_peer_replication" 2>/dev/null
psql -q "$base/qb_peer_replication" \
  -c "CREATE PUBLICATION qb_peer_pub FOR TABLE public.outbox WITH (publish = 'insert')"
psql -Atq "$base/qb_peer_replication" \
  -c "SELECT pg_create_logical_replication_slot('$SLOT', 'pgoutput')" >/dev/null
fill qb_peer_replication "$PEER_INSERT" "$PEER_COLUMNS"
peer_measure replication "$PEER_REPL_POOL" REPL
psql -q "$QB_TEST_PG_URL" -c "SELECT pg_drop_replication_slot('$SLOT')" >/dev/null

echo "== ceiling: the row work alone, 2 sessions (bench/row_ceiling.sh)" >&2
# The same backlog in our schema, drained by the least database work any relay on it must do,
# with no delivery: with the receiver's CPU per request it bounds what any relay could reach here.
fresh_db qb_peer_ceiling
sed "s#/qb_peer_ours\"#/qb_peer_ceiling\"#" "$WORK/ours.yml" >"$WORK/ceiling.yml"
"$QB" --config "$WORK/ceiling.yml" migrate 2>/dev/null
fill qb_peer_ceiling "INSERT INTO outbox (topic, key, payload)" "'bench.event', $KEY, $PAYLOAD"
flock 9
CEIL=$(bash bench/row_ceiling.sh "$base/qb_peer_ceiling" 2 "$BATCH")
flock -u 9
echo "$CEIL" >&2
PG_DURABILITY=$(psql -qAt "$QB_TEST_PG_URL" -c "SELECT 'fsync ' || current_setting('fsync')
  || ', synchronous_commit ' || current_setting('synchronous_commit')")
for db in qb_peer_ours qb_peer_polling qb_peer_replication qb_peer_ceiling; do
  psql -q "$QB_TEST_PG_URL" -c "DROP DATABASE $db WITH (FORCE)"
done

python3 - "$OURS" "$OURS_NGX" "$OURS_LOAD" "$POLL" "$POLL_NGX" "$POLL_LOAD" "$REPL" "$REPL_NGX" \
  "$REPL_LOAD" "$ROWS" "$KEYS" "$CHUNK" "$BATCH" "$CONCURRENCY" "$PEER_VERSION" "$PG_VERSION" \
  "$CEIL" "$OURS_CPU" "$((ngx1 - ngx0))" "$(getconf CLK_TCK)" "$PG_DURABILITY" >"$OUT" <<'PY'
import json, os, platform, subprocess, sys
a = sys.argv[1:]
rows = int(a[9])

def run(result, ngx, load):
    lines, distinct = (int(x) for x in ngx.split())
    r = json.loads(result) if result.strip() else {}
    done = r.get("done", r.get("processed", 0))
    ok = done >= rows and distinct >= rows and r.get("seconds") is not None
    out = {"rows": rows, "verified": ok, "done_in_database": done,
           "nginx_requests": lines, "nginx_distinct_ids": distinct,
           "duplicates_at_receiver": lines - distinct,
           "seconds": round(r["seconds"], 3) if ok else None,
           "msg_per_s": round(rows / r["seconds"], 1) if ok else None,
           "load_average_before_after": load}
    for k in ("wall_s", "wall_until_confirmed_s", "handler_calls", "warnings", "settings"):
        if k in r:
            out[k] = r[k]
    return out

ours, poll, repl = run(*a[0:3]), run(*a[3:6]), run(*a[6:9])
ours["settings"] = {"batchSize": int(a[12]), "concurrency": int(a[13]), "poolSize": 4,
                    "pollIntervalMs": 50, "claimTimeoutMs": 60000}
def ratio(x):
    return round(ours["msg_per_s"] / x["msg_per_s"], 2) if ours["msg_per_s"] and x["msg_per_s"] else None
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
node = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
npm = subprocess.run(["npm", "--version"], capture_output=True, text=True).stdout.strip()
r_poll, r_repl = ratio(poll), ratio(repl)
# What bounds the ratio on this machine: CPU per message of the least database work (the ceiling
# run's backends), of the receiver (nginx's worker during our drain) and of our relay.
ceiling = json.loads(a[16])
cpu_us = {"bare_row_work_postgres": ceiling["backend_cpu_us_per_msg"],
          "nginx_per_request": round(int(a[18]) / int(a[19]) * 1e6 / rows, 1),
          "ours_relay": round(float(a[17]) * 1e6 / rows, 1) if a[17] else None}
cores = os.cpu_count()
bound = round(cores * 1e6 / (cpu_us["bare_row_work_postgres"] + cpu_us["nginx_per_request"]), 0)
needed = {"polling_50x": round(50 * poll["msg_per_s"], 0) if poll["msg_per_s"] else None,
          "replication_20x": round(20 * repl["msg_per_s"], 0) if repl["msg_per_s"] else None}
print(json.dumps({
  "benchmark": "backlog drain into nginx (204, keep-alive): queuebox vs pg-transactional-outbox "
               "polling and logical-replication listeners; timed from the database clock before "
               "the consumer starts to the last acknowledgement written",
  "rows": rows, "keys": int(a[10]), "payload_bytes": 1024, "insert_chunk_rows": int(a[11]),
  "ours": ours, "peer_polling": poll, "peer_replication": repl,
  "ours_over_polling": r_poll, "ours_over_replication": r_repl,
  "targets": {"ours_over_polling": 50, "ours_over_replication": 20},
  "met": {"polling": r_poll is not None and r_poll >= 50,
          "replication": r_repl is not None and r_repl >= 20},
  "ceiling": {
    "row_work": ceiling,
    "cpu_us_per_msg": cpu_us,
    "bound_msg_per_s": bound,
    "bound_means": "cores / (bare row work's PostgreSQL CPU + nginx CPU per message): the most "
                   "any relay could drain into this receiver on this machine if it used no CPU "
                   "itself and kept no per-key order",
    "needed_for_targets_msg_per_s": needed},
  "versions": {"pg-transactional-outbox": a[14], "pg": a[15], "node": node, "npm": npm},
  "machine": {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
              "postgres": "15, wal_level=logical, " + a[20]},
}, indent=2))
PY
cat "$OUT"
