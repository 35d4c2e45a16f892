#!/usr/bin/env bash
# Stored webhook requests/s (issue 14: at least 10,000/s on this machine), on a private
# PostgreSQL 15 cluster started twice: fsync on (synchronous_commit on, what users run), then fsync
# off. wrk (keep-alive, CONNS connections, THREADS threads) posts to one http source with hmac auth
# (HmacSHA256 over the body) on the queuebox binary's data port; the inbox relay is off, so only
# the intake is measured. Three cases per setting, each DURATION long:
#
#   new        every request a new event id (a fresh row), signatures precomputed
#   duplicate  one event id over and over (200 {"status":"duplicate"} after the first)
#   nohmac     new ids on a source without auth (what hmac costs)
#
# Rates: wrk's requests/s, the non-2xx count, and for `new` the rows the inbox holds / DURATION.
# CPU per request (microseconds, over the wrk run / its requests): the queuebox process, the
# PostgreSQL cluster (postmaster, live and reaped children), wrk, and the machine's busy time.
#
#   bash bench/webhook_bench.sh     # DURATION=10s CONNS=64 THREADS=2 EVENTS=400000
#
# Needs root (the cluster runs as user postgres) and wrk (apt-get install wrk). Writes bench/results/webhook.json and
# prints it. On a shared machine: flock /tmp/queuebox-bench.lock bash bench/webhook_bench.sh
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-64}
THREADS=${THREADS:-2}
EVENTS=${EVENTS:-400000}
PORT=${PORT:-18581}
PG_PORT=${PG_PORT:-18591}
BUILD_DIR=${BUILD_DIR:-build}
OUT=${OUT:-bench/results/webhook.json}
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
SECRET=bench-secret
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
HZ=$(getconf CLK_TCK)
command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }

if [ -z "${QB_BIN:-}" ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja >/dev/null
  cmake --build "$BUILD_DIR" --target queuebox >/dev/null
fi
QB="${QB_BIN:-$BUILD_DIR/apps/queuebox/queuebox}"
source bench/private_pg.sh
DB=qb_bench_webhook
RELAY_PID=
source bench/proc_cpu.sh
machine_ticks() { awk '/^cpu / {print $2+$3+$4+$7+$8+$9}' /proc/stat; }
q() { psql -qtAX "$BASE/$DB" -c "$1"; }

cat >"$WORK/qb.yml" <<YAML
database: {type: postgresql, url: "$BASE/$DB", poolSize: 10}
server: {address: 127.0.0.1, httpPort: $PORT}
inbox: {relay: {enabled: false}}
sources:
  signed:
    path: /signed
    topic: "{{ source }}"
    idempotencyKeyPath: \$.id
    auth: {type: hmac, secret: $SECRET, headerName: X-Signature}
  open:
    path: /open
    topic: "{{ source }}"
    idempotencyKeyPath: \$.id
logging: {format: json, level: warn}
YAML

# Precomputed bodies and signatures: "<signature>\t<body>" per line, ids unique per prefix.
make_events() {  # prefix count file
  python3 - "$1" "$2" "$3" "$SECRET" <<'PY'
import hashlib, hmac, sys
prefix, n, path, secret = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].encode()
with open(path, "w") as f:
    for i in range(n):
        body = '{"id":"%s-%d","type":"invoice.paid","data":{"amount":%d,"currency":"eur"}}' % (prefix, i, i)
        sig = "sha256=" + hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()
        f.write(sig + "\t" + body + "\n")
PY
}


fresh_db() {
  psql -q "$BASE/postgres" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
  "$QB" --config "$WORK/qb.yml" migrate >/dev/null 2>&1
}

start_relay() {
  "$QB" --config "$WORK/qb.yml" run >"$WORK/relay.log" 2>&1 &
  RELAY_PID=$!
  echo "$RELAY_PID" >"$WORK/relay.pid"
  for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$PORT/health/live" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "the relay did not start; its log:" >&2
  tail -20 "$WORK/relay.log" >&2
  exit 1
}
stop_relay() {
  kill -TERM "$RELAY_PID"
  wait "$RELAY_PID" || true
  rm -f "$WORK/relay.pid"
  RELAY_PID=
}

run_case() {  # fsync case path events_file -> JSON line
  fresh_db
  start_relay
  local out qb0 pg0 m0 qb1 pg1 m1
  qb0=$(cpu_ticks "$RELAY_PID")
  pg0=$(cluster_ticks "$(head -1 "$PGDATA/postmaster.pid")")
  m0=$(machine_ticks)
  out=$(/usr/bin/time -f '%U %S' -o "$WORK/wrk.time" wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" \
    -s bench/webhook_post.lua "http://127.0.0.1:$PORT/inbox/$3" -- "$4" "$THREADS")
  qb1=$(cpu_ticks "$RELAY_PID")
  pg1=$(cluster_ticks "$(head -1 "$PGDATA/postmaster.pid")")
  m1=$(machine_ticks)
  stop_relay
  local rps non2xx rows secs requests cpu
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  requests=$(echo "$out" | awk '/requests in/ {print $1}')
  rows=$(q "SELECT count(*) FROM inbox")
  secs=${DURATION%s}
  cpu=$(python3 -c "
hz, n = $HZ, max(1, $requests)
wrk = sum(map(float, '$(cat "$WORK/wrk.time")'.split())) * hz
us = lambda t: round(1e6 * t / hz / n, 1)
print('{\"queuebox\":%s,\"postgres\":%s,\"wrk\":%s,\"machine\":%s}' % (us($qb1 - $qb0), us($pg1 - $pg0), us(wrk), us($m1 - $m0)))")
  echo "{\"fsync\":\"$1\",\"case\":\"$2\",\"requests_per_s\":$rps,\"non_2xx\":${non2xx:-0},\"rows\":$rows,\"rows_per_s\":$(python3 -c "print(round($rows/$secs,1))"),\"cpu_us_per_request\":$cpu}"
}

make_events new "$EVENTS" "$WORK/new.tsv"
make_events dup 1 "$WORK/dup.tsv"
LINES="$WORK/lines.jsonl"
for fsync in on off; do
  start_pg "$fsync"
  echo "== fsync=$fsync" >&2
  run_case "$fsync" new signed "$WORK/new.tsv" | tee -a "$LINES" >&2
  run_case "$fsync" duplicate signed "$WORK/dup.tsv" | tee -a "$LINES" >&2
  run_case "$fsync" nohmac open "$WORK/new.tsv" | tee -a "$LINES" >&2
  stop_pg
done

python3 - "$LINES" "$OUT" <<PY
import json, platform, subprocess, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def rate(f, c):
    return next(l for l in lines if l["fsync"] == f and l["case"] == c)["requests_per_s"]
ratios = {f: {"duplicate_over_new": round(rate(f, "duplicate") / rate(f, "new"), 3),
              "hmac_over_nohmac": round(rate(f, "new") / rate(f, "nohmac"), 3)}
          for f in ("on", "off")}
ratios["new_fsync_on_over_off"] = round(rate("on", "new") / rate("off", "new"), 3)
out = {
    "benchmark": "stored webhook requests/s, wrk keep-alive -> queuebox data port -> PostgreSQL 15",
    "settings": {"duration": "$DURATION", "connections": $CONNS, "wrk_threads": $THREADS,
                 "database.poolSize": 10, "server": "cpp-httplib 0.11.4, a thread per open connection (elastic pool)"},
    "goal": "requests_per_s >= 10000 (new, hmac)",
    "results": lines, "ratios": ratios,
    "load_before": "$LOAD_BEFORE",
    "machine": {"cpus": subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip(),
                "kernel": platform.release()},
}
json.dump(out, open(sys.argv[2], "w"), indent=2)
print(json.dumps(out, indent=2))
PY
