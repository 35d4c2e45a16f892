#!/usr/bin/env bash
# The data-port HTTP server choice (issue 14): cpp-httplib (tuned), libmicrohttpd 0.9.75 (epoll,
# thread pool) and libevent 2.1 evhttp serve the same two routes (bench/server_choice/
# candidates.cc); for each, on loopback:
#   1. wrk, keep-alive, POST /inbox/x with a 300-byte JSON body: requests/s and latency
#   2. 2,000 idle keep-alive connections: are they all answered, are fresh requests served while
#      they are open, and which are still open after 15 s
#   3. 64 slow-loris clients (headers one byte a second): are fresh requests served meanwhile
#   4. a chunked body of twice the cap: the status and how many bytes were sent before it
#
#   flock /tmp/queuebox-bench.lock bash bench/server_choice.sh     # DURATION=10 CONNS=64
#
# Waits (up to WAIT_LOAD s) for a 1-minute load average below 3. Writes
# bench/results/server_choice.json and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
# server:threads; cpp-httplib serves a connection per pool thread, so it gets as many as wrk has
# connections.
SERVERS=${SERVERS:-"httplib:64 httplib:8 mhd:2 evhttp:2"}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
PORT=${PORT:-18391}
CAP=${CAP:-1048576}
WAIT_LOAD=${WAIT_LOAD:-900}
OUT=${OUT:-bench/results/server_choice.json}
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

command -v wrk >/dev/null || { echo "needs wrk (apt-get install wrk)" >&2; exit 1; }
g++ -O2 -std=c++20 -o "$WORK/candidates" bench/server_choice/candidates.cc \
  $(pkg-config --cflags --libs cpp-httplib libmicrohttpd libevent libevent_pthreads) -pthread

load() { cut -d' ' -f1 /proc/loadavg; }
waited=0
while awk "BEGIN{exit !($(load) >= 3)}" && [ "$waited" -lt "$WAIT_LOAD" ]; do
  sleep 10; waited=$((waited + 10))
done
echo "load before: $(load) (waited ${waited}s)" >&2

cat > "$WORK/post.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"id":"evt_1","type":"payment.succeeded","data":{"object":{"id":"pi_1","amount":2000,"currency":"usd","customer":"cus_1","description":"order 1111","metadata":{"order":"1111","tenant":"acme"}}},"created":1700000000,"livemode":false,"pending_webhooks":1,"api_version":"2023-10-16"}'
LUA

start() {
  "$WORK/candidates" "$1" "$PORT" "$THREADS" "$CAP" > "$WORK/server.out" 2>"$WORK/server.err" &
  SERVER_PID=$!
  for _ in $(seq 100); do grep -q listening "$WORK/server.out" 2>/dev/null && return; sleep 0.05; done
  echo "server $1 did not start" >&2; exit 1
}
stop() { kill "$SERVER_PID"; (sleep 3; kill -9 "$SERVER_PID" 2>/dev/null) & wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }
threads_of() { ls "/proc/$SERVER_PID/task" | wc -l; }
rss_kb() { awk '/VmRSS/{print $2}' "/proc/$SERVER_PID/status"; }

echo "[" > "$WORK/all.json"
first=1
for entry in $SERVERS; do
  server=${entry%%:*}; THREADS=${entry##*:}
  echo "== $server ($THREADS threads)" >&2
  start "$server"
  wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -s "$WORK/post.lua" "http://127.0.0.1:$PORT/inbox/x" > "$WORK/wrk.txt"
  rps=$(awk '/Requests\/sec/{print $2}' "$WORK/wrk.txt")
  p50=$(awk '$1=="50%"{print $2}' "$WORK/wrk.txt")
  p99=$(awk '$1=="99%"{print $2}' "$WORK/wrk.txt")
  errors=$(grep -E "Non-2xx|Socket errors" "$WORK/wrk.txt" | tr '\n' ' ' || true)
  python3 bench/server_choice/probe.py idle "$PORT" 2000 15 > "$WORK/idle.json" &
  probe=$!
  sleep 8
  idle_threads=$(threads_of); idle_rss=$(rss_kb)
  wait "$probe"
  stop; start "$server"
  python3 bench/server_choice/probe.py slowloris "$PORT" 64 15 > "$WORK/slow.json"
  stop; start "$server"
  python3 bench/server_choice/probe.py chunked "$PORT" "$CAP" > "$WORK/chunked.json"
  stop
  [ $first -eq 1 ] || echo "," >> "$WORK/all.json"
  first=0
  cat >> "$WORK/all.json" <<JSON
{"server":"$server","threads":$THREADS,"wrk":{"connections":$CONNS,"seconds":$DURATION,
 "requests_per_s":$rps,"p50":"$p50","p99":"$p99","errors":"$errors"},
 "idle_2000":$(cat "$WORK/idle.json"),"threads_with_2000_idle":$idle_threads,"rss_kb_with_2000_idle":$idle_rss,
 "slowloris_64":$(cat "$WORK/slow.json"),"chunked_over_cap":$(cat "$WORK/chunked.json")}
JSON
done
echo "]" >> "$WORK/all.json"
mkdir -p "$(dirname "$OUT")"
python3 - "$WORK/all.json" "$OUT" <<'PY'
import json, os, platform, sys
runs = json.load(open(sys.argv[1]))
machine = {"cores": os.cpu_count(), "kernel": platform.release(),
           "load_after": open("/proc/loadavg").read().split()[:3]}
json.dump({"machine": machine, "runs": runs}, open(sys.argv[2], "w"), indent=1)
PY
cat "$OUT"
